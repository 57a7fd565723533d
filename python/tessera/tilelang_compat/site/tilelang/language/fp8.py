"""``tilelang.language.fp8``: the fp8 dtypes of the target (the CPU uses the OCP e4m3fn / e5m2)."""
from tessera.language import float8_e4m3fn, float8_e5m2


def determine_fp8_type(fp8_format="e4m3"):
    """The fp8 dtype name for fp8_format ("e4m3" or "e5m2")."""
    if fp8_format not in ("e4m3", "e5m2"):
        raise ValueError(f"determine_fp8_type: argument 'fp8_format' must be 'e4m3' or 'e5m2', got {fp8_format!r}")
    return float8_e4m3fn if fp8_format == "e4m3" else float8_e5m2


def determine_torch_fp8_type(fp8_format="e4m3"):
    import torch

    return torch.float8_e4m3fn if determine_fp8_type(fp8_format) == float8_e4m3fn else torch.float8_e5m2
