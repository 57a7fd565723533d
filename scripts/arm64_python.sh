#!/usr/bin/env bash
# Runs the AArch64 Python of build/arm64-py (scripts/setup_arm64_python.sh) under qemu-aarch64 with the
# cross-built tessera: the package is python/tessera beside build/arm64's _C module, mirrored into
# build/arm64-py/overlay. Arguments go to python3.11; QEMU_CPU picks the CPU model (qemu's default when
# unset). Example: QEMU_CPU=cortex-a57 scripts/arm64_python.sh -m pytest tests/python/test_core.py
#
# The interpreter's sys.executable is this script (qemu's -0 sets its argv[0]): qemu-user cannot start an
# AArch64 executable itself without binfmt_misc, so a test that runs sys.executable comes back here and
# gets the same emulator, CPU model and paths. Such a child keeps the overlay and the working directory.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=$repo/build/arm64-py

if [ -z "${TESSERA_ARM64_OVERLAY:-}" ]; then
  so=$(ls "$repo"/build/arm64/python/_C.cpython-311-aarch64-linux-gnu.so 2>/dev/null) ||
    { echo "arm64_python: no aarch64 module in build/arm64/python (scripts/test_arm64.sh builds it)" >&2; exit 1; }
  [ -f "$py/READY" ] || { echo "arm64_python: $py is not ready: run scripts/setup_arm64_python.sh" >&2; exit 1; }
  TESSERA_C_SO=$so "$repo/tools/upstream/dev_overlay.sh" "$py/overlay" >/dev/null
  export TESSERA_ARM64_OVERLAY=$py/overlay
fi

# The tile language compiles kernels for this process: with the cross compiler unless told otherwise.
export TESSERA_TL_CXX=${TESSERA_TL_CXX:-aarch64-linux-gnu-g++}
root=$py/sysroot
# As for the C++ tests (cmake/toolchains/aarch64-linux-gnu.cmake): the cross toolchain's loader and C
# library, then the sysroot's own libraries (expat, zlib, ffi, ssl for the standard library's modules).
# PYTHONHOME: the interpreter would look for its prefix beside argv[0], which is this script. A PYTHONPATH
# already set (a test's child given its parent's sys.path) stays, after ours.
libs=/usr/aarch64-linux-gnu/lib:$root/lib/aarch64-linux-gnu:$root/usr/lib/aarch64-linux-gnu
exec qemu-aarch64 -0 "$repo/scripts/arm64_python.sh" -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$libs" \
  -E PYTHONHOME="$root/usr" -E PYTHONPATH="$TESSERA_ARM64_OVERLAY:$py/site${PYTHONPATH:+:$PYTHONPATH}" \
  "$root/usr/bin/python3.11" "$@"
