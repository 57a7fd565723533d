"""The tessera top level: version, threads, CPU features, ISA cap, error classes."""
import importlib.metadata
import platform

import pytest

import tessera


def test_version_matches_the_installed_distribution():
    assert tessera.__version__ == importlib.metadata.version("tessera") == "0.1.0"


def test_set_num_threads_round_trips_and_resets():
    default = tessera.num_threads()
    assert default >= 1
    try:
        tessera.set_num_threads(1)
        assert tessera.num_threads() == 1
        tessera.set_num_threads(3)
        assert tessera.num_threads() == 3
    finally:
        tessera.set_num_threads(0)
    assert tessera.num_threads() == default


def test_cpu_info_describes_this_machine():
    info = tessera.cpu_info()
    assert set(info) >= {"vendor", "model", "logical_cpus", "features", "best_isa", "active_isa"}
    assert info["logical_cpus"] >= 1
    assert isinstance(info["features"], list) and all(isinstance(f, str) for f in info["features"])
    # Each architecture's levels in order (docs/cpu.md); an x86 build never reports an ARM level, nor back.
    arm = platform.machine() in ("aarch64", "arm64")
    levels = ["scalar", "neon", "neon_bf16", "sve"] if arm else ["scalar", "avx2", "avx512", "avx512bf16", "amx"]
    assert info["best_isa"] in levels and info["active_isa"] in levels
    assert levels.index(info["active_isa"]) <= levels.index(info["best_isa"])
    print(info)


def test_set_isa_caps_the_active_level_and_none_lifts_it():
    best = tessera.cpu_info()["best_isa"]
    try:
        tessera.set_isa("scalar")
        assert tessera.cpu_info()["active_isa"] == "scalar"
    finally:
        tessera.set_isa(None)
    assert tessera.cpu_info()["active_isa"] == best


def test_set_isa_rejects_unknown_names_and_types():
    with pytest.raises(tessera.InvalidArgumentError, match="unknown ISA 'sse9'"):
        tessera.set_isa("sse9")
    with pytest.raises(TypeError):
        tessera.set_isa(3)


def test_error_classes_are_catchable_the_python_and_the_deepgemm_way():
    assert issubclass(tessera.InvalidArgumentError, ValueError)
    assert issubclass(tessera.InvalidArgumentError, RuntimeError)
    assert issubclass(tessera.NotImplementedInTessera, NotImplementedError)
    assert issubclass(tessera.TesseraRuntimeError, RuntimeError)
    for cls in (tessera.InvalidArgumentError, tessera.NotImplementedInTessera, tessera.TesseraRuntimeError):
        assert issubclass(cls, tessera.TesseraError)
