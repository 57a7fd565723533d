"""Runs one upstream script as ``__main__`` with CUDA tensors mapped to the CPU.

usage: python run_script.py SCRIPT [ARGS ...]

The script's folder is the working directory and the first entry of sys.path (as when it is run
directly); ``torch.cuda`` answers as one device (cpu_cuda.py). Package aliases come from PYTHONPATH
(the runner puts tessera's ``tilelang`` alias there).

TESSERA_SHIM_DEFAULTS='{"main": {"M": 1024}}' replaces default argument values of the script's
top-level functions (for scripts whose sizes are defaults of main() rather than command-line flags);
the file on disk is untouched and nothing else changes.
"""
import ast
import json
import os
import runpy
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cpu_cuda  # noqa: E402


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    script = os.path.abspath(sys.argv[1])
    sys.argv = [script] + sys.argv[2:]
    sys.path.remove(HERE)
    sys.path.insert(0, os.path.dirname(script))
    os.chdir(os.path.dirname(script))
    cpu_cuda.install()
    defaults = json.loads(os.environ.get("TESSERA_SHIM_DEFAULTS", "{}"))
    if not defaults:
        runpy.run_path(script, run_name="__main__")
        return
    with open(script) as f:
        tree = ast.parse(f.read(), script)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in defaults:
            _set_defaults(node, defaults[node.name])
    module = types.ModuleType("__main__")
    module.__file__ = script
    sys.modules["__main__"] = module
    exec(compile(tree, script, "exec"), module.__dict__)  # noqa: S102 - the upstream script itself


def _set_defaults(fdef, values):
    args = fdef.args.args
    offset = len(args) - len(fdef.args.defaults)
    for i, a in enumerate(args):
        if a.arg in values:
            if i < offset:
                raise SystemExit(f"TESSERA_SHIM_DEFAULTS: {fdef.name}({a.arg}) has no default to replace")
            fdef.args.defaults[i - offset] = ast.copy_location(ast.Constant(values[a.arg]), fdef.args.defaults[i - offset])


if __name__ == "__main__":
    main()
