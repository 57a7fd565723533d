"""DeepSelect's interface contract: argument checks in its order and exception types before the backend
or any allocation, torch defaults, the backend swap, and the memory rules of its backend."""
import importlib
import sys
import types

import numpy as np
import pytest

from tessera import deep_select
from tessera.deep_select import deep_select_cuda

torch = pytest.importorskip("torch")


def test_torch_input_defaults_to_torch_int64_and_returns_tensors():
    x = torch.arange(64, dtype=torch.float32).reshape(2, 32)
    values, indices = deep_select.topk(x, 3, sorted=True)
    assert isinstance(indices, torch.Tensor) and indices.dtype == torch.int64
    assert torch.equal(indices, torch.tensor([[31, 30, 29], [31, 30, 29]]))
    assert torch.equal(values, x.gather(1, indices))
    assert indices.stride(0) * 8 % 32 == 0  # rows padded to the output stride requirement
    _, idx_np = deep_select.topk(x.numpy(), 3)
    assert isinstance(idx_np, np.ndarray) and idx_np.dtype == np.int64


def _interface_with_fake_backend():
    """tessera's interface.py loaded under DeepSelect's package name next to a counting fake backend."""
    calls = []
    backend = types.ModuleType("deep_select.deep_select_cuda")
    backend.get_alignment_requirement = lambda: (16, 32)
    backend.topk = lambda *args: calls.append(args)
    saved = {n: sys.modules.get(n) for n in ("deep_select", "deep_select.deep_select_cuda", "deep_select.interface")}
    package = types.ModuleType("deep_select")
    package.__path__ = []
    sys.modules.update({"deep_select": package, "deep_select.deep_select_cuda": backend})
    try:
        spec = importlib.util.spec_from_file_location("deep_select.interface", deep_select.interface.__file__)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
    return module, calls


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(k=4, hint=torch.zeros(1, dtype=torch.int32)), ValueError, "argument 'hint' is not supported"),
    (dict(k=4, begin=torch.zeros(1, dtype=torch.int32)), ValueError, "argument 'begin' is not supported"),
    (dict(k=0), ValueError, r"argument 'topk' must be in \[1, 4096\], got 0"),
    (dict(k=4097, return_value=False), ValueError, "got 4097"),
    (dict(k=2**31), ValueError, "got 2147483648"),
    (dict(k=4, output_idx=torch.empty((1, 4), dtype=torch.int32), indices_type=torch.int64), TypeError,
     r"argument 'output_idx' must have dtype indices_type \(int64\), got int32"),
    (dict(k=4, sorted="yes"), TypeError, "argument 'sorted' must be a bool"),
])
def test_rejections_come_before_allocation_and_backend(monkeypatch, kwargs, error, message):
    interface, calls = _interface_with_fake_backend()
    k = kwargs.pop("k")

    def no_alloc(*_a, **_k):
        raise AssertionError("output allocation attempted")

    monkeypatch.setattr(torch, "empty", no_alloc)
    with pytest.raises(error, match=message):
        interface.topk(torch.ones((1, 32)), k, **kwargs)
    assert calls == []


def test_valid_call_reaches_the_swapped_backend_with_its_protocol():
    interface, calls = _interface_with_fake_backend()
    out = torch.empty((2, 4), dtype=torch.int64)
    x = torch.ones((2, 64))
    values, indices = interface.topk(x, 4, return_value=False, output_idx=out, end=None)
    assert values is None and indices is out and len(calls) == 1
    args = calls[0]
    assert len(args) == 13 and args[0] is x and args[1] == 4 and args[2] is None and args[7] is out
    v, i = interface.topk(x, 4096)  # k above the row length is allowed; outputs keep 32-byte rows
    assert v.shape == (2, 4096) and v.stride(0) * 4 % 32 == 0 and i.stride(0) * 8 % 32 == 0


def test_backend_memory_rules():
    x = torch.ones((2, 512))
    with pytest.raises(RuntimeError, match=r"input.data_ptr\(\) must be 16-byte aligned"):
        deep_select.topk(x[:, 1:257], 1)
    backing = torch.empty((2, 16), dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"output_index.data_ptr\(\) must be 16-byte aligned"):
        deep_select.topk(x, 1, output_idx=backing[:, 1:2], indices_type=torch.int32)
    shared = torch.empty((1, 8), dtype=torch.int32)[:, :1].expand(2, 1)
    with pytest.raises(RuntimeError, match="output_index rows must not overlap"):
        deep_select.topk(x, 1, output_idx=shared, indices_type=torch.int32)
    unpadded = torch.ones(512 + 257).as_strided((2, 257), (512, 1))
    with pytest.raises(RuntimeError, match="input backing storage must cover 2 full rows of stride 512"):
        deep_select.topk(unpadded, 1)
    padded = torch.ones((2, 512))[:, :257]
    values, _ = deep_select.topk(padded, 1)
    assert torch.equal(values, torch.ones((2, 1)))
    np_unpadded = np.lib.stride_tricks.as_strided(np.ones(512 + 257, np.float32), (2, 257), (2048, 4))
    with pytest.raises(ValueError, match="input backing storage"):
        deep_select.topk(np_unpadded, 1)


def test_backend_begin_ranges_use_absolute_indices():
    x = np.arange(40, dtype=np.float32)[None].repeat(2, 0)
    values = np.empty((2, 3), np.float32)
    indices = np.empty((2, 3), np.int64)
    begin, end = np.array([5, 0], np.int32), np.array([9, 2], np.int32)
    deep_select_cuda.topk(x, 3, begin, end, True, False, values, indices, None, -1, -7.0, True, True)
    assert indices.tolist() == [[8, 7, 6], [1, 0, -1]] and values.tolist() == [[8, 7, 6], [1, 0, -7]]
