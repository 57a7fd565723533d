"""Opt-in ``tilelang`` alias: run TileLang programs (``import tilelang``, ``import tilelang.language as
T``) on tessera without editing them.

The folder ``site/`` holds a package named ``tilelang`` whose modules forward to tessera.tl and
tessera.language. Nothing is aliased unless asked for, because a real TileLang installation may sit
in the same environment:

* ``python -m tessera.tilelang_compat --path`` prints that folder, for ``PYTHONPATH``;
* ``tessera.tilelang_compat.install()`` puts it first on ``sys.path`` in the running process.

docs/tl.md ("Running TileLang programs") lists what differs from TileLang.
"""
import os
import sys

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def path():
    """The folder that makes ``import tilelang`` resolve to tessera (put it on PYTHONPATH)."""
    return SITE


def install():
    """Makes ``import tilelang`` in this process load tessera's alias; returns the ``tilelang`` module.
    Raises ImportError when a different ``tilelang`` was imported already."""
    existing = sys.modules.get("tilelang")
    if existing is not None and not getattr(existing, "__tessera_alias__", False):
        raise ImportError(f"tessera.tilelang_compat.install(): a different 'tilelang' is already imported "
                          f"({getattr(existing, '__file__', existing)}); install the alias before importing it")
    if SITE not in sys.path:
        sys.path.insert(0, SITE)
    import tilelang

    return tilelang
