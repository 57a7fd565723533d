"""``python -m tessera.tilelang_compat --path``: prints the folder to put on PYTHONPATH so that
``import tilelang`` loads tessera's alias (``PYTHONPATH=$(python -m tessera.tilelang_compat --path)``)."""
import argparse

from . import path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tessera.tilelang_compat", description=__doc__)
    ap.add_argument("--path", action="store_true", help="print the folder holding the 'tilelang' alias package")
    args = ap.parse_args(argv)
    if not args.path:
        ap.print_help()
        return 0
    print(path())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
