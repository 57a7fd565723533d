#!/usr/bin/env bash
# ARM64 (AArch64) check from an x86-64 host: cross-builds tessera with Debian's g++-aarch64-linux-gnu
# (CMake preset arm64-cross, folder build/arm64) and runs every C++ suite under qemu-aarch64 with two
# CPU models:
#   max         SVE, BF16, I8MM, ... : tessera must pick the level sve
#   cortex-a57  NEON only            : tessera must pick the level neon
# A missing instruction (SIGILL) or a wrong result under either model fails. Emulation proves
# correctness, not speed (docs/cpu.md, section ARM64). Called by scripts/test.sh; needs what
# scripts/setup.sh installs (cross compiler, qemu-user, libgtest-dev:arm64, libhwy-dev:arm64).
# Then the Python module: built in the same folder against the aarch64 CPython of build/arm64-py
# (scripts/setup_arm64_python.sh, run by setup.sh), and the pytest files listed below. Under cortex-a57
# both passes leave out what -cpu max already ran with the same code (A57_LEFT_OUT, PY_A57_TESTS).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { printf '\ntest_arm64: FAILED: %s\n' "$*" >&2; exit 1; }
for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja; do
  command -v "$tool" >/dev/null || fail "$tool not found: run scripts/setup.sh (apt-get install g++-aarch64-linux-gnu qemu-user)"
done
[ -f /usr/lib/aarch64-linux-gnu/libgtest.a ] ||
  fail "GoogleTest for arm64 is missing: run scripts/setup.sh (dpkg --add-architecture arm64; apt-get install libgtest-dev:arm64)"

# The Python step runs when setup made build/arm64-py (READY). When setup could not (no network: it
# wrote UNAVAILABLE with the reason) the step is skipped with that reason; when setup never tried, fail.
py=build/arm64-py
python_defs=(-DTESSERA_BUILD_PYTHON=OFF)
if [ -f "$py/READY" ]; then
  # Cross-compiling, FindPython asks the host's interpreter (.venv, also where nanobind's CMake files come
  # from), so the aarch64 headers and module suffix are given: nanobind takes SKBUILD_SOABI first.
  [ -x .venv/bin/python ] || fail ".venv/bin/python is missing: run scripts/setup.sh"
  python_defs=(-DTESSERA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python"
               -DPython_INCLUDE_DIR="$PWD/$py/sysroot/usr/include/python3.11"
               -DSKBUILD_SOABI=cpython-311-aarch64-linux-gnu)
elif [ -f "$py/UNAVAILABLE" ]; then
  printf -- '--> WARNING: the Python step is skipped: %s\n' "$(cat "$py/UNAVAILABLE")" >&2
else
  fail "$py is missing: run scripts/setup.sh (or scripts/setup_arm64_python.sh) for the aarch64 Python"
fi

start=$(date +%s)
printf -- '--> cross build (cmake --preset arm64-cross, build/arm64)\n'
cmake --preset arm64-cross "${python_defs[@]}" >/dev/null
nice -n 10 cmake --build build/arm64 -j2
printf -- '--> level objects define no shared symbols (scripts/check_isa_objects.sh build/arm64)\n'
NM=aarch64-linux-gnu-nm scripts/check_isa_objects.sh build/arm64

