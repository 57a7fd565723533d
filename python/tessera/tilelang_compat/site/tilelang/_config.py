"""Compiler switches of TileLang that have no meaning for tessera's CPU compiler; accepted so that
programs naming them run."""


class _AnyKey(type):
    def __getattr__(cls, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return name  # TileLang's keys are strings; every value is ignored by tessera.jit


class PassConfigKey(metaclass=_AnyKey):
    """``tilelang.PassConfigKey.TL_...``: any key; tessera.jit accepts and ignores pass_configs."""


_cache_enabled = True


def disable_cache():
    """Recorded only: tessera's kernel cache is keyed by the kernel source, so it is never stale."""
    global _cache_enabled
    _cache_enabled = False


def enable_cache():
    global _cache_enabled
    _cache_enabled = True


def is_cache_enabled():
    return _cache_enabled


def clear_cache():
    """Removes tessera's compiled-kernel cache folder."""
    import shutil

    from tessera.tl import cache_dir

    shutil.rmtree(cache_dir(), ignore_errors=True)


def set_log_level(level):
    """Accepted; tessera logs nothing during compilation."""
