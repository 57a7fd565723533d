#!/usr/bin/env bash
# Runs every test: the C++ suites (ctest over the build made by scripts/setup.sh) and the Python suite.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d build/py ] || { echo "test: run scripts/setup.sh first (build/py is missing)" >&2; exit 1; }
start=$(date +%s)
printf '\n==> tree checks (scripts/check_tree.sh)\n'
scripts/check_tree.sh
printf '\n==> C++ format (scripts/check_format.sh)\n'
scripts/check_format.sh
printf '\n==> level objects define no shared symbols (scripts/check_isa_objects.sh)\n'
scripts/check_isa_objects.sh
printf '\n==> Python lint (ruff check: pyflakes rules, pyproject.toml)\n'
.venv/bin/ruff check .
printf '\n==> C++ tests (ctest)\n'
ctest --test-dir build/py --output-on-failure -j2 --timeout 600
printf '\n==> dispatch smoke suite under QEMU CPU models (scripts/smoke_qemu.sh)\n'
scripts/smoke_qemu.sh
printf '\n==> Python tests (pytest)\n'
.venv/bin/python -m pytest tests/python -q
printf '\n==> ARM64: cross build, C++ tests under qemu-aarch64 -cpu max and cortex-a57 (scripts/test_arm64.sh)\n'
scripts/test_arm64.sh
printf '\n==> all tests passed in %ss\n' "$(( $(date +%s) - start ))"
