"""``tilelang.utils.target``: the only target here is the CPU."""


def determine_target(target="auto", return_object=False, **_ignored):
    """Always "cpu": tessera compiles for the machine it runs on."""
    return "cpu"


def check_cuda_availability():
    return False


def check_hip_availability():
    return False
