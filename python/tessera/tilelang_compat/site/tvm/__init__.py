"""A minimal ``tvm`` for TileLang programs that use a few TVM helpers next to TileLang (TileLang ships
TVM; tessera does not use it). Only ``DataType`` and ``tvm.tirx`` scalar helpers exist here."""
from tessera.language import dtype as DataType  # noqa: F401,N812

from . import tirx  # noqa: F401

__tessera_alias__ = True
