// Compiled kernels, element-wise: every storage dtype, tails of every size, masked selects, gathers and
// scatters, dynamic shapes without recompiling, argument checking with untouched outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/tl/expr_ops.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

// C_t[i] = A[i] * 1.5 + B_t[i] for several output dtypes t (one kernel, N dynamic).
Kernel mixed_dtype_kernel() {
  static const Kernel k = [] {
    KernelBuilder kb("mixed");
    Expr n = kb.dynamic("N");
    Buffer a = kb.tensor("A", {n}, DataType::kFloat32);
    const DataType types[] = {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat8E4M3, DataType::kInt8,
                              DataType::kInt32};
    std::vector<Buffer> b, c;
    for (DataType t : types) b.push_back(kb.tensor(std::string("B_") + type_name(t), {n}, t));
    for (DataType t : types) c.push_back(kb.tensor(std::string("C_") + type_name(t), {n}, t));
    kb.kernel({ceildiv(n, 100)}, 128, [&](const std::vector<Expr>& bx) {
      kb.parallel({lift(100)}, [&](const std::vector<Expr>& i) {
        Expr idx = bx[0] * 100 + i[0];
        for (size_t t = 0; t < b.size(); ++t) kb.store(c[t], {idx}, kb.load(a, {idx}) * 1.5f + kb.load(b[t], {idx}));
      });
    });
    return compile(kb.finish(), tl_options());
  }();
  return k;
}

template <class S>
std::vector<S> encode(const std::vector<float>& v, S (*enc)(float)) {
  std::vector<S> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = enc(v[i]);
  return out;
}

TEST(TlRunElementwise, EveryDtypeAndTail) {
  Rng rng = Rng::for_current_test();
  Kernel k = mixed_dtype_kernel();
  for (int64_t n : {1, 15, 16, 17, 99, 100, 101, 1000}) {
    std::vector<float> a = random_floats(rng, size_t(n)), bv = random_floats(rng, size_t(n));
    std::vector<uint16_t> b_bf16 = encode<uint16_t>(bv, f32_to_bf16), b_f16 = encode<uint16_t>(bv, f32_to_f16);
    std::vector<uint8_t> b_e4m3 = encode<uint8_t>(bv, f32_to_e4m3);
    std::vector<int8_t> b_i8(static_cast<size_t>(n));
    std::vector<int32_t> b_i32(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      b_i8[size_t(i)] = int8_t(int(bv[size_t(i)] * 10)), b_i32[size_t(i)] = int32_t(bv[size_t(i)] * 1000);
    std::vector<uint16_t> c_bf16(size_t(n) + 1, 0xABCD), c_f16(size_t(n) + 1, 0xABCD);
    std::vector<uint8_t> c_e4m3(size_t(n) + 1, 0x5A);
    std::vector<int8_t> c_i8(size_t(n) + 1, 99);
    std::vector<int32_t> c_i32(size_t(n) + 1, -12345);
    k({TensorView(a.data(), DType::kF32, {n}), TensorView(b_bf16.data(), DType::kBF16, {n}),
       TensorView(b_f16.data(), DType::kF16, {n}), TensorView(b_e4m3.data(), DType::kF8E4M3, {n}),
       TensorView(b_i8.data(), DType::kI8, {n}), TensorView(b_i32.data(), DType::kI32, {n}),
       TensorView(c_bf16.data(), DType::kBF16, {n}), TensorView(c_f16.data(), DType::kF16, {n}),
       TensorView(c_e4m3.data(), DType::kF8E4M3, {n}), TensorView(c_i8.data(), DType::kI8, {n}),
       TensorView(c_i32.data(), DType::kI32, {n})});
    for (int64_t i = 0; i < n; ++i) {
      const size_t j = size_t(i);
      // float32 arithmetic, a * b + c rounded twice at every level (kernels compile with -ffp-contract=off,
      // docs/tl.md), one rounding at the store
      auto f = [&](float b) {
        volatile float product = a[j] * 1.5f;  // this file may be built with contraction on
        return product + b;
      };
      ASSERT_EQ(c_bf16[j], f32_to_bf16(f(bf16_to_f32(b_bf16[j])))) << "n=" << n << " i=" << i;
      ASSERT_EQ(c_f16[j], f32_to_f16(f(f16_to_f32(b_f16[j])))) << "n=" << n << " i=" << i;
      ASSERT_EQ(c_e4m3[j], f32_to_e4m3(f(e4m3_to_f32(b_e4m3[j])))) << "n=" << n << " i=" << i;
      ASSERT_EQ(c_i8[j], int8_t(int32_t(f(float(b_i8[j]))))) << "n=" << n << " i=" << i;
      ASSERT_EQ(c_i32[j], int32_t(f(float(b_i32[j])))) << "n=" << n << " i=" << i;
    }
    // nothing past the end was written
    EXPECT_EQ(c_bf16[size_t(n)], 0xABCD);
    EXPECT_EQ(c_e4m3[size_t(n)], 0x5A);
    EXPECT_EQ(c_i32[size_t(n)], -12345);
  }
}

// Lane-dependent conditions (masked loads inside a select), gathers (transposed reads) and scatters.
TEST(TlRunElementwise, MasksGathersAndScatters) {
  KernelBuilder kb("transpose_relu");
  Expr m = kb.dynamic("M"), n = kb.dynamic("N");
  Buffer a = kb.tensor("A", {m, n}, DataType::kFloat32), t = kb.tensor("T", {n, m}, DataType::kFloat32);
  kb.kernel({ceildiv(n, 32), ceildiv(m, 8)}, 128, [&](const std::vector<Expr>& b) {
    Buffer tile = kb.alloc("tile", {8, 32}, DataType::kFloat32, Scope::kShared);
    kb.copy(corner(a, {b[1] * 8, b[0] * 32}), whole(tile));
    kb.parallel({lift(32), lift(8)}, [&](const std::vector<Expr>& ji) {
      // reads tile[i, j] with j the outer index: a gather; writes T[j, i]: contiguous in i
      Expr v = kb.load(tile, {ji[1], ji[0]});
      kb.store(t, {b[0] * 32 + ji[0], b[1] * 8 + ji[1]},
               select(select(eq(ji[1] % 2, lift(0)), v > 0.0f, v < 0.0f), v, lift(0.0f)));
    });
  });
  Kernel k = compile(kb.finish(), tl_options());
  Rng rng = Rng::for_current_test();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{8, 32}, {13, 45}, {1, 1}, {20, 7}}) {
    std::vector<float> in = random_floats(rng, size_t(rows * cols)), out(size_t(rows * cols), 123.0f);
    k({TensorView(in.data(), DType::kF32, {rows, cols}), TensorView(out.data(), DType::kF32, {cols, rows})});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float v = in[size_t(r * cols + c)];
        const float want = (r % 2 == 0 ? v > 0 : v < 0) ? v : 0.0f;
        ASSERT_EQ(out[size_t(c * rows + r)], want) << rows << "x" << cols << " at (" << r << ", " << c << ")";
      }
  }
}

