#!/usr/bin/env bash
# Makes the AArch64 Python that scripts/test_arm64.sh runs tessera's Python tests with, under
# qemu-aarch64, in build/arm64-py/ (nothing is installed into the host's dpkg database or .venv):
#   sysroot/  Debian 12's arm64 CPython 3.11 (interpreter, standard library, headers), unpacked with
#             dpkg-deb -x from debs that apt-get download fetches (python3:arm64 cannot be installed
#             beside the host's amd64 python3).
#   site/     numpy, ml_dtypes and pytest as PyPI's manylinux aarch64 wheels (pip --target --platform):
#             Debian 12 has no ml_dtypes, and its numpy (1.24) and pytest (7) are older than the suite needs.
#   READY     written last; test_arm64.sh builds and runs the Python step only when it exists.
# On failure (no network, no apt lists for arm64) it writes UNAVAILABLE with the reason instead and exits
# non-zero; scripts/setup.sh warns and goes on, and test_arm64.sh prints the reason and skips the step.
set -euo pipefail
cd "$(dirname "$0")/.."

out=build/arm64-py
# The interpreter and the libraries it (or its standard-library modules that pytest, numpy and tessera
# import) loads. The C library comes from the cross toolchain's /usr/aarch64-linux-gnu at run time.
DEBS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11-dev
      libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 liblzma5)
# The versions .venv uses (requirements.txt), so both architectures run the suite with the same libraries.
WHEELS=("numpy>=1.26" "ml_dtypes>=0.7" "pytest>=8")
stamp="debs: ${DEBS[*]}; wheels: ${WHEELS[*]}"

if [ -f "$out/READY" ] && [ "$(head -n 1 "$out/READY")" = "$stamp" ]; then
  echo "setup_arm64_python: $out is up to date"
  exit 0
fi

unavailable() {
  mkdir -p "$out"
  rm -f "$out/READY"
  printf '%s\n' "$*" >"$out/UNAVAILABLE"
  echo "setup_arm64_python: $*" >&2
  exit 1
}

rm -rf "$out" && mkdir -p "$out/debs" "$out/sysroot"
dpkg --print-foreign-architectures | grep -qx arm64 ||
  unavailable "dpkg has no arm64 architecture (scripts/setup.sh adds it with the ARM64 packages)"
(cd "$out/debs" && apt-get download -q "${DEBS[@]/%/:arm64}") >"$out/download.log" 2>&1 ||
  unavailable "apt-get download of the arm64 Python debs failed (see $out/download.log)"
for deb in "$out"/debs/*.deb; do
  dpkg-deb -x "$deb" "$out/sysroot"
done
# Debian's multiarch pyconfig.h only includes <aarch64-linux-gnu/python3.11/pyconfig.h>; put that one in
# its place so the include folder alone serves the cross build (FindPython's Python_INCLUDE_DIR).
cp "$out/sysroot/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h" "$out/sysroot/usr/include/python3.11/"
# Only the headers and the interpreter are used: drop the static libpython (most of the download's size).
rm -rf "$out/sysroot/usr/lib/python3.11/config-3.11-aarch64-linux-gnu" "$out/debs"

.venv/bin/python -m pip install -q --target "$out/site" --only-binary=:all: --implementation cp \
  --python-version 3.11 --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 \
  --platform manylinux2014_aarch64 "${WHEELS[@]}" >"$out/pip.log" 2>&1 ||
  unavailable "pip download of the aarch64 wheels (${WHEELS[*]}) failed (see $out/pip.log)"

rm -f "$out/UNAVAILABLE"
printf '%s\n' "$stamp" >"$out/READY"
echo "setup_arm64_python: $out ready ($(du -sh "$out" | cut -f1))"
