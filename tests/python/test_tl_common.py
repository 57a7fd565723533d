"""Shared by the test_tl_*.py modules (it has no tests): importing it first gives the pytest session one
fresh kernel cache folder (unless the caller chose one with TESSERA_TL_CACHE), so CI starts cold but
compiles each kernel once, and puts the examples folder on sys.path."""
import atexit
import os
import shutil
import sys
import tempfile

if "TESSERA_TL_CACHE" not in os.environ:
    _dir = tempfile.mkdtemp(prefix="tessera-tl-tests-")
    os.environ["TESSERA_TL_CACHE"] = _dir
    atexit.register(shutil.rmtree, _dir, True)

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "tl")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
