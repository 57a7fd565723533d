"""Runs CUDA-addressed torch code on the CPU, for DeepEP's test files: every torch call that names a
CUDA device gets the CPU instead (a torch-function mode), and the torch.cuda calls the tests make
(synchronize, timing events, sleeps, device properties) get CPU stand-ins."""
import os
import time
import types

import torch
from torch.overrides import TorchFunctionMode


def _cpu(device):
    if isinstance(device, str) and device.startswith("cuda"):
        return "cpu"
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    return device


# GPU tests allocate huge scratch tensors only to evict the L2 cache (e.g. 16 GiB of zeros in
# test_pp's profiling loop); on the CPU these get a one-element tensor, their result is never read.
_CACHE_FLUSH_BYTES = 2 << 30


def _flush_sized(func, args, kwargs) -> bool:
    if func not in (torch.zeros, torch.empty) or not args:
        return False
    shape = args[0] if isinstance(args[0], (tuple, list, torch.Size)) else args
    if not all(isinstance(d, int) for d in shape):
        return False
    dtype = kwargs.get("dtype") or torch.get_default_dtype()
    numel = 1
    for d in shape:
        numel *= d
    return numel * dtype.itemsize > _CACHE_FLUSH_BYTES


class _CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        if _flush_sized(func, args, kwargs):
            return func(1, dtype=kwargs.get("dtype"))
        if func is torch.Tensor.to and args:
            args = tuple(_cpu(a) for a in args)
        return func(*args, **kwargs)


class _Event:
    """torch.cuda.Event on the CPU: record() takes the wall clock."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        return None

    def wait(self, stream=None):
        return None

    def query(self):
        return True

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class _Stream:
    def __init__(self, *args, **kwargs):
        pass

    def synchronize(self):
        return None

    def wait_stream(self, other):
        return None

    def wait_event(self, event):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _sleep(cycles):
    # A GPU busy-wait of `cycles` clocks (about 2 GHz); kept short, it only shapes overlap tests.
    time.sleep(min(int(cycles) / 2e9, 0.05))


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    _CudaToCpu().__enter__()  # stays on the mode stack for the life of the process
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    cuda = torch.cuda
    cuda.synchronize = lambda device=None: None
    cuda.Event = _Event
    cuda.Stream = _Stream
    cuda.current_stream = lambda device=None: _Stream()
    cuda.stream = lambda stream=None: _Stream()
    cuda._sleep = _sleep
    cuda.set_device = lambda device: None
    cuda.current_device = lambda: 0
    cuda.device_count = lambda: 1
    cuda.get_device_name = lambda device=None: "CPU"
    cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        multi_processor_count=os.cpu_count() or 1, name="CPU", total_memory=0)
