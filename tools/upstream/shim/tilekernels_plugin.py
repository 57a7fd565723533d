"""pytest plugin: runs DeepSeek TileKernels test files on tessera's ``tilelang`` alias and records, per
test item, which ``@tilelang.jit`` kernels compiled and ran and where the first error came from.

Loaded by run_tilekernels.py with ``-p tilekernels_plugin``. Settings come from the environment:
TK_RESULT (JSON file written at the end), TK_CASES (parametrized cases kept per test function),
TK_CHECKOUT (the TileKernels tree; default: the working directory).

- ``cuda`` tensors are mapped to the CPU (cpu_cuda.py); ``torch.compile`` (TileKernels' data
  generators) runs the function eagerly: there is no CPU inductor toolchain to rely on here.
- A kernel is attributed to its source file through the factory tessera's ``jit`` wraps; an error
  is attributed to the innermost ``*_kernel.py`` frame of its traceback.
"""
import json
import os
import sys
import traceback

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_cuda  # noqa: E402

cpu_cuda.install()

import torch  # noqa: E402


def _eager_compile(fn=None, *args, **kwargs):
    return fn if fn is not None else (lambda f: f)


torch.compile = _eager_compile

RESULT = {"items": [], "compiled": {}, "ran": {}}
_KERNELS_DIR = os.path.join(os.path.realpath(os.environ.get("TK_CHECKOUT", os.getcwd())), "tile_kernels") + os.sep


def _is_kernel_file(path):
    """A ``*_kernel.py`` of the TileKernels checkout (not tessera's own modules of similar names)."""
    return path.endswith("_kernel.py") and os.path.realpath(path).startswith(_KERNELS_DIR)
_current = {"item": None}


def _kernel_site():
    """(kernel file relative to tile_kernels/, factory name) of the jit factory being compiled or
    run, found on the Python stack; None when the kernel was not built by a TileKernels file."""
    frame = sys._getframe(2)
    while frame is not None:
        f = frame.f_locals.get("f") if frame.f_code.co_name == "factory" else None
        if callable(f) and hasattr(f, "__code__") and _is_kernel_file(f.__code__.co_filename):
            return _rel(f.__code__.co_filename), f.__name__
        if _is_kernel_file(frame.f_code.co_filename):
            return _rel(frame.f_code.co_filename), frame.f_code.co_name
        frame = frame.f_back
    return None


def _rel(path):
    return os.path.relpath(os.path.realpath(path), _KERNELS_DIR).replace(os.sep, "/")


def _note(table, site):
    if site is None:
        return
    key = f"{site[0]}::{site[1]}"
    table[key] = table.get(key, 0) + 1
    item = _current["item"]
    if item is not None:
        item.setdefault("compiled" if table is RESULT["compiled"] else "ran", []).append(key)


def _hook_tessera():
    from tessera.tl import kernel as tl_kernel

    real_init, real_call = tl_kernel.JITKernel.__init__, tl_kernel.JITKernel.call_all

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self._tk_site = _kernel_site()
        _note(RESULT["compiled"], self._tk_site)

    def call_all(self, args):
        out = real_call(self, args)
        _note(RESULT["ran"], getattr(self, "_tk_site", None))
        return out

    tl_kernel.JITKernel.__init__, tl_kernel.JITKernel.call_all = init, call_all


_hook_tessera()


def pytest_collection_modifyitems(config, items):
    keep = int(os.environ.get("TK_CASES", "2"))
    seen, kept, dropped = {}, [], []
    for item in items:
        if item.get_closest_marker("benchmark") is not None:
            dropped.append(item)
            continue
        name = getattr(item, "originalname", item.name)
        seen[name] = seen.get(name, 0) + 1
        (kept if seen[name] <= keep else dropped).append(item)
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _current["item"] = {"id": item.nodeid, "outcome": "error", "error": "", "error_site": None}
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    rec = _current["item"]
    if call.when != "call" or rec is None:
        if report.failed and call.when == "setup":
            RESULT["items"].append({"id": item.nodeid, "outcome": "error", "error": _first_line(call.excinfo),
                                    "error_site": None})
        return
    rec["outcome"] = "passed" if report.passed else "skipped" if report.skipped else "failed"
    if call.excinfo is not None and not report.skipped:
        rec["error"] = _first_line(call.excinfo)
        rec["error_site"] = _error_site(call.excinfo)
        rec["assertion"] = call.excinfo.errisinstance(AssertionError)
    RESULT["items"].append(rec)
    _current["item"] = None


def _first_line(excinfo):
    if excinfo is None:
        return ""
    text = f"{excinfo.typename}: {excinfo.value}"
    return " ".join(text.split())[:300]


def _error_site(excinfo):
    site = None
    for frame in traceback.extract_tb(excinfo.tb):
        if _is_kernel_file(frame.filename):
            site = f"{_rel(frame.filename)}:{frame.lineno}"
    return site


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("TK_RESULT")
    if path:
        with open(path, "w") as f:
            json.dump(RESULT, f, indent=1)
