"""``tilelang.contrib.nvcc``: there is no CUDA toolkit behind tessera. Kernels that choose tile or
vector sizes from the compute version get a nominal one (NOMINAL_COMPUTE_VERSION, Hopper's "9.0");
the choice changes only those sizes, not results."""

NOMINAL_COMPUTE_VERSION = "9.0"


def get_target_compute_version(target=None):
    return NOMINAL_COMPUTE_VERSION


def parse_compute_version(compute_version):
    major, _, minor = str(compute_version).partition(".")
    return int(major), int(minor or 0)


def have_tensorcore(compute_version=None, target=None):
    return False
