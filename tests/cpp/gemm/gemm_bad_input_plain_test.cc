// Invalid arguments to bf16_gemm_* / cublaslt_gemm_*: each throws tessera::Error(kInvalidArgument)
// whose message names the function and the argument, and leaves the (poisoned) d untouched.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

constexpr int64_t kM = 9, kN = 48, kK = 64, kPad = 2;

class PlainGemmBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    Rng rng = Rng::for_current_test();
    g_ =
        prepare_plain(Family::kBf16, DType::kBF16, Layout::kNT, {kM, kN, kK, kKm, kKm, kPad, kBf16, CMode::kNone}, rng);
    c_ = make_random_matrix(DType::kBF16, kM, kN, 0, rng);
    c_f32_ = make_random_matrix(DType::kF32, kM, kN, 0, rng);
    a_ = g_.a.view;
    b_ = g_.b.view;
    d_ = g_.d.view;
  }

  // Calls bf16_gemm_nt (or `family`) with the current views; expects an invalid-argument error naming
  // the needles and an untouched d buffer.
  ::testing::AssertionResult rejects(std::initializer_list<std::string> needles, const TensorView* c = nullptr,
                                     Family family = Family::kBf16) {
    const std::vector<uint8_t> d_before = g_.d.storage, a_before = g_.a.storage;
    auto result = throws_invalid([&] { call_plain(family, Layout::kNT, a_, b_, d_, c); }, needles);
    if (!result) return result;
    if (g_.d.storage != d_before) return ::testing::AssertionFailure() << "d was modified before the error";
    if (g_.a.storage != a_before) return ::testing::AssertionFailure() << "a was modified before the error";
    return result;
  }

  PreparedGemm g_;
  Matrix c_, c_f32_;
  TensorView a_, b_, d_;
};

TEST_F(PlainGemmBadInput, BaselineIsValid) {
  EXPECT_TRUE(run_and_check(g_));
}

TEST_F(PlainGemmBadInput, WrongOperandDtype) {
  a_.dtype = DType::kF16;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'a'", "must have dtype bfloat16", "float16"}));
  a_ = g_.a.view;
  b_.dtype = DType::kF32;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'b'", "must have dtype bfloat16"}));
}

TEST_F(PlainGemmBadInput, CublasLtOperandsOfDifferentDtypes) {
  b_.dtype = DType::kF8E4M3;  // allowed alone, not mixed with a bf16 'a'
  EXPECT_TRUE(rejects({"cublaslt_gemm_nt", "'a'", "'b'", "same dtype"}, nullptr, Family::kCublasLt));
  b_.dtype = DType::kI8;  // packed FP4 needs scale factors
  a_.dtype = DType::kI8;
  EXPECT_TRUE(rejects({"cublaslt_gemm_nt", "'a'"}, nullptr, Family::kCublasLt));
}

// Messages name the caller's arguments with the shapes the caller passed, whatever the layout.
TEST_F(PlainGemmBadInput, MessagesUseTheCallersLayout) {
  const TensorView a_km = transposed(a_);  // A given as [K, M] for bf16_gemm_tn
  TensorView b_kn = transposed(b_);        // B given as [K, N]
  b_kn.shape[0] = kK - 1;
  const std::vector<uint8_t> d_before = g_.d.storage;
  EXPECT_TRUE(throws_invalid([&] { call_plain(Family::kBf16, Layout::kTN, a_km, b_kn, d_, nullptr); },
                             {"bf16_gemm_tn", "share K", "a shape [64, 9]", "b shape [63, 48]"}));
  TensorView d_wrong = d_;
  d_wrong.shape[0] = kM + 1;
  EXPECT_TRUE(throws_invalid([&] { call_plain(Family::kBf16, Layout::kTN, a_km, transposed(b_), d_wrong, nullptr); },
                             {"bf16_gemm_tn", "'d'", "[9, 48]", "[10, 48]"}));
  EXPECT_EQ(g_.d.storage, d_before);
}

TEST_F(PlainGemmBadInput, WrongNdim) {
  a_ = TensorView(a_.data, DType::kBF16, {1, kM, kK}, {kM * (kK + kPad), kK + kPad, 1});
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'a'", "must be 2-D", "[1, 9, 64]"}));
  a_ = g_.a.view;
  b_ = TensorView(b_.data, DType::kBF16, {kN * (kK + kPad)});
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'b'", "must be 2-D"}));
}

TEST_F(PlainGemmBadInput, MismatchedK) {
  b_.shape[1] = kK - 1;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'a' and 'b' must share K", "63", "64"}));
}

TEST_F(PlainGemmBadInput, WrongOutputShape) {
  d_.shape[1] = kN + 1;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "must have shape [M, N] = [9, 48]", "[9, 49]"}));
  d_ = g_.d.view;
  d_.shape[0] = kM - 1;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "[8, 48]"}));
}

TEST_F(PlainGemmBadInput, OutputNotRowMajor) {
  d_ = TensorView(d_.data, DType::kBF16, {kM, kN}, {1, kM});
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "row-major"}));
  d_ = TensorView(d_.data, DType::kBF16, {kM, kN}, {kN / 2, 1});  // rows overlap
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "overlapping rows"}));
}

TEST_F(PlainGemmBadInput, OutputDtype) {
  d_.dtype = DType::kF16;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "must have dtype bfloat16 or float32"}));
}

TEST_F(PlainGemmBadInput, AddendWithAnotherDtypeOrShape) {
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'c'", "dtype of 'd'", "float32"}, &c_f32_.view));
  TensorView c = c_.view;
  c.shape[1] = kN - 1;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'c'", "must have the shape of 'd'"}, &c));
  c = TensorView(c_.view.data, DType::kBF16, {kM, kN}, {1, kM});
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'c'", "row-major"}, &c));
}

TEST_F(PlainGemmBadInput, AddendIsOutputWithOtherStrides) {
  TensorView c = d_;
  c.strides[0] = kN;  // same data pointer, different row stride (d has kN + kPad)
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'c' is 'd'", "same strides"}, &c));
}

TEST_F(PlainGemmBadInput, OperandWithoutAUnitStride) {
  a_ = TensorView(a_.data, DType::kBF16, {kM, kK / 2}, {kK + kPad, 2});
  b_.shape[1] = kK / 2;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'a'", "stride(-1) == 1 or stride(-2) == 1"}));
}

TEST_F(PlainGemmBadInput, NullData) {
  a_.data = nullptr;
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'a'", "null data pointer"}));
}

TEST_F(PlainGemmBadInput, OutputOverlapsAnInput) {
  // d placed on top of a's buffer (a is [9, 64] with row stride 66: room for a [9, 48] d).
  d_ = TensorView(g_.a.storage.data(), DType::kBF16, {kM, kN}, {kN, 1});
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "must not overlap input 'a'"}));
  d_ = g_.d.view;
  TensorView c = c_.view;
  c.data = static_cast<uint16_t*>(d_.data) + 1;  // shifted by one element: overlaps, is not d
  EXPECT_TRUE(rejects({"bf16_gemm_nt", "'d'", "'c'", "overlap"}, &c));
}

}  // namespace
}  // namespace tessera::test
