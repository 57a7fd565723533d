#!/usr/bin/env bash
# ASan + UBSan build of the core and GEMM test suites, then a ThreadSanitizer build of the thread pool
# (core tests) and the ep shared-memory protocol (ep tests under mpirun, 2 and 3 ranks, one node and
# pretend nodes): the subset CI runs with sanitizers.
# Needs the packages scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
printf '\n==> sanitizer build (ASan + UBSan): core and gemm tests\n'
cmake --preset asan -DTESSERA_BUILD_TOOLS=OFF > /dev/null
cmake --build build/asan --target tessera_core_tests tessera_gemm_tests tessera_gemm_grouped_tests -j2 |
  { grep -E --line-buffered '^\[[0-9]+/[0-9]+\]|error:' || true; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for t in tessera_core_tests tessera_gemm_tests tessera_gemm_grouped_tests; do
  # The pool stress test runs 10k jobs at 4 threads: slow under ASan on 2 cores and covered by the release run.
  ./build/asan/tests/cpp/$t --gtest_brief=1 --gtest_filter='-*ManyTinyJobs*'
done

printf '\n==> ThreadSanitizer build: core and ep tests\n'
cmake --preset tsan > /dev/null
cmake --build build/tsan --target tessera_core_tests tessera_ep_tests -j2 |
  { grep -E --line-buffered '^\[[0-9]+/[0-9]+\]|error:' || true; }
# Open MPI is not instrumented: its own reports are suppressed (tests/tsan.supp); ours halt the run.
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
./build/tsan/tests/cpp/tessera_core_tests --gtest_brief=1 --gtest_filter='-*ManyTinyJobs*'
mpi=(mpirun --oversubscribe -x TSAN_OPTIONS -x TESSERA_EP_RANKS_PER_NODE)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
for ranks in 2 3; do
  for rpn in 0 1; do
    TESSERA_EP_RANKS_PER_NODE=$rpn "${mpi[@]}" -np $ranks ./build/tsan/tests/cpp/ep/tessera_ep_tests --gtest_brief=1
  done
done
printf '\n==> sanitizer run passed\n'
