#!/usr/bin/env bash
# ASan + UBSan build of the core and GEMM test suites (the fast subset CI runs with sanitizers).
# Needs the packages scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
printf '\n==> sanitizer build (ASan + UBSan): core and gemm tests\n'
cmake --preset asan -DTESSERA_BUILD_TOOLS=OFF > /dev/null
cmake --build build/asan --target tessera_core_tests tessera_gemm_tests tessera_gemm_grouped_tests -j2 |
  { grep -E --line-buffered '^\[[0-9]+/[0-9]+\]|error:'; true; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for t in tessera_core_tests tessera_gemm_tests tessera_gemm_grouped_tests; do
  # The pool stress test runs 10k jobs at 4 threads: slow under ASan on 2 cores and covered by the release run.
  ./build/asan/tests/cpp/$t --gtest_brief=1 --gtest_filter='-*ManyTinyJobs*'
done
printf '\n==> sanitizer run passed\n'
