"""Ahead-of-time compilation (``tessera tlc`` runs ``python -m tessera.tl.aot``).

    tessera tlc kernel.py -o libkernel.so [--kernel NAME] [--arg KEY=VALUE ...] [--list]

Loads kernel.py, picks a @T.prim_func or a @tessera.jit factory (called with the --arg values, Python
literals; for an eager-style kernel they include its T.const sizes), and writes a standalone kernel
library. C++ loads it with tessera::tl::Kernel::load(path)
and calls it with TensorViews; the library carries its parameter signature and uses the thread pool
and GEMM micro-kernels of the program that loads it (docs/tl.md, "AOT").
"""
import argparse
import ast
import runpy
import sys

from .. import _C
from ..language import PrimFunc
from .eager import EagerJIT


def _kernels(namespace):
    found = {}
    for name, obj in namespace.items():
        if isinstance(obj, (PrimFunc, EagerJIT)) or hasattr(obj, "__tl_factory__"):
            found[name] = obj
    return found


def _parse_args(pairs):
    kwargs = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"tessera tlc: --arg expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            kwargs[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            kwargs[key] = value  # a bare word is a string
    return kwargs


def main(argv=None):
    p = argparse.ArgumentParser(prog="tessera tlc", description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="Python file defining the kernel")
    p.add_argument("-o", "--output", help="the kernel library to write (.so)")
    p.add_argument("--kernel", help="name of the @T.prim_func or @tessera.jit factory in the file")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE", help="factory argument (repeatable)")
    p.add_argument("--list", action="store_true", help="list the kernels in the file and exit")
    args = p.parse_args(argv)

    namespace = runpy.run_path(args.file, run_name="__tessera_tlc__")
    kernels = _kernels(namespace)
    if args.list:
        for name, obj in sorted(kernels.items()):
            kind = "prim_func" if isinstance(obj, PrimFunc) else "eager jit" if isinstance(obj, EagerJIT) else "jit factory"
            print(f"{name}: {kind}")
        return 0
    if not args.output:
        p.error("-o/--output is required")
    if args.kernel:
        if args.kernel not in kernels:
            p.error(f"no kernel named {args.kernel!r} in {args.file}; kernels: {', '.join(sorted(kernels)) or 'none'}")
        obj = kernels[args.kernel]
    elif len(kernels) == 1:
        obj = next(iter(kernels.values()))
    else:
        p.error(f"{args.file} defines {len(kernels)} kernels ({', '.join(sorted(kernels))}); choose one with --kernel")
    if isinstance(obj, PrimFunc):
        prim = obj
    elif isinstance(obj, EagerJIT):  # --arg gives the compile-time values and the T.const sizes
        prim = obj.compile(**_parse_args(args.arg)).func
    else:
        prim = obj.__tl_factory__(**_parse_args(args.arg))
    if not isinstance(prim, PrimFunc):
        raise SystemExit(f"tessera tlc: the factory returned {type(prim).__name__}, not a @T.prim_func")
    _C.tl_compile_to_library(prim.program, args.output, [])
    params = ", ".join(f"{q.name}: {q.dtype}{list(q.shape) if q.is_tensor else ''}" for q in prim.params)
    print(f"tessera tlc: wrote {args.output}: kernel '{prim.name}' ({params})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
