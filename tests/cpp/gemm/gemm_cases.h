// Shape and scale-factor case lists shared by the GEMM tests. Shapes come from the kernels' tile sizes:
// M <= 8 takes the decode GEMV (when B is K-major; M >= 4 with K a multiple of 128 in activation-row
// quads), M = 9 is the first packed one, 7/8/9 and 15 are
// MR-1/MR/MR+1 tails of the 8-row micro-kernel, N 47/48/49 and 97 the tails of its 48 columns, K
// 127/128/129 straddle a scale group, 576 and 2112 are DeepGEMM's K that are not multiples of 128.
#pragma once

#include <string>
#include <vector>

#include "gemm/gemm_harness.h"

namespace tessera::test {

constexpr Major kKm = Major::kK;
constexpr Major kMNm = Major::kMN;
constexpr DType kBf16 = DType::kBF16;
constexpr DType kF32 = DType::kF32;

// Emulated runs (emulated(), test_util.h) keep the shapes of at most 2^22 multiply-adds; the larger ones
// exercise the streamed paths (over 2 MiB of weights), which every native run covers.
inline std::vector<GemmShape> sized_for_this_run(std::vector<GemmShape> shapes) {
  if (emulated()) std::erase_if(shapes, [](const GemmShape& s) { return s.m * s.n * s.k > (int64_t(1) << 22); });
  return shapes;
}

// clang-format off
// For bf16 / cuBLASLt GEMMs (any K).
inline const std::vector<GemmShape>& dense_shapes() {
  static const std::vector<GemmShape> shapes = sized_for_this_run({
      //  m     n     k  a     b     pad d      c
      {   1,  200,  576, kKm,  kKm,  0, kBf16, CMode::kNone},      // GEMV, K % 128 != 0
      {   2,   49,  129, kMNm, kKm,  5, kF32,  CMode::kSeparate},  // GEMV with an MN-major activation
      {   4,    7, 2112, kKm,  kKm,  3, kBf16, CMode::kInPlace},   // GEMV, long K, accumulate into d
      {   2,    7,   31, kKm,  kKm,  1, kF32,  CMode::kInPlace},
      {   7,   47,   64, kKm,  kMNm, 0, kF32,  CMode::kNone},      // small M, MN-major B: packed path
      {   8,   48,  127, kMNm, kMNm, 1, kBf16, CMode::kSeparate},
      {   9,   97,  128, kKm,  kKm,  2, kF32,  CMode::kInPlace},   // first M past the GEMV limit
      {  15,    1,   31, kMNm, kKm,  0, kBf16, CMode::kNone},
      {  64,   48,    2, kKm,  kMNm, 4, kBf16, CMode::kSeparate},
      {  15,  200,   64, kKm,  kMNm, 0, kBf16, CMode::kInPlace},
      { 129,  200,  129, kKm,  kKm,  0, kF32,  CMode::kNone},
      { 129,   49,  576, kMNm, kMNm, 3, kF32,  CMode::kInPlace},
      {  64,   47, 2112, kMNm, kKm,  1, kBf16, CMode::kNone},
      {   1,    1,    1, kKm,  kKm,  0, kBf16, CMode::kSeparate},
      {   9, 1500,  768, kKm,  kMNm, 0, kBf16, CMode::kSeparate},  // N spans two packed column blocks
      {   4,  101, 2304, kKm,  kKm,  0, kF32,  CMode::kSeparate},  // GEMV in quads: 3-row blocks + 2, two K blocks
      {   6,   51, 1280, kKm,  kKm,  2, kBf16, CMode::kInPlace},   // GEMV, 6 rows run as 8 (2 zero rows)
      {   8,   77, 1000, kKm,  kKm,  0, kF32,  CMode::kNone},      // GEMV, 8 rows (AMX: all tile columns), K tail
      {   7,   61,  520, kKm,  kKm,  1, kBf16, CMode::kSeparate},  // GEMV, 7 rows (AMX: 7 of 8 columns kept)
      {   4,  157, 7168, kKm,  kKm,  0, kF32,  CMode::kSeparate},  // GEMV in quads, streamed (> 2 MiB): whole rows
      {   2,  150, 7200, kKm,  kKm,  1, kBf16, CMode::kInPlace},   // GEMV, streamed: one row at a time, K tail
      {   1,  160, 7000, kKm,  kKm,  2, kBf16, CMode::kSeparate},  // ... padded rows, K tail
      {   3,  151, 7168, kKm,  kKm,  0, kF32,  CMode::kNone},      // ... three activation rows
      {   4,   53,  200, kKm,  kKm,  1, kBf16, CMode::kInPlace},   // GEMV, 4 rows over short rows (AMX tiles), K tail
  });
  return shapes;
}

// For FP8/FP4 GEMMs: even K (packed FP4 holds two values per byte).
inline const std::vector<GemmShape>& scaled_shapes() {
  static const std::vector<GemmShape> shapes = sized_for_this_run({
      //  m     n     k  a     b     pad d      c
      {   1,  200,  576, kKm,  kKm,  0, kBf16, CMode::kNone},
      {   2,   49,  128, kMNm, kKm,  3, kF32,  CMode::kSeparate},
      {   4,   47, 2112, kKm,  kKm,  1, kBf16, CMode::kInPlace},
      {   8,   97,   64, kKm,  kMNm, 0, kF32,  CMode::kNone},
      {   7,    1,    2, kKm,  kKm,  2, kBf16, CMode::kSeparate},
      {   9,   48,  256, kKm,  kKm,  0, kBf16, CMode::kNone},
      {  15,    7,  576, kMNm, kMNm, 5, kF32,  CMode::kInPlace},
      {  64,  200,  130, kKm,  kMNm, 0, kBf16, CMode::kSeparate},
      { 129,   47,  576, kMNm, kKm,  2, kF32,  CMode::kNone},
      {   4,   49, 2304, kKm,  kKm,  1, kF32,  CMode::kInPlace},   // GEMV in quads, two K blocks
      {   5,   97, 1280, kKm,  kKm,  0, kBf16, CMode::kSeparate},  // GEMV, 5 rows run as 8
      {   1,   99,  256, kKm,  kKm,  0, kF32,  CMode::kNone},      // GEMV, 4-row blocks and a remainder of 3
      // GEMV over streamed fp8 weights (> 2 MiB): rows outside, whole rows in quads; 8 rows with a K
      // tail (no quads) take rows in 2 K blocks (128 groups of combined scales per call).
      {   6,  260, 8320, kKm,  kKm,  1, kF32,  CMode::kSeparate},
      {   8,  131, 16400, kKm, kKm,  0, kF32,  CMode::kNone},
  });
  return shapes;
}

// FP8 decode over streamed weights (> 2 MiB): with M <= 3 the GEMV reads one row at a time in K order
// (a K tail; padded rows), with M = 4 in blocks of 4 rows (299 = 74 blocks + 3 single rows). Large, so
// only the NT layout (the others do not take the GEMV).
inline const std::vector<GemmShape>& fp8_streamed_decode_shapes() {
  static const std::vector<GemmShape> shapes = sized_for_this_run({
      {   1,  301, 7000, kKm,  kKm,  0, kBf16, CMode::kSeparate},
      {   3,  300, 7168, kKm,  kKm,  2, kF32,  CMode::kInPlace},
      {   4,  299, 7168, kKm,  kKm,  1, kBf16, CMode::kSeparate},
  });
  return shapes;
}

// Extra FP8-only shapes with odd K (scale groups with a ragged tail).
inline const std::vector<GemmShape>& fp8_odd_k_shapes() {
  static const std::vector<GemmShape> shapes = sized_for_this_run({
      {   1,    7,    1, kKm,  kKm,  0, kF32,  CMode::kSeparate},
      {   3,   48,  129, kKm,  kKm,  1, kBf16, CMode::kNone},
      {  64,   49,   31, kMNm, kKm,  0, kBf16, CMode::kInPlace},
      {   9,   97,  127, kKm,  kMNm, 2, kF32,  CMode::kNone},
      // Packed, both sides along K, the last K chunk ending past K (the amx set converts such a
      // chunk straight into tile order, reading the codes past K as zero).
      {  64,   40, 1000, kKm,  kKm,  0, kBf16, CMode::kSeparate},
      {  66,   33, 1100, kKm,  kKm,  1, kF32,  CMode::kInPlace},
  });
  return shapes;
}

constexpr DType kE4m3 = DType::kF8E4M3;
constexpr DType kFp4 = DType::kF4E2M1;
constexpr DType kFp4Int8 = DType::kI8;  // DeepGEMM's storage dtype for packed FP4

// Granularities are (gran_mn, gran_k) of A then of B; `passed` says how the call receives them.
inline const std::vector<ScaleRecipe>& scale_recipes() {
  const SfStyle f32k = SfStyle::kF32KMajor, f32mn = SfStyle::kF32MNMajor, ue8k = SfStyle::kPackedKMajor,
                ue8mn = SfStyle::kPackedMNMajor;
  const RecipeArg dflt = RecipeArg::kDefault, rcp = RecipeArg::kRecipe, pair = RecipeArg::kPerOperand;
  static const std::vector<ScaleRecipe> recipes = {
      // name                                   a         b         A gran   B gran    sfa    sfb    passed diff
      {"fp8 token(1,128) x block(128,128) f32", kE4m3,    kE4m3,    1, 128, 128, 128, f32k,  f32k,  dflt, 1e-3},
      {"fp8 token x block, f32 MN-major",       kE4m3,    kE4m3,    1, 128, 128, 128, f32mn, f32mn, rcp,  1e-3},
      {"fp8 per-channel (1,1,128) f32",         kE4m3,    kE4m3,    1, 128,   1, 128, f32mn, f32k,  rcp,  1e-3},
      {"fp8 ue8m0 packed (SM100 defaults)",     kE4m3,    kE4m3,    1, 128,   1, 128, ue8mn, ue8mn, dflt, 1e-3},
      {"fp8 ue8m0 packed K-major",              kE4m3,    kE4m3,    1, 128,   1, 128, ue8k,  ue8k,  pair, 1e-3},
      {"fp8 a(1,64) x b(1,128) mixed gran_k",   kE4m3,    kE4m3,    1,  64,   1, 128, f32k,  ue8mn, pair, 1e-3},
      {"fp8 (1,1,32) f32 x ue8m0",              kE4m3,    kE4m3,    1,  32,   1,  32, f32k,  ue8mn, rcp,  1e-3},
      {"fp8 x fp4 f32 (defaults)",              kE4m3,    kFp4,     1, 128,   1,  32, f32k,  f32k,  dflt, 1e-2},
      {"fp8 x fp4 ue8m0 packed",                kE4m3,    kFp4Int8, 1, 128,   1,  32, ue8mn, ue8mn, pair, 1e-2},
      {"fp8 a(1,64) x fp4 ue8m0 packed",        kE4m3,    kFp4Int8, 1,  64,   1,  32, f32k,  ue8mn, pair, 1e-2},
      // per-32 power-of-two activation scales (Mega MoE's): decode folds them into bf16 activations
      {"fp8 (1,1,32) x fp4, both ue8m0 packed", kE4m3,    kFp4Int8, 1,  32,   1,  32, ue8mn, ue8mn, pair, 1e-2},
      // f32 activation scales (not powers of two): the FP4 tile GEMV folds them per group
      {"fp8 f32 x fp4 ue8m0 packed",            kE4m3,    kFp4Int8, 1, 128,   1,  32, f32k,  ue8mn, pair, 1e-2},
      {"fp4 x fp8 block(128,128)",              kFp4,     kE4m3,    1,  32, 128, 128, f32k,  f32mn, dflt, 1e-2},
      {"fp4 x fp4 ue8m0 packed (defaults)",     kFp4Int8, kFp4,     1,  32,   1,  32, ue8mn, ue8mn, dflt, 2e-2},
      {"fp4 x fp4 f32 MN-major",                kFp4,     kFp4,     1,  32,   1,  32, f32mn, f32mn, rcp,  2e-2},
  };
  return recipes;
}
// clang-format on

// Looks a recipe up by its name (fails the test and returns the first one if absent).
inline const ScaleRecipe& scale_recipe(const std::string& name) {
  for (const ScaleRecipe& r : scale_recipes())
    if (name == r.name) return r;
  ADD_FAILURE() << "no scale recipe named '" << name << "'";
  return scale_recipes()[0];
}

inline bool recipe_is_fp8_only(const ScaleRecipe& r) {
  return r.a_type == kE4m3 && r.b_type == kE4m3;
}

}  // namespace tessera::test
