#!/usr/bin/env bash
# The subset CI runs with sanitizers. First an ASan + UBSan build of every component's C++ tests (core,
# gemm, select, attention, tl, model, the dispatch smoke suite and the decode-step example; ep's under
# mpirun at 2 ranks, one node and pretend nodes), then a ThreadSanitizer build of the thread pool (core
# tests) and the ep shared-memory protocol (ep tests under mpirun, 2 and 3 ranks, one node and pretend
# nodes). Needs the packages scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)

printf '\n==> sanitizer build (ASan + UBSan): core, gemm, select, attention, tl, ep and model tests\n'
# One process each (paths under tests/cpp); the ep kernels and Mega MoE on one rank need no MPI. The
# machine-limit tests (info) are left to the release run: they measure, and check little memory.
asan_tests=(tessera_core_tests tessera_gemm_tests tessera_gemm_grouped_tests tessera_select_tests tessera_mla_tests
            tessera_mqa_logits_tests tessera_tl_tests ep/tessera_ep_kernel_tests ep/tessera_ep_arena_tests ep/tessera_mega_moe_tests
            tessera_model_tests tessera_dispatch_smoke_tests)
cmake --preset asan -DTESSERA_BUILD_TOOLS=OFF > /dev/null
cmake --build build/asan --target "${asan_tests[@]#ep/}" tessera_ep_tests example_decode_step -j2 |
  { grep -E --line-buffered '^\[[0-9]+/[0-9]+\]|error:' || true; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# tl compiles its kernels at run time: tests/tl_asan_cxx.sh instruments them like the library.
for t in "${asan_tests[@]}"; do
  # The pool stress test runs 10k jobs at 4 threads: slow under ASan on 2 cores and covered by the release run.
  TESSERA_TL_CXX=$PWD/tests/tl_asan_cxx.sh ./build/asan/tests/cpp/$t --gtest_brief=1 --gtest_filter='-*ManyTinyJobs*'
done
./build/asan/tests/cpp/example_decode_step
# ep: every rank is instrumented. Open MPI keeps its own allocations until exit; those leak reports are
# suppressed by library (tests/lsan.supp), which needs full malloc stacks to reach the library.
for rpn in 0 1; do
  ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
    TESSERA_EP_RANKS_PER_NODE=$rpn "${mpi[@]}" -x ASAN_OPTIONS -x UBSAN_OPTIONS -x LSAN_OPTIONS \
    -x TESSERA_EP_RANKS_PER_NODE -np 2 ./build/asan/tests/cpp/ep/tessera_ep_tests --gtest_brief=1
done

printf '\n==> ThreadSanitizer build: core and ep tests\n'
cmake --preset tsan > /dev/null
cmake --build build/tsan --target tessera_core_tests tessera_ep_tests -j2 |
  { grep -E --line-buffered '^\[[0-9]+/[0-9]+\]|error:' || true; }
# Open MPI is not instrumented: its own reports are suppressed (tests/tsan.supp); ours halt the run.
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
./build/tsan/tests/cpp/tessera_core_tests --gtest_brief=1 --gtest_filter='-*ManyTinyJobs*'
for ranks in 2 3; do
  for rpn in 0 1; do
    TESSERA_EP_RANKS_PER_NODE=$rpn "${mpi[@]}" -x TSAN_OPTIONS -x TESSERA_EP_RANKS_PER_NODE -np $ranks \
      ./build/tsan/tests/cpp/ep/tessera_ep_tests --gtest_brief=1
  done
done
printf '\n==> sanitizer run passed\n'
