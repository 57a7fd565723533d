"""The compiled tile-language kernels of tessera.tile_kernels, built once per argument set and ISA level.

A kernel is compiled for the ISA level active when it is built (tessera.set_isa / TESSERA_ISA cap it),
so the cache key holds that level: after set_isa, the next call builds or finds the new level's kernel
instead of running the one compiled before.
"""
import functools

from .. import _C


def kernel_cache(build):
    """functools.lru_cache(maxsize=None) for kernel builders, keyed by the active ISA level too."""

    @functools.lru_cache(maxsize=None)
    def built(isa, *args, **kwargs):
        return build(*args, **kwargs)

    @functools.wraps(build)
    def cached(*args, **kwargs):
        return built(_C.active_isa(), *args, **kwargs)

    cached.cache_clear = built.cache_clear
    return cached
