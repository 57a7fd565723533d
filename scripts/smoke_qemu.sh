#!/usr/bin/env bash
# Runs the dispatch smoke suite (tests/cpp/smoke) under QEMU CPU models this machine may not be:
# Haswell (AVX2 + FMA, no AVX-512: tessera must pick the avx2 level) and Nehalem (no AVX at all: the
# scalar level). An instruction such a CPU lacks stops the run with SIGILL. Called by scripts/test.sh;
# skipped with a note when qemu-x86_64 (Debian: qemu-user) is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=build/py/tests/cpp/tessera_dispatch_smoke_tests
[ -x "$smoke" ] || { echo "smoke: $smoke is missing (run scripts/setup.sh)" >&2; exit 1; }
if ! command -v qemu-x86_64 >/dev/null; then
  echo "smoke: skipped, qemu-x86_64 not found (apt-get install qemu-user)"
  exit 0
fi
# model:level pairs; the level is what tessera's dispatcher must choose under that model.
for pair in Haswell:avx2 Nehalem:scalar; do
  model=${pair%:*} level=${pair#*:}
  start=$(date +%s)
  printf -- '--> qemu-x86_64 -cpu %s (expect level %s)\n' "$model" "$level"
  # TESSERA_ISA from the caller would cap the level below the model's: the model alone decides here.
  env -u TESSERA_ISA -u TESSERA_FORCE_REFERENCE TESSERA_SMOKE_EXPECT_ISA="$level" \
    timeout 300 qemu-x86_64 -cpu "$model" "$smoke" --gtest_brief=1 \
    2> >(grep -v "TCG doesn't support requested feature" >&2)  # host-only CPU flags, harmless here
  printf -- '--> %s passed in %ss\n' "$model" "$(( $(date +%s) - start ))"
done
