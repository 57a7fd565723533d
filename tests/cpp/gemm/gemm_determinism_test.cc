// Bitwise determinism: the same call gives identical D for 1, 2 and 3 threads and on repeated calls
// (DESIGN.md section 4), on each GEMM path (decode GEMV, packed, reference) and at every ISA level.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

// One call per GEMM path. `recipe` names a scale recipe for fp8_fp4_gemm_*, nullptr for plain GEMMs.
struct DeterminismCase {
  const char* name;
  Family family;
  DType operand_type;
  const char* recipe;
  Layout layout;
  GemmShape shape;
};

// clang-format off
const DeterminismCase kCases[] = {
    {"bf16 decode gemv", Family::kBf16, kBf16, nullptr, Layout::kNT,
     {4, 200, 576, kKm, kKm, 0, kBf16, CMode::kNone}},
    {"bf16 packed, MN-major B, f32 d", Family::kBf16, kBf16, nullptr, Layout::kNT,
     {129, 200, 576, kKm, kMNm, 3, kF32, CMode::kNone}},
    {"bf16 packed, swapped operands, c is d", Family::kBf16, kBf16, nullptr, Layout::kTN,
     {97, 129, 640, kMNm, kKm, 0, kF32, CMode::kInPlace}},
    {"bf16 packed, N over two column blocks", Family::kBf16, kBf16, nullptr, Layout::kNT,
     {64, 1500, 768, kKm, kMNm, 0, kBf16, CMode::kNone}},
    {"cublaslt e4m3 packed", Family::kCublasLt, kE4m3, nullptr, Layout::kNN,
     {129, 97, 256, kKm, kKm, 1, kBf16, CMode::kSeparate}},
    {"fp8 token x block decode gemv", Family::kFp8Fp4, kE4m3, "fp8 token(1,128) x block(128,128) f32", Layout::kNT,
     {8, 200, 576, kKm, kKm, 0, kBf16, CMode::kNone}},
    {"fp8 decode gemv, odd rows (a lone row of a pair) and a K tail", Family::kFp8Fp4, kE4m3,
     "fp8 token(1,128) x block(128,128) f32", Layout::kNT, {3, 203, 704, kKm, kKm, 0, kF32, CMode::kNone}},
    {"bf16 decode gemv in quads (3-row blocks and remainders)", Family::kBf16, kBf16, nullptr, Layout::kNT,
     {4, 203, 2304, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 decode gemv, 7 rows run as 8", Family::kFp8Fp4, kE4m3, "fp8 token(1,128) x block(128,128) f32",
     Layout::kNT, {7, 201, 1280, kKm, kKm, 0, kBf16, CMode::kNone}},
    {"fp8 decode gemv in quads, streamed weights (whole rows)", Family::kFp8Fp4, kE4m3,
     "fp8 token(1,128) x block(128,128) f32", Layout::kNT, {6, 260, 8320, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 decode gemv, streamed weights, rows outside 2 K blocks, K tail", Family::kFp8Fp4, kE4m3,
     "fp8 token(1,128) x block(128,128) f32", Layout::kNT, {8, 131, 16400, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 decode gemv M=1, streamed weights one row at a time, K tail", Family::kFp8Fp4, kE4m3,
     "fp8 token(1,128) x block(128,128) f32", Layout::kNT, {1, 301, 7000, kKm, kKm, 0, kBf16, CMode::kNone}},
    {"bf16 decode gemv M=3, streamed weights one row at a time", Family::kBf16, kBf16, nullptr, Layout::kNT,
     {3, 151, 7168, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 decode gemv M=4, streamed weights in 4-row blocks and single rows", Family::kFp8Fp4, kE4m3,
     "fp8 token(1,128) x block(128,128) f32", Layout::kNT, {4, 301, 7168, kKm, kKm, 0, kF32, CMode::kNone}},
    // On AMX machines the fp8 decode rows above with M >= 4 take the tile GEMV (gemv_amx_e4m3.cc, K in
    // pieces of 512 with a shorter last one, partial 16-row blocks), bf16 ones from M = 5; these two
    // add bf16 rows past a 48-row pass and a partial 16-row block, K not a multiple of 32 (staged), and
    // fp8 scales per channel in packed UE8M0.
    {"bf16 decode gemv M=5 (AMX tiles), partial row blocks, K tail", Family::kBf16, kBf16, nullptr, Layout::kNT,
     {5, 61, 1000, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 decode gemv M=5 (AMX tiles), per-channel ue8m0", Family::kFp8Fp4, kE4m3, "fp8 ue8m0 packed (SM100 defaults)",
     Layout::kNT, {5, 77, 576, kKm, kKm, 0, kBf16, CMode::kNone}},
    {"fp8 per-channel ue8m0 packed", Family::kFp8Fp4, kE4m3, "fp8 ue8m0 packed (SM100 defaults)", Layout::kNT,
     {129, 200, 576, kKm, kKm, 0, kF32, CMode::kNone}},
    // FP4 weights: on AMX machines M >= 4 takes the FP4 tile GEMV (gemv_amx_fp4.cc), with power-of-two
    // activation scales carried on the activations (one accumulator over K) or f32 ones folded per
    // group; K tails inside a 128-value step and a partial 16-row block. M = 3 is the vector FP4 GEMV.
    {"fp8 x fp4 decode gemv M=5 (AMX tiles), ue8m0, K tail", Family::kFp8Fp4, kE4m3, "fp8 x fp4 ue8m0 packed",
     Layout::kNT, {5, 77, 1300, kKm, kKm, 0, kBf16, CMode::kNone}},
    {"fp8 x fp4 decode gemv M=8 (AMX tiles), f32 activation scales", Family::kFp8Fp4, kE4m3,
     "fp8 f32 x fp4 ue8m0 packed", Layout::kNT, {8, 131, 2100, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 x fp4 decode gemv M=4 (AMX tiles, 4 columns)", Family::kFp8Fp4, kE4m3, "fp8 x fp4 ue8m0 packed",
     Layout::kNT, {4, 203, 1300, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 x fp4 decode gemv M=3 (vector)", Family::kFp8Fp4, kE4m3, "fp8 x fp4 ue8m0 packed", Layout::kNT,
     {3, 203, 1300, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp4 x fp4 ue8m0", Family::kFp8Fp4, kFp4, "fp4 x fp4 ue8m0 packed (defaults)", Layout::kNT,
     {64, 97, 256, kKm, kKm, 0, kBf16, CMode::kNone}},
};
// clang-format on

PreparedGemm prepare(const DeterminismCase& dc, Rng& rng) {
  if (dc.recipe) return prepare_scaled(scale_recipe(dc.recipe), dc.layout, dc.shape, rng);
  return prepare_plain(dc.family, dc.operand_type, dc.layout, dc.shape, rng);
}

class GemmDeterminism : public ::testing::TestWithParam<Isa> {};

TEST_P(GemmDeterminism, SameBitsForAnyThreadCountAndRepeatedCalls) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), gemm_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the GEMM kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  for (const DeterminismCase& dc : kCases) {
    PreparedGemm g = prepare(dc, rng);
    const int es = dtype_storage_bytes(g.d.dtype);
    std::vector<uint8_t> first;
    for (int threads : {1, 2, 3}) {
      NumThreadsScope scope(threads);
      g.run();
      if (threads == 1) {
        ASSERT_TRUE(g.check()) << dc.name;
        first = g.d.storage;
      } else {
        EXPECT_TRUE(bitwise_equal(first, g.d.storage, g.d.rows, g.d.cols, g.d.ld, es))
            << dc.name << ": " << threads << " threads vs 1 thread\n  " << g.what;
      }
    }
    for (int repeat = 0; repeat < 5; ++repeat) {
      g.run();
      EXPECT_TRUE(bitwise_equal(first, g.d.storage, g.d.rows, g.d.cols, g.d.ld, es))
          << dc.name << ": repeat " << repeat << "\n  " << g.what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GemmDeterminism, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

}  // namespace
}  // namespace tessera::test
