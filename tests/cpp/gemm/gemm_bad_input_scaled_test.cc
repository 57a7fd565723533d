// Invalid arguments to fp8_fp4_gemm_*: operands, scale factors (shape, dtype, layout), recipes and
// aliasing. Each throws tessera::Error naming the argument, before d is touched.
#include <gtest/gtest.h>

#include <cstring>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

constexpr int64_t kM = 9, kN = 48, kK = 256, kPad = 2;

class ScaledGemmBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    Rng rng = Rng::for_current_test();
    // FP8 with fp32 per-token SFA [9, 2] and per-block SFB [1, 2] (the default recipe).
    g_ = prepare_scaled(scale_recipe("fp8 token(1,128) x block(128,128) f32"), Layout::kNT,
                        {kM, kN, kK, kKm, kKm, kPad, kBf16, CMode::kNone}, rng);
    a_ = {g_.a.view, g_.sa->view};
    b_ = {g_.b.view, g_.sb->view};
    d_ = g_.d.view;
    scratch_.assign(1 << 16, 0);
  }

  ::testing::AssertionResult rejects(std::initializer_list<std::string> needles, const TensorView* c = nullptr,
                                     ErrorCode code = ErrorCode::kInvalidArgument) {
    const std::vector<uint8_t> d_before = g_.d.storage, scratch_before = scratch_;
    auto result = throws_error([&] { call_scaled(Layout::kNT, a_, b_, d_, c, recipe_); }, code, needles);
    if (!result) return result;
    if (g_.d.storage != d_before) return ::testing::AssertionFailure() << "d was modified before the error";
    if (scratch_ != scratch_before) return ::testing::AssertionFailure() << "scratch was modified before the error";
    return result;
  }

  // A view of `shape` and `strides` on the zeroed scratch buffer (room for any bad view below).
  TensorView scratch_view(DType dtype, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides,
                          int64_t byte_offset = 0) {
    return TensorView(scratch_.data() + byte_offset, dtype, shape, strides);
  }

  PreparedGemm g_;
  gemm::ScaledTensor a_, b_;
  TensorView d_;
  gemm::Recipe recipe_;
  std::vector<uint8_t> scratch_;
};

TEST_F(ScaledGemmBadInput, BaselineIsValid) {
  EXPECT_TRUE(run_and_check(g_));
}

TEST_F(ScaledGemmBadInput, WrongOperandDtypeOrNdim) {
  a_.data.dtype = DType::kBF16;
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'a'", "must have dtype float8_e4m3fn"}));
  a_.data = g_.a.view;
  b_.data = TensorView(b_.data.data, DType::kF8E4M3, {1, kN, kK}, {kN * (kK + kPad), kK + kPad, 1});
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'b'", "must be 2-D"}));
}

TEST_F(ScaledGemmBadInput, MismatchedK) {
  b_.data.shape[1] = kK - 2;
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'a' and 'b' must share K"}));
}

TEST_F(ScaledGemmBadInput, ScaleFactorShapes) {
  a_.scale = scratch_view(DType::kF32, {kM, 3}, {3, 1});
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'a.scale'", "must have shape [9, 2]", "[9, 3]"}));
  a_.scale = g_.sa->view;
  // Per-channel SFB while the default recipe for fp32 SFB is per-block (128 rows share a scale).
  b_.scale = scratch_view(DType::kF32, {kN, 2}, {2, 1});
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'b.scale'", "must have shape [1, 2]", "gran_mn 128"}));
  // Packed int32 SF must hold ceil(sf_k / 4) words per row.
  b_.scale = scratch_view(DType::kI32, {kN, 2}, {2, 1});
  recipe_.recipe = std::array<int, 3>{1, 1, 128};
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'b.scale'", "[48, 1]", "packed UE8M0"}));
}

TEST_F(ScaledGemmBadInput, ScaleFactorDtypeAndNdim) {
  a_.scale.dtype = DType::kBF16;
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'a.scale'", "must have dtype float32 or int32", "bfloat16"}));
  a_.scale = scratch_view(DType::kF32, {1, kM, 2}, {18, 2, 1});
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'a.scale'", "must be 2-D"}));
  a_.scale = g_.sa->view;
  b_.scale.dtype = DType::kUE8M0;  // unpacked byte scales are not an accepted SF format
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'b.scale'", "must have dtype"}));
}

TEST_F(ScaledGemmBadInput, RecipeAndPerOperandRecipeTogether) {
  recipe_.recipe = std::array<int, 3>{1, 128, 128};
  recipe_.recipe_a = std::array<int, 2>{1, 128};
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'recipe'", "'recipe_a'", "not both"}));
}

TEST_F(ScaledGemmBadInput, GranularitiesOutOfRange) {
  recipe_.recipe = std::array<int, 3>{1, 128, 100};
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "gran_k", "multiple of 32", "100"}));
  recipe_.recipe = std::array<int, 3>{1, 128, 0};
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "gran_k", "multiple of 32"}));
  recipe_.recipe = std::array<int, 3>{0, 128, 128};
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "gran_mn", "'a.scale'", ">= 1"}));
  recipe_.recipe.reset();
  recipe_.recipe_a = std::array<int, 2>{1, 96};
  recipe_.recipe_b = std::array<int, 2>{128, 64};
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "(96)", "(64)", "divide one another"}));
}

TEST_F(ScaledGemmBadInput, OutputDtypeShapeAndAddend) {
  d_.dtype = DType::kF16;
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'d'", "must have dtype"}));
  d_ = g_.d.view;
  d_.shape[1] = kN - 1;
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'d'", "[9, 48]"}));
  d_ = g_.d.view;
  const TensorView c = scratch_view(DType::kF32, {kM, kN}, {kN, 1});
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'c'", "dtype of 'd'"}, &c));
}

TEST_F(ScaledGemmBadInput, OutputOverlapsAScaleFactor) {
  // a.scale at the start of scratch, d 16 bytes further on: their byte ranges overlap.
  std::memcpy(scratch_.data(), g_.sa->storage.data(), g_.sa->storage.size());
  a_.scale = scratch_view(DType::kF32, {kM, 2}, {2, 1});
  d_ = scratch_view(DType::kBF16, {kM, kN}, {kN, 1}, 16);
  EXPECT_TRUE(rejects({"fp8_fp4_gemm_nt", "'d'", "must not overlap input 'a.scale'"}));
}

// In the nn/tn/tt layouts scale factors are transposed with their data (SFB of *_nn is [sf_k, sf_n]);
// a wrong SF must be reported in the shapes the caller used, not in the internal nt orientation.
TEST_F(ScaledGemmBadInput, ScaleShapeMessagesUseTheCallersOrientation) {
  b_.data = transposed(g_.b.view);  // B given as [K, N] for fp8_fp4_gemm_nn
  b_.scale = g_.sb->view;           // [1, 2]: the nt orientation, wrong for nn (needs [2, 1])
  const std::vector<uint8_t> d_before = g_.d.storage;
  EXPECT_TRUE(throws_invalid([&] { call_scaled(Layout::kNN, a_, b_, d_, nullptr, recipe_); },
                             {"fp8_fp4_gemm_nn", "'b.scale'", "must have shape [2, 1]", "got [1, 2]"}));
  EXPECT_EQ(g_.d.storage, d_before);
  b_.scale = transposed(g_.sb->view);  // the right orientation works
  EXPECT_NO_THROW(call_scaled(Layout::kNN, a_, b_, d_, nullptr, recipe_));
}

}  // namespace
}  // namespace tessera::test
