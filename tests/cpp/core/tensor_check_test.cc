// The check_* helpers: each passes valid views and throws Error(kInvalidArgument) whose message names
// the function, the argument and the rule.
#include <gtest/gtest.h>

#include <cstdint>

#include "tessera/core/tensor.h"
#include "test_util.h"

namespace tessera::test {
namespace {

alignas(64) uint8_t g_buf[4096];

TensorView view(DType dt, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) {
  return TensorView(g_buf, dt, shape, strides);
}

TEST(TensorCheck, Defined) {
  EXPECT_NO_THROW(check_defined("fn_a", "x", TensorView(g_buf, DType::kF32, {2})));
  EXPECT_NO_THROW(check_defined("fn_a", "x", TensorView(nullptr, DType::kF32, {0, 3})));
  EXPECT_TRUE(throws_invalid([] { check_defined("fn_a", "x", TensorView(nullptr, DType::kF32, {2})); },
                             {"fn_a", "'x'", "null data pointer"}));
}

TEST(TensorCheck, Dtype) {
  const TensorView t(g_buf, DType::kF16, {2});
  EXPECT_NO_THROW(check_dtype("fn_b", "w", t, {DType::kBF16, DType::kF16}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        check_dtype("fn_b", "w", t, {DType::kBF16, DType::kF32});
      },
      {"fn_b", "'w'", "must have dtype bfloat16 or float32", "got float16"}));
}

TEST(TensorCheck, Ndim) {
  const TensorView t(g_buf, DType::kF32, {2, 3, 4});
  EXPECT_NO_THROW(check_ndim("fn_c", "y", t, {2, 3}));
  EXPECT_TRUE(throws_invalid([&] { check_ndim("fn_c", "y", t, {2}); }, {"fn_c", "'y'", "must be 2-D", "[2, 3, 4]"}));
}

TEST(TensorCheck, Dim) {
  const TensorView t(g_buf, DType::kF32, {2, 3});
  EXPECT_NO_THROW(check_dim("fn_d", "z", t, 1, 3, "K"));
  EXPECT_NO_THROW(check_dim("fn_d", "z", t, -1, 3, "K"));
  EXPECT_TRUE(
      throws_invalid([&] { check_dim("fn_d", "z", t, 1, 5, "K"); }, {"fn_d", "'z'", "dimension 1 must be K = 5"}));
}

TEST(TensorCheck, SameShape) {
  const TensorView a(g_buf, DType::kF32, {2, 3}), b(g_buf, DType::kBF16, {2, 3}), c(g_buf, DType::kF32, {3, 2});
  EXPECT_NO_THROW(check_same_shape("fn_e", "c", a, "d", b));  // dtype is not part of the shape
  EXPECT_TRUE(throws_invalid([&] { check_same_shape("fn_e", "c", c, "d", a); },
                             {"fn_e", "'c'", "must have the shape of 'd'", "[2, 3]", "[3, 2]"}));
}

TEST(TensorCheck, NoSelfOverlap) {
  EXPECT_NO_THROW(check_no_self_overlap("fn_s", "d", view(DType::kF32, {3, 4}, {4, 1})));
  EXPECT_NO_THROW(check_no_self_overlap("fn_s", "d", view(DType::kF32, {3, 4}, {1, 3})));        // column-major
  EXPECT_NO_THROW(check_no_self_overlap("fn_s", "d", view(DType::kF32, {2, 3, 4}, {4, 8, 1})));  // permuted outer dims
  EXPECT_NO_THROW(check_no_self_overlap("fn_s", "d", view(DType::kF32, {1, 4}, {0, 1})));  // size-1 dim, any stride
  EXPECT_NO_THROW(check_no_self_overlap("fn_s", "d", view(DType::kF32, {0, 4}, {0, 0})));  // empty
  const auto rejects = [](std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) {
    const TensorView t = view(DType::kF32, shape, strides);
    return throws_invalid([&] { check_no_self_overlap("fn_s", "d", t); }, {"fn_s", "'d'", "share memory"});
  };
  EXPECT_TRUE(rejects({3, 4}, {0, 1}));        // broadcast rows
  EXPECT_TRUE(rejects({3, 4}, {2, 1}));        // rows overlap their neighbours
  EXPECT_TRUE(rejects({2, 2, 4}, {4, 2, 1}));  // the middle dimension steps into the inner one
}

TEST(TensorCheck, RowMajor) {
  EXPECT_NO_THROW(check_row_major("fn_f", "d", view(DType::kF32, {3, 4}, {4, 1})));
  EXPECT_NO_THROW(check_row_major("fn_f", "d", view(DType::kF32, {3, 4}, {9, 1})));  // padded rows
  EXPECT_TRUE(throws_invalid(
      [] {
        check_row_major("fn_f", "d", view(DType::kF32, {3, 4}, {1, 3}));
      },
      {"fn_f", "'d'", "must be row-major (stride(-1) == 1)", "(1, 3)"}));
  EXPECT_TRUE(throws_invalid(
      [] {
        check_row_major("fn_f", "d", view(DType::kF32, {3, 4}, {2, 1}));
      },
      {"fn_f", "'d'", "overlapping rows"}));
}

// A [3, 1] column has three one-element rows at offsets 0, 1, 2: they do not overlap, whatever the
// (unused) stride of the size-1 column dimension is.
TEST(TensorCheck, RowMajorColumnVectorWithUnusedStride) {
  EXPECT_NO_THROW(check_row_major("fn_f", "d", view(DType::kF32, {3, 1}, {1, 1})));
  EXPECT_NO_THROW(check_row_major("fn_f", "d", view(DType::kF32, {3, 1}, {1, 5})));
}

TEST(TensorCheck, Contiguous) {
  EXPECT_NO_THROW(check_contiguous("fn_g", "q", view(DType::kF32, {3, 4}, {4, 1})));
  EXPECT_TRUE(throws_invalid(
      [] {
        check_contiguous("fn_g", "q", view(DType::kF32, {3, 4}, {5, 1}));
      },
      {"fn_g", "'q'", "must be contiguous", "(5, 1)"}));
}

TEST(TensorCheck, NoOverlap) {
  auto at = [](int64_t offset, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides) {
    return TensorView(g_buf + offset, DType::kBF16, shape, strides);
  };
  // [2, 3] bf16 at offset 0 touches bytes [0, 2*(1*10+2+1)) = [0, 26).
  const TensorView out = at(0, {2, 3}, {10, 1});
  EXPECT_NO_THROW(check_no_overlap("fn_h", "d", out, "a", at(26, {4}, {1})));       // adjacent
  EXPECT_NO_THROW(check_no_overlap("fn_h", "d", out, "a", at(0, {0, 3}, {3, 1})));  // empty
  EXPECT_TRUE(throws_invalid([&] { check_no_overlap("fn_h", "d", out, "a", at(24, {4}, {1})); },
                             {"fn_h", "output 'd'", "must not overlap input 'a'"}));
  // Spans are conservative: an input inside the gap between two rows of the output still counts.
  EXPECT_TRUE(
      throws_invalid([&] { check_no_overlap("fn_h", "d", out, "b", at(8, {2}, {1})); }, {"fn_h", "'d'", "'b'"}));
  // Negative strides reach below the data pointer.
  EXPECT_TRUE(throws_invalid([&] { check_no_overlap("fn_h", "d", at(40, {3}, {-8}), "c", at(10, {1}, {1})); },
                             {"fn_h", "'d'", "'c'"}));
}

}  // namespace
}  // namespace tessera::test
