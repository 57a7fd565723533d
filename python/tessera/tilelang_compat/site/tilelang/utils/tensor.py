"""``tilelang.utils.tensor``: comparing torch tensors with a tolerated share of mismatches."""
from tessera.tl.profiler import TensorSupplyType  # noqa: F401


def map_torch_type(name):
    """The torch dtype of a dtype name ("float16", "float8_e4m3fn", ...)."""
    from tessera.language import dtype

    return dtype(name).as_torch()


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, verbose=False,
                       equal_nan=True, check_device=True, check_dtype=True, check_layout=True, check_stride=False,
                       base_name="LHS", ref_name="RHS"):
    """Raises AssertionError when more than max_mismatched_ratio of the elements are not close
    (|a - b| > atol + rtol * |b|); returns True otherwise. Both are compared in float64."""
    import torch

    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"torch_assert_close: dtypes differ: {base_name} {tensor_a.dtype}, {ref_name} {tensor_b.dtype}")
    if tensor_a.shape != tensor_b.shape:
        raise AssertionError(f"torch_assert_close: shapes differ: {base_name} {tuple(tensor_a.shape)}, "
                             f"{ref_name} {tuple(tensor_b.shape)}")
    a, b = tensor_a.detach().double().cpu(), tensor_b.detach().double().cpu()
    mismatched = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    count, total = int(mismatched.sum()), a.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {count} / {total} (allowed: {allowed})")
    if count > allowed:
        flat = int(torch.argmax(mismatched.reshape(-1).int()))
        idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)]
        av, bv = float(a.reshape(-1)[flat]), float(b.reshape(-1)[flat])
        raise AssertionError(f"Too many mismatched elements: {count} > {allowed} "
                             f"({max_mismatched_ratio * 100:.2f}% allowed); first at {idx}: {base_name}={av}, "
                             f"{ref_name}={bv}; greatest absolute difference {float((a - b).abs().max())}")
    return True
