"""DeepGEMM's ``deep_gemm.testing.utils``: the architecture query and the test decorators."""
import functools
import os

# The architecture tessera reports: DeepGEMM's SM100 personality (both scale-factor formats, any operand
# major-ness). Tests that branch on it take the SM100 path; TESSERA_ARCH_MAJOR overrides it.
_DEFAULT_ARCH_MAJOR = 10


def get_arch_major() -> int:
    """The device's compute-capability major: 10 (tessera implements the SM100 API), or the
    ``TESSERA_ARCH_MAJOR`` environment variable. With torch imported and ``torch.cuda`` reporting a
    device (a harness that maps CUDA calls onto the CPU), that device's major is returned, as DeepGEMM does."""
    env = os.environ.get("TESSERA_ARCH_MAJOR")
    if env:
        return int(env)
    import sys
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return int(torch.cuda.get_device_capability()[0])
        except Exception:  # noqa: BLE001 - a CPU-only torch raises here; fall back to our own answer
            pass
    return _DEFAULT_ARCH_MAJOR


def test_filter(condition):
    """Decorator: run the test only when ``condition()`` is true, else print that it was filtered."""
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if condition():
                return func(*args, **kwargs)
            print(f"{func.__name__}:")
            print(f" > Filtered by {condition}")
            print()
            return None
        return wrapper
    return decorator


def ignore_env(name: str, condition):
    """Decorator: while the test runs and ``condition()`` is true, environment variable ``name`` is
    removed (and restored afterwards, also when the test raises)."""
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not condition():
                return func(*args, **kwargs)
            saved = os.environ.pop(name, None)
            try:
                return func(*args, **kwargs)
            finally:
                if saved is not None:
                    os.environ[name] = saved
        return wrapper
    return decorator


__all__ = ["get_arch_major", "test_filter", "ignore_env"]
