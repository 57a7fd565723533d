"""Runs one DeepSeek test file in this process and writes what happened as JSON.

usage: python drive.py TEST_FILE RESULT_JSON CONFIG_JSON

CONFIG_JSON (written by run_deepseek_suites.py) holds the per-file settings: shrink factor and
threshold, the per-case functions to count (and sample), and argument overrides for cases whose
parts are out of scope. Unittest-style files are run with unittest and their results recorded.
"""
import builtins
import contextlib
import importlib.abc
import importlib.util
import json
import os
import sys
import time
import traceback
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import alias  # noqa: E402
import cpu_cuda  # noqa: E402
import reduce  # noqa: E402

RESULT = {"checks_passed": 0, "checks_failed": 0, "failures": [], "statements": [], "cases": {},
          "unittest": None}
_MAX_MESSAGES = 30


def _note_failure(text: str):
    if len(RESULT["failures"]) < _MAX_MESSAGES:
        RESULT["failures"].append(text[:600])


def _check(cond, msg, where):
    if cond:
        RESULT["checks_passed"] += 1
        return
    RESULT["checks_failed"] += 1
    try:
        text = msg()
    except Exception as e:  # the message itself failed to format
        text = f"<message raised {e!r}>"
    _note_failure(f"assert failed at {where}: {text}")


@contextlib.contextmanager
def _statement(label):
    entry = {"stmt": label, "status": "ok"}
    RESULT["statements"].append(entry)
    before = RESULT["checks_failed"]
    try:
        yield
    except SystemExit as e:
        entry["status"] = "exit" if e.code not in (None, 0) else "ok"
    except BaseException as e:  # noqa: BLE001 - every failure of a statement is recorded, then the next runs
        entry["status"] = "error"
        entry["error"] = f"{type(e).__name__}: {e}"[:600]
        _note_failure(f"{label}: {traceback.format_exc()[-1500:]}")
    if entry["status"] == "ok" and RESULT["checks_failed"] > before:
        entry["status"] = "failed-checks"


class _NotRun:
    """What a case that was not sampled returns: true, and any field a script reads of a result
    (``is_correct``, times) is true / 1."""

    def __bool__(self):
        return True

    def __getattr__(self, name):
        return True

    def __repr__(self):
        return "<not run>"


class _Cases:
    """Wraps a per-case function: counts pass/fail/error, runs an evenly spread sample, and always
    returns True so the script goes on to the next case (the failure is recorded here)."""

    def __init__(self, name, fn, every=1, limit=None, overrides=None):
        self.name, self.fn, self.every, self.limit = name, fn, every, limit
        self.overrides = overrides or {}
        self.stats = RESULT["cases"].setdefault(name, {"seen": 0, "run": 0, "passed": 0, "failed": 0,
                                                       "errors": 0, "not_sampled": 0, "overridden": 0})

    def __call__(self, *args, **kwargs):
        s = self.stats
        s["seen"] += 1
        if (s["seen"] - 1) % self.every or (self.limit is not None and s["run"] >= self.limit):
            s["not_sampled"] += 1
            return _NotRun()
        args, kwargs = self._override(args, kwargs)
        s["run"] += 1
        before = RESULT["checks_failed"]
        try:
            ok = self.fn(*args, **kwargs)
        except Exception:  # noqa: BLE001
            s["errors"] += 1
            _note_failure(f"{self.name}{self._describe(args)}: {traceback.format_exc()[-1500:]}")
            return _NotRun()
        verdict = getattr(ok, "is_correct", ok)
        if verdict is False or RESULT["checks_failed"] > before:
            s["failed"] += 1
            _note_failure(f"{self.name}{self._describe(args)}: returned {ok!r}")
            return _NotRun()  # recorded here; the script goes on to its next case
        s["passed"] += 1
        return ok if ok is not None else _NotRun()

    def _override(self, args, kwargs):
        import inspect
        if not self.overrides:
            return args, kwargs
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        changed = False
        for key, value in self.overrides.items():
            if key in bound.arguments and bound.arguments[key] != value:
                bound.arguments[key] = value
                changed = True
        self.stats["overridden"] += changed
        return bound.args, bound.kwargs

    @staticmethod
    def _describe(args):
        return "(" + ", ".join(repr(a)[:120] for a in args) + ")"


def _wrap_cases(cfg):
    def wrap(namespace):
        for name, opts in cfg.get("cases", {}).items():
            if name in namespace:
                namespace[name] = _Cases(name, namespace[name], opts.get("every", 1), opts.get("limit"),
                                         opts.get("overrides"))
    return wrap


class _RewritingFinder(importlib.abc.MetaPathFinder):
    """Loads the helper modules next to the test file (generators.py, lib.py, kernelkit, ...) through
    the same shrink/assert rewrite as the test file."""

    def __init__(self, root, cfg):
        self.root, self.cfg = os.path.realpath(root), cfg

    def find_spec(self, name, path=None, target=None):
        search = path or [self.root]
        for base in search:
            base = os.path.realpath(base)
            if not base.startswith(self.root):
                continue
            leaf = name.rpartition(".")[2]
            for candidate, is_pkg in ((os.path.join(base, leaf, "__init__.py"), True),
                                      (os.path.join(base, leaf + ".py"), False)):
                if os.path.isfile(candidate):
                    return importlib.util.spec_from_file_location(
                        name, candidate, loader=_RewritingLoader(name, candidate, self.cfg),
                        submodule_search_locations=[os.path.dirname(candidate)] if is_pkg else None)
        return None


