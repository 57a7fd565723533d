// TensorView: shapes, strides, sizes, contiguity, byte spans and printing.
#include <gtest/gtest.h>

#include <cstdint>

#include "tessera/core/tensor.h"
#include "test_util.h"

namespace tessera::test {
namespace {

TEST(TensorView, RowMajorConstructorComputesStrides) {
  float buf[1];
  const TensorView t(buf, DType::kF32, {2, 3, 4});
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.stride(-2), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_str(), "[2, 3, 4]");
  EXPECT_EQ(t.strides_str(), "(12, 4, 1)");
}

TEST(TensorView, ExplicitStridesAndContiguity) {
  float buf[1];
  const TensorView padded(buf, DType::kF32, {3, 4}, {6, 1});
  EXPECT_FALSE(padded.is_contiguous());
  const TensorView transposed(buf, DType::kF32, {4, 3}, {1, 4});
  EXPECT_FALSE(transposed.is_contiguous());
  // Size-1 dimensions do not break contiguity whatever their stride.
  const TensorView row(buf, DType::kF32, {1, 5}, {999, 1});
  EXPECT_TRUE(row.is_contiguous());
  const TensorView one(buf, DType::kF32, {7}, {1});
  EXPECT_EQ(one.strides_str(), "(1,)");
}

TEST(TensorView, EmptyViewsAreDefinedWithoutData) {
  const TensorView empty(nullptr, DType::kBF16, {0, 5});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.defined());
  const TensorView missing(nullptr, DType::kBF16, {2, 5});
  EXPECT_FALSE(missing.defined());
}

TEST(TensorView, ByteSpanCoversEveryElement) {
  alignas(64) uint16_t buf[64];
  const char* base = reinterpret_cast<const char*>(buf);
  const char *lo, *hi;
  TensorView(buf, DType::kBF16, {3, 4}, {10, 1}).byte_span(&lo, &hi);
  EXPECT_EQ(lo, base);
  EXPECT_EQ(hi, base + 2 * (2 * 10 + 3 + 1));
  // A negative stride reaches below the data pointer.
  TensorView(buf + 20, DType::kBF16, {3}, {-5}).byte_span(&lo, &hi);
  EXPECT_EQ(lo, base + 2 * 10);
  EXPECT_EQ(hi, base + 2 * 21);
  TensorView(buf, DType::kBF16, {0, 4}).byte_span(&lo, &hi);
  EXPECT_EQ(lo, hi);
}

TEST(TensorView, MajorNess) {
  float buf[1];
  EXPECT_TRUE(last_dim_contiguous(TensorView(buf, DType::kF32, {3, 4}, {8, 1})));
  EXPECT_FALSE(second_last_dim_contiguous(TensorView(buf, DType::kF32, {3, 4}, {8, 1})));
  EXPECT_TRUE(second_last_dim_contiguous(TensorView(buf, DType::kF32, {3, 4}, {1, 5})));
  EXPECT_FALSE(last_dim_contiguous(TensorView(buf, DType::kF32, {3, 4}, {1, 5})));
  // [R, 1] and [1, C] views are both.
  EXPECT_TRUE(last_dim_contiguous(TensorView(buf, DType::kF32, {3, 1}, {1, 7})));
  EXPECT_TRUE(second_last_dim_contiguous(TensorView(buf, DType::kF32, {1, 4}, {9, 2})));
  EXPECT_FALSE(second_last_dim_contiguous(TensorView(buf, DType::kF32, {4}, {1})));
}

TEST(TensorView, ConstructorRejectsBadArguments) {
  float buf[1];
  EXPECT_TRUE(throws_invalid(
      [&] {
        TensorView(buf, DType::kF32, {1, 1, 1, 1, 1, 1, 1});
      },
      {"TensorView", "at most 6 dimensions", "got 7"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        TensorView(buf, DType::kF32, {2, 3}, {1});
      },
      {"TensorView", "2 sizes but 1 strides"}));
}

}  // namespace
}  // namespace tessera::test