# The emulator (toolchain file) is qemu-aarch64 without -cpu; QEMU_CPU picks the model for a whole ctest
# run, test discovery included. The tile language compiles kernels at run time: with the cross compiler,
# so the emulated process loads AArch64 code. TESSERA_TEST_EMULATED=1 shrinks the few suites whose full
# sizes take minutes under emulation (tests/cpp/test_util.h, emulated()).
# -cpu max runs every test, each level's cases included (scalar, neon, neon_bf16 under a cap). What
# -cpu cortex-a57 adds is the CPU without bf16, i8mm and SVE: every neon kernel and the level choice
# must run there. Cases that max already ran with the same code are left out of that pass: the scalar
# level's, the thread-count and repeat determinism ones (schedules, not instructions), and the GEMM suite
# again with streamed stores (same kernels).
A57_LEFT_OUT='/scalar(_|$)|Determinism|SameBitsForAnyThreadCount|SameBitsForEitherSplit|gemm_tests_streamed_d'
for pair in max:sve cortex-a57:neon; do
  model=${pair%:*} level=${pair#*:}
  exclude=()
  [ "$model" = cortex-a57 ] && exclude=(-E "$A57_LEFT_OUT")
  t0=$(date +%s)
  printf -- '\n--> ctest under qemu-aarch64 -cpu %s (expect level %s)\n' "$model" "$level"
  env -u TESSERA_ISA -u TESSERA_FORCE_REFERENCE QEMU_CPU="$model" TESSERA_TEST_EMULATED=1 \
    TESSERA_TL_CXX=aarch64-linux-gnu-g++ TESSERA_SMOKE_EXPECT_ISA="$level" \
    ctest --test-dir build/arm64 --output-on-failure -j2 --timeout 900 "${exclude[@]}" ||
    fail "C++ tests under qemu-aarch64 -cpu $model"
  printf -- '--> -cpu %s passed in %ss\n' "$model" "$(( $(date +%s) - t0 ))"
done

# The Python layer on the same two models: the level check, then the suites of each module (bf16/fp8
# GEMM, dense and sparse MLA decode, top-k, MQA logits, casts, tl kernels compiled by the cross
# compiler), float64 or exact references. Left out to stay within a few minutes per model (emulation is
# ~90x slower): the largest shapes and FlashMLA's scalar path (the C++ suites above run those), and the
# version test (it needs an installed distribution).
PY_TESTS=(tests/python/test_arm64_level.py tests/python/test_core.py tests/python/test_dtypes.py
          tests/python/test_arrays.py tests/python/test_deep_gemm_bf16.py tests/python/test_deep_gemm_fp8.py
          tests/python/test_flash_mla.py::test_dense_decode_matches_float64
          tests/python/test_flash_mla.py::test_sparse_decode_matches_float64
          tests/python/test_flash_mla.py::test_metadata_forms_give_identical_bits
          tests/python/test_deep_select.py tests/python/test_mqa_logits.py tests/python/test_tile_kernels_module.py
          tests/python/test_tile_kernels_quant.py::test_per_token_cast_bitwise
          tests/python/test_tile_kernels_quant.py::test_per_block_cast_bitwise
          tests/python/test_tile_kernels_quant.py::test_cast_back tests/python/test_tl_jit.py)
PY_LEFT_OUT="thin_tail_panels or 129-200-576 or h128 or (flash_mla and (scalar or case1)) or version_matches"
# Under cortex-a57 the level check and the tl suite (its kernels compiled with the neon level's flags);
# the modules' other suites call the C++ kernels the ctest pass above ran there.
PY_A57_TESTS=(tests/python/test_arm64_level.py tests/python/test_tl_jit.py)
if [ -f "$py/READY" ]; then
  for pair in max:sve cortex-a57:neon; do
    model=${pair%:*} level=${pair#*:}
    tests=("${PY_TESTS[@]}")
    [ "$model" = cortex-a57 ] && tests=("${PY_A57_TESTS[@]}")
    t0=$(date +%s)
    printf -- '\n--> pytest under qemu-aarch64 -cpu %s (expect level %s)\n' "$model" "$level"
    env -u TESSERA_ISA -u TESSERA_FORCE_REFERENCE QEMU_CPU="$model" TESSERA_TL_CXX=aarch64-linux-gnu-g++ \
      TESSERA_SMOKE_EXPECT_ISA="$level" scripts/arm64_python.sh -m pytest -q -p no:cacheprovider \
      -k "not ($PY_LEFT_OUT)" "${tests[@]}" ||
      fail "Python tests under qemu-aarch64 -cpu $model"
    printf -- '--> Python under -cpu %s passed in %ss\n' "$model" "$(( $(date +%s) - t0 ))"
  done
fi
printf -- '\n--> arm64 checks passed in %ss\n' "$(( $(date +%s) - start ))"
