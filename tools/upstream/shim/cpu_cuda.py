"""Runs CUDA-targeted torch code on the CPU: ``device='cuda'`` becomes ``'cpu'`` and ``torch.cuda``
answers as one SM100 device, so DeepSeek's test files run unchanged against tessera.

The device rewrite is a TorchFunctionMode (it sees factory calls such as ``torch.empty(...,
device='cuda')`` as well as ``Tensor.to('cuda')``); the ``torch.cuda`` functions that only
synchronise, time or report the device are replaced by CPU equivalents.
"""
import contextlib
import os
import time
import types

import torch
from torch.overrides import TorchFunctionMode

ARCH = (10, 0)  # set by install() from TESSERA_SHIM_ARCH (per test file: "9.0" for Hopper-only suites)


def _is_cuda(dev) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    if isinstance(dev, str):
        return dev.split(":")[0] == "cuda"
    return False


def _cpu(dev):
    return "cpu" if _is_cuda(dev) or isinstance(dev, int) and not isinstance(dev, bool) else dev


class _CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        if kwargs.get("pin_memory"):  # page-locked host memory needs the CUDA driver
            kwargs["pin_memory"] = False
        if func in (torch.Tensor.cuda, torch.Tensor.pin_memory):
            return args[0]
        if func is torch.Tensor.to and len(args) > 1 and (_is_cuda(args[1]) or
                                                         isinstance(args[1], int) and not isinstance(args[1], bool)):
            args = (args[0], "cpu") + tuple(args[2:])
        return func(*args, **kwargs)


class _Event:
    def __init__(self, enable_timing=False, **_):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def query(self):
        return True

    def wait(self, stream=None):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class _Stream:
    def __init__(self, *_, **__):
        pass

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record()
        return event


def _props(device=None):
    return types.SimpleNamespace(name="tessera-cpu", major=ARCH[0], minor=ARCH[1],
                                 multi_processor_count=int(os.environ.get("TESSERA_SHIM_SMS", "148")),
                                 total_memory=64 << 30, L2_cache_size=64 << 20,
                                 shared_memory_per_multiprocessor=228 << 10, shared_memory_per_block=48 << 10,
                                 shared_memory_per_block_optin=227 << 10, max_threads_per_multi_processor=2048,
                                 regs_per_multiprocessor=65536, warp_size=32)


def _noop(*_, **__):
    return None


def _fresh_noop():
    # A distinct function per attribute: torch._dynamo keys its rules by function object and rejects one
    # object registered under two torch.cuda names.
    def noop(*_, **__):
        return None
    return noop


def _generator_class():
    """torch.Generator whose device='cuda' is the CPU (a CUDA generator needs the driver)."""

    base = torch.Generator

    class Generator(base):
        def __new__(cls, device=None):
            return base.__new__(cls, device=_cpu(device) if device is not None else "cpu")

        def __init__(self, device=None):
            pass

    return Generator


def install():
    global ARCH
    ARCH = tuple(int(v) for v in os.environ.get("TESSERA_SHIM_ARCH", "10.0").split("."))
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.get_device_capability = lambda device=None: ARCH
    cuda.get_device_name = lambda device=None: "tessera-cpu"
    cuda.get_device_properties = _props
    for name in ("synchronize", "set_device", "empty_cache", "manual_seed", "manual_seed_all",
                 "reset_peak_memory_stats", "init", "_sleep", "_lazy_init"):
        setattr(cuda, name, _fresh_noop())
    cuda.memory_allocated = lambda device=None: 0
    cuda.max_memory_allocated = lambda device=None: 0
    cuda.Event = _Event
    cuda.Stream = _Stream
    cuda.current_stream = lambda device=None: _Stream()
    cuda.default_stream = lambda device=None: _Stream()
    cuda.stream = lambda s=None: contextlib.nullcontext()
    cuda.device = lambda d=None: contextlib.nullcontext()
    cuda.nvtx = types.SimpleNamespace(range_push=_fresh_noop(), range_pop=_fresh_noop(),
                                      range=lambda *_a, **_k: contextlib.nullcontext())

    torch.Generator = _generator_class()

    set_default_device = torch.set_default_device
    torch.set_default_device = lambda dev: set_default_device(_cpu(dev))
    _CudaToCpu().__enter__()  # stays pushed for the life of the process
