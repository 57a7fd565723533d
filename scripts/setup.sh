#!/usr/bin/env bash
# Installs what is missing on a bare Debian 12 machine, builds tessera (C++ library, CLI, tests, Python
# extension) and installs it into .venv/ at the repository root. Safe to run again: each step is skipped
# or incremental when already done (ccache keeps rebuilds cheap).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# libhwy-dev: Google Highway headers (portable SIMD kernels, src/backends/cpu/hwy/). qemu-user: the test
# script runs a dispatch smoke suite under CPU models without AVX-512 / AVX2 (scripts/test.sh).
# ocl-icd-opencl-dev: Debian's oneDNN CMake package is built with the OpenCL GPU runtime and fails to
# configure without the OpenCL headers and library (apt only recommends them, and we skip recommends).
DEB_PACKAGES=(build-essential cmake ninja-build ccache pkg-config python3 python3-dev python3-venv
              libgtest-dev libbenchmark-dev libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
              libopenmpi-dev openmpi-bin libhwy-dev qemu-user)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "apt-get install ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The ARM64 check (scripts/test_arm64.sh, run by scripts/test.sh): the cross compiler, and GoogleTest and
# Highway for arm64 as multiarch packages (their headers are the host's; the arm64 libgtest is linked).
# qemu-user (above) runs the result.
ARM64_PACKAGES=(g++-aarch64-linux-gnu libgtest-dev:arm64 libhwy-dev:arm64)
missing=()
for p in "${ARM64_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "apt-get install ${missing[*]} (ARM64 cross build and tests)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  step "python3 -m venv .venv"
  python3 -m venv .venv
fi
step "pip install build and test requirements"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt

# torch: the DeepSeek-compatible modules take and return torch tensors, and the tests of that path (and
# the runners of DeepSeek's own suites, tools/upstream/) need it. PyPI's Linux wheel is the CUDA build
# (~5 GiB with its libraries; it runs on CPUs without a GPU). Skipped with a warning on a disk with less
# than 12 GiB free or with TESSERA_SKIP_TORCH=1: the torch tests then skip and say why.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  free_kib=$(df -Pk .venv | awk 'NR == 2 {print $4}')
  if [ "${TESSERA_SKIP_TORCH:-0}" = 1 ] || [ "${free_kib:-0}" -lt $((12 * 1024 * 1024)) ]; then
    echo "setup: WARNING: not installing torch (TESSERA_SKIP_TORCH=${TESSERA_SKIP_TORCH:-0}," \
         "$((free_kib / 1024 / 1024)) GiB free); torch-tensor tests will be skipped" >&2
  else
    step "pip install torch (the modules' torch-tensor interface and its tests)"
    .venv/bin/python -m pip install -q torch
  fi
fi

# The aarch64 Python for scripts/test_arm64.sh's Python step (build/arm64-py: Debian's arm64 CPython,
# PyPI's aarch64 numpy/ml_dtypes/pytest wheels). Without network it records why and the step is skipped.
step "aarch64 Python for the ARM64 Python tests (scripts/setup_arm64_python.sh, build/arm64-py)"
scripts/setup_arm64_python.sh ||
  echo "setup: WARNING: no aarch64 Python; scripts/test_arm64.sh will skip its Python step" >&2

step "build and install tessera into .venv (C++ library, CLI, tests, Python extension)"
mkdir -p build
# Progress lines go to the terminal, everything to build/setup-pip.log; a failed build fails the script.
.venv/bin/python -m pip install --no-build-isolation --no-deps -v . \
  -Cbuild-dir=build/py -Ccmake.define.TESSERA_BUILD_TESTS=ON 2>&1 | tee build/setup-pip.log |
  { grep -E --line-buffered '^ *\[[0-9]+/[0-9]+\]|error:|Successfully installed'; true; }
.venv/bin/python -c "import tessera" || { echo "setup: 'import tessera' failed" >&2; exit 1; }
[ -x .venv/bin/tessera ] || { echo "setup: .venv/bin/tessera was not installed" >&2; exit 1; }
step "ready: .venv/bin/tessera, .venv/bin/python -c 'import tessera'"