class _RewritingLoader(importlib.abc.Loader):
    def __init__(self, name, path, cfg):
        self.name, self.path, self.cfg = name, path, cfg

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(self.path) as f:
            tree = reduce.rewrite(f.read(), self.path, self.cfg.get("factor", 1),
                                  self.cfg.get("threshold", 1 << 62), guard_main=False)
        exec(compile(tree, self.path, "exec"), module.__dict__)


def _stub_profilers():
    """Kernel profilers have no CPU trace: time one call of fn instead (DeepSeek's suites only print
    these numbers)."""
    import tessera.deep_gemm.testing as dg_testing
    dg_bench = sys.modules["tessera.deep_gemm.testing.bench"]  # the package attribute is the function
    real_kineto, real_bench = dg_bench.bench_kineto, dg_bench.bench

    def bench_kineto(fn, kernel_names, num_tests=30, *args, **kwargs):
        kwargs["flush_l2"] = False
        return real_kineto(fn, kernel_names, 1, *args, **kwargs)

    def bench(fn, num_warmups=5, num_tests=10, high_precision=False):
        return real_bench(fn, 0, 1, high_precision)

    for mod in (dg_testing, dg_bench):
        mod.bench_kineto, mod.bench = bench_kineto, bench

    do_bench = lambda fn, *a, **k: (fn(), 1e-3)[1]  # noqa: E731 - ms, like triton's
    if importlib.util.find_spec("triton") is None:
        triton = types.ModuleType("triton")
        triton.testing = types.ModuleType("triton.testing")
        sys.modules["triton"], sys.modules["triton.testing"] = triton, triton.testing
    import triton.testing
    triton.testing.do_bench = do_bench


def _stub_kernelkit():
    if "kernelkit" not in sys.modules and importlib.util.find_spec("kernelkit") is None:
        return
    import kernelkit

    class _Timed:
        def __init__(self, seconds):
            self.seconds = seconds

        def get_kernel_names(self):
            return ["topk_stub_kernel"]

        def get_kernel_time(self, *_):
            return self.seconds

        def get_kernel_times(self, names, *_, **__):
            return [self.seconds for _ in names]

        def get_e2e_time(self, *_):
            return self.seconds

    def bench_kineto(fn, num_tests=30, flush_l2=True):
        start = time.perf_counter()
        fn()
        return _Timed(max(time.perf_counter() - start, 1e-9))

    def bench_by_cuda_events(kernels, num_warmups_each=0, num_runs_each=1):
        many = isinstance(kernels, (list, tuple))
        times = []
        for k in (kernels if many else [kernels]):
            start = time.perf_counter()
            k()
            times.append(max(time.perf_counter() - start, 1e-9))
        return times if many else times[0]

    for mod in (kernelkit, getattr(kernelkit, "bench", None)):
        if isinstance(mod, types.ModuleType):
            mod.bench_kineto, mod.bench_by_cuda_events = bench_kineto, bench_by_cuda_events
    if not isinstance(getattr(kernelkit, "bench", None), types.ModuleType):
        kernelkit.bench = lambda fn, num_runs=1, *a, **k: bench_kineto(fn)  # DeepSelect's kk.bench


def _alias_files(table, checkout):
    """Tests that load a package file by path (DeepSelect's host tests load deep_select/interface.py)
    get tessera's file for it: the by-path form of the package alias."""
    if not table:
        return
    real = importlib.util.spec_from_file_location

    def spec_from_file_location(name, location=None, *args, **kwargs):
        rel = os.path.relpath(os.path.realpath(str(location)), os.path.realpath(checkout)) if location else ""
        if rel in table:
            location = importlib.util.find_spec(table[rel]).origin
        return real(name, location, *args, **kwargs)

    importlib.util.spec_from_file_location = spec_from_file_location


def _run_unittest(path):
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromName(os.path.splitext(os.path.basename(path))[0])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    RESULT["unittest"] = {"run": result.testsRun, "failures": len(result.failures), "errors": len(result.errors),
                          "skipped": len(result.skipped)}
    for test, text in result.failures + result.errors:
        _note_failure(f"{test.id()}: {text[-1200:]}")


def main():
    path, out, cfg_path = sys.argv[1:4]
    with open(cfg_path) as f:
        cfg = json.load(f)
    for key, value in cfg.get("env", {}).items():
        os.environ.setdefault(key, value)
    cpu_cuda.install()
    alias.install()
    tests_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, tests_dir)
    sys.meta_path.insert(1, _RewritingFinder(tests_dir, cfg))
    builtins.__shim_check__ = _check
    builtins.__shim_statement__ = _statement
    builtins.__shim_wrap_cases__ = _wrap_cases(cfg)
    _alias_files(cfg.get("file_aliases", {}), os.path.dirname(tests_dir))
    _stub_profilers()
    _stub_kernelkit()
    if cfg.get("time_sleep_noop", True):
        time.sleep = lambda *_: None
    sys.argv = [path] + cfg.get("argv", [])
    try:
        if cfg.get("kind") == "unittest":
            _run_unittest(path)
        else:
            with open(path) as f:
                tree = reduce.rewrite(f.read(), path, cfg.get("factor", 1), cfg.get("threshold", 1 << 62),
                                      guard_main=True)
            module = types.ModuleType("__main__")
            module.__file__ = path
            sys.modules["__main__"] = module
            with _statement("<module>"):
                exec(compile(tree, path, "exec"), module.__dict__)
    finally:
        with open(out, "w") as f:
            json.dump(RESULT, f, indent=1)


if __name__ == "__main__":
    main()