TEST(TlRunElementwise, DynamicShapesShareOneLibrary) {
  Kernel k = mixed_dtype_kernel();
  const std::string path = k.library_path();
  Kernel again = mixed_dtype_kernel();
  EXPECT_EQ(again.library_path(), path);
  EXPECT_EQ(k.symbol_names(), std::vector<std::string>{"N"});
  EXPECT_NE(k.source().find("tessera_tl_launch_v1"), std::string::npos);
}

TEST(TlRunElementwise, BadArgumentsFailBeforeRunning) {
  KernelBuilder kb("copy2d");
  Expr n = kb.dynamic("N");
  Buffer a = kb.tensor("A", {make_int(4), n}, DataType::kFloat32),
         c = kb.tensor("C", {make_int(4), n}, DataType::kFloat32);
  kb.kernel({make_int(1)}, 128, [&](const std::vector<Expr>&) {
    kb.parallel({lift(4), lift(8)}, [&](const std::vector<Expr>& ij) { kb.store(c, ij, kb.load(a, ij)); });
  });
  Kernel k = compile(kb.finish(), tl_options());
  std::vector<float> in(64, 1.0f), out(64, -7.0f);
  std::vector<int32_t> ints(64, 0);
  auto untouched = [&] {
    for (float x : out)
      if (x != -7.0f) return false;
    return true;
  };
  const TensorView good(in.data(), DType::kF32, {4, 8});
  EXPECT_TRUE(
      throws_error([&] { k({good}); }, ErrorCode::kInvalidArgument, {"copy2d", "expected 2 arguments", "A, C"}));
  EXPECT_TRUE(throws_error(
      [&] {
        k({good, TensorView(ints.data(), DType::kI32, {4, 8})});
      },
      ErrorCode::kInvalidArgument, {"argument 'C'", "dtype float32", "int32"}));
  EXPECT_TRUE(throws_error(
      [&] {
        k({good, TensorView(out.data(), DType::kF32, {32})});
      },
      ErrorCode::kInvalidArgument, {"argument 'C'", "2 dimensions"}));
  EXPECT_TRUE(throws_error(
      [&] {
        k({good, TensorView(out.data(), DType::kF32, {5, 8})});
      },
      ErrorCode::kInvalidArgument, {"argument 'C'", "dimension 0 must be 4", "got 5"}));
  EXPECT_TRUE(throws_error(
      [&] {
        k({good, TensorView(out.data(), DType::kF32, {4, 9})});
      },
      ErrorCode::kInvalidArgument, {"argument 'C'", "dimension 1 is 9", "N = 8"}));
  EXPECT_TRUE(throws_error(
      [&] {
        k({good, TensorView(out.data(), DType::kF32, {4, 8}, {1, 4})});
      },
      ErrorCode::kInvalidArgument, {"argument 'C'", "unit stride in its last dimension"}));
  EXPECT_TRUE(throws_error([&] { k({good, 3}); }, ErrorCode::kInvalidArgument, {"argument 'C' must be a tensor"}));
  EXPECT_TRUE(untouched());
  k({good, TensorView(out.data(), DType::kF32, {4, 8})});
  EXPECT_EQ(out[0], 1.0f);
}

}  // namespace
}  // namespace tessera::test
