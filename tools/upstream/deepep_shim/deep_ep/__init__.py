"""``deep_ep`` for DeepEP's own test files: tessera.deep_ep under DeepEP's package name, with torch's
CUDA device mapped to the CPU (tools/upstream/run_deepep_suites.py puts this on PYTHONPATH)."""
from ._cpu_mapping import install as _install

_install()

import tessera.deep_ep as _tessera_deep_ep  # noqa: E402
from tessera.deep_ep import *  # noqa: E402,F401,F403

for _name in dir(_tessera_deep_ep):
    if not _name.startswith("_"):
        globals()[_name] = getattr(_tessera_deep_ep, _name)
