"""FlashMLA's ``flash_mla.flash_mla_interface``: the same names as the package (code that imports from
the submodule, as FlashMLA's own modules do, finds them here)."""
from ._interface import (  # noqa: F401 - re-exports
    FlashMLASchedMeta,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_mla_sparse_fwd,
    flash_mla_with_kvcache,
    get_mla_decoding_metadata,
    get_mla_metadata,
)

__all__ = ["FlashMLASchedMeta", "flash_attn_varlen_func", "flash_attn_varlen_kvpacked_func",
           "flash_attn_varlen_qkvpacked_func", "flash_mla_sparse_fwd", "flash_mla_with_kvcache",
           "get_mla_decoding_metadata", "get_mla_metadata"]
