#!/usr/bin/env bash
# Runs the AArch64 Python of build/arm64-py (scripts/setup_arm64_python.sh) under qemu-aarch64 with the
# cross-built tessera: the package is python/tessera beside build/arm64's _C module, mirrored into
# build/arm64-py/overlay. Arguments go to python3.11; QEMU_CPU picks the CPU model (qemu's default when
# unset). Example: QEMU_CPU=cortex-a57 scripts/arm64_python.sh -m pytest tests/python/test_core.py
set -euo pipefail
cd "$(dirname "$0")/.."

py=build/arm64-py
so=$(ls build/arm64/python/_C.cpython-311-aarch64-linux-gnu.so 2>/dev/null) ||
  { echo "arm64_python: no aarch64 module in build/arm64/python (scripts/test_arm64.sh builds it)" >&2; exit 1; }
[ -f "$py/READY" ] || { echo "arm64_python: $py is not ready: run scripts/setup_arm64_python.sh" >&2; exit 1; }
TESSERA_C_SO=$so tools/upstream/dev_overlay.sh "$py/overlay" >/dev/null

root=$PWD/$py/sysroot
# As for the C++ tests (cmake/toolchains/aarch64-linux-gnu.cmake): the cross toolchain's loader and C
# library, then the sysroot's own libraries (expat, zlib, ffi, ssl for the standard library's modules).
libs=/usr/aarch64-linux-gnu/lib:$root/lib/aarch64-linux-gnu:$root/usr/lib/aarch64-linux-gnu
exec qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$libs" \
  -E PYTHONPATH="$PWD/$py/overlay:$PWD/$py/site" \
  "$root/usr/bin/python3.11" "$@"
