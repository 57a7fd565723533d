// How element-wise kernels run: the row-sweep band function (src/tl/passes/row_sweep.h) exists only for
// grids it suits and gives the same bits as block-by-block runs for every thread count; streaming
// stores (forced with a zero threshold) write the same bits as plain stores, aligned or not; the bf16
// rounding and min/max vector fast paths agree bit for bit with the scalar definitions on every float
// class (zeros, subnormals, ties, overflow, infinities, NaN payloads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tessera/core/memory.h"
#include "tessera/tl/expr_ops.h"
#include "tl/runtime/library.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

// C = relu(A + B * 0.5) over bm x bn tiles; grid (ceil(N / bn), ceil(M / bm)). `transposed` writes
// C[x, y] instead (a strided store: no row sweep).
Program relu_add_program(int bm, int bn, bool transposed = false) {
  KernelBuilder kb("relu_add");
  Expr m = kb.dynamic("M"), n = kb.dynamic("N");
  Buffer a = kb.tensor("A", {m, n}, DataType::kBFloat16), b = kb.tensor("B", {m, n}, DataType::kBFloat16);
  Buffer c = transposed ? kb.tensor("C", {n, m}, DataType::kBFloat16) : kb.tensor("C", {m, n}, DataType::kBFloat16);
  kb.kernel({ceildiv(n, bn), ceildiv(m, bm)}, 128, [&](const std::vector<Expr>& blk) {
    kb.parallel({lift(bm), lift(bn)}, [&](const std::vector<Expr>& ij) {
      Expr y = kb.let("y", blk[1] * bm + ij[0]), x = kb.let("x", blk[0] * bn + ij[1]);
      Expr v = max(kb.load(a, {y, x}) + kb.load(b, {y, x}) * 0.5f, 0.0f);
      transposed ? kb.store(c, {x, y}, v) : kb.store(c, {y, x}, v);
    });
  });
  return kb.finish();
}

bool has_band(const Program& p) {
  return generate_source(p).find("tl_band_0") != std::string::npos;
}

TEST(TlRunSchedule, RowSweepOnlyForContiguousTiles) {
  if (active_isa() == Isa::kScalar) GTEST_SKIP() << "the scalar level makes no vector loops to sweep";
  EXPECT_TRUE(has_band(relu_add_program(3, 40)));
  EXPECT_FALSE(has_band(relu_add_program(3, 40, true))) << "a transposed store does not continue across blocks";
  {  // a one-dimensional grid has a single band
    KernelBuilder kb("flat");
    Expr n = kb.dynamic("N");
    Buffer a = kb.tensor("A", {n}, DataType::kFloat32), c = kb.tensor("C", {n}, DataType::kFloat32);
    kb.kernel({ceildiv(n, 64)}, 128, [&](const std::vector<Expr>& blk) {
      kb.parallel({lift(64)}, [&](const std::vector<Expr>& i) {
        kb.store(c, {blk[0] * 64 + i[0]}, kb.load(a, {blk[0] * 64 + i[0]}));
      });
    });
    EXPECT_FALSE(has_band(kb.finish()));
  }
  {  // per-block on-chip buffers: blocks of one band would share them
    KernelBuilder kb("staged");
    Expr m = kb.dynamic("M"), n = kb.dynamic("N");
    Buffer a = kb.tensor("A", {m, n}, DataType::kFloat32), c = kb.tensor("C", {m, n}, DataType::kFloat32);
    kb.kernel({ceildiv(n, 32), ceildiv(m, 4)}, 128, [&](const std::vector<Expr>& blk) {
      Buffer s = kb.alloc("s", {4, 32}, DataType::kFloat32, Scope::kShared);
      kb.copy(corner(a, {blk[1] * 4, blk[0] * 32}), whole(s));
      kb.copy(whole(s), corner(c, {blk[1] * 4, blk[0] * 32}));
    });
    EXPECT_FALSE(has_band(kb.finish()));
  }
}

// Bands (many rows of tiles) and single blocks (few) agree bit for bit with the scalar definition, for
// 1, 2 and 3 threads, with padded rows and tails in both dimensions; padding stays untouched.
TEST(TlRunSchedule, BandsAndBlocksGiveTheSameBits) {
  Kernel k = compile(relu_add_program(3, 40), tl_options());
  Rng rng = Rng::for_current_test();
  for (auto [m, n] : {std::pair<int64_t, int64_t>{2, 50}, {97, 133}, {64, 80}, {5, 1}}) {
    const int64_t ld = n + 7;
    const std::vector<uint16_t> a = to_bf16(random_floats(rng, size_t(m * ld))),
                                b = to_bf16(random_floats(rng, size_t(m * ld)));
    std::vector<uint16_t> want(size_t(m * ld), 0xABCD);
    for (int64_t y = 0; y < m; ++y)
      for (int64_t x = 0; x < n; ++x) {
        const size_t i = size_t(y * ld + x);
        want[i] = f32_to_bf16(std::max(bf16_to_f32(a[i]) + bf16_to_f32(b[i]) * 0.5f, 0.0f));
      }
    for (int threads : {1, 2, 3}) {
      NumThreadsScope scope(threads);
      std::vector<uint16_t> c(size_t(m * ld), 0xABCD);
      k({TensorView(const_cast<uint16_t*>(a.data()), DType::kBF16, {m, n}, {ld, 1}),
         TensorView(const_cast<uint16_t*>(b.data()), DType::kBF16, {m, n}, {ld, 1}),
         TensorView(c.data(), DType::kBF16, {m, n}, {ld, 1})});
      ASSERT_EQ(c, want) << m << " x " << n << ", " << threads << " threads";
    }
  }
}

// Every output streams (threshold 0): same bits as the reference, for aligned outputs, outputs 16 or 32
// bytes off alignment (streamed in 16-byte pieces) and outputs one element off alignment (those fall
// back to plain stores), converted and raw (same-dtype) copies.
TEST(TlRunSchedule, StreamingStoresWriteTheSameBits) {
  if (active_isa() == Isa::kScalar) GTEST_SKIP() << "the scalar level has no streaming stores";
  KernelBuilder kb("stream_copy");
  Expr n = kb.dynamic("N");
  Buffer a = kb.tensor("A", {n}, DataType::kFloat32);
  Buffer c32 = kb.tensor("C32", {n}, DataType::kFloat32), c16 = kb.tensor("C16", {n}, DataType::kBFloat16);
  kb.kernel({ceildiv(n, 256)}, 128, [&](const std::vector<Expr>& blk) {
    kb.parallel({lift(256)}, [&](const std::vector<Expr>& i) {
      Expr x = kb.let("x", blk[0] * 256 + i[0]);
      kb.store(c32, {x}, kb.load(a, {x}));
      kb.store(c16, {x}, kb.load(a, {x}));
    });
  });
  Kernel k = compile(kb.finish(), tl_options());
  EXPECT_NE(k.source().find("tl_block_0<true>"), std::string::npos) << "the kernel has a streaming instance";
  set_stream_bytes(0);
  Rng rng = Rng::for_current_test();
  for (int64_t n : {16, 1000, 4099}) {
    const std::vector<float> in = random_floats(rng, size_t(n));
    for (int64_t offset : {0, 1, 4, 8}) {
      AlignedPtr<float> out32 = aligned_array<float>(size_t(n + 8));
      AlignedPtr<uint16_t> out16 = aligned_array<uint16_t>(size_t(n + 8));
      std::fill_n(out32.get(), n + 8, -1.0f);
      std::fill_n(out16.get(), n + 8, uint16_t(0xABCD));
      k({TensorView(const_cast<float*>(in.data()), DType::kF32, {n}),
         TensorView(out32.get() + offset, DType::kF32, {n}), TensorView(out16.get() + offset, DType::kBF16, {n})});
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out32[size_t(i + offset)], in[size_t(i)]) << "n=" << n << " offset=" << offset << " i=" << i;
        ASSERT_EQ(out16[size_t(i + offset)], f32_to_bf16(in[size_t(i)]))
            << "n=" << n << " offset=" << offset << " i=" << i;
      }
      EXPECT_EQ(out16[size_t(offset ? 0 : n)], 0xABCD);
    }
  }
  set_stream_bytes(-1);
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(TlRunSchedule, Bf16RoundingAndMinMaxMatchScalarOnEveryClass) {
  KernelBuilder kb("classes");
  Expr n = kb.dynamic("N");
  Buffer x = kb.tensor("X", {n}, DataType::kFloat32), y = kb.tensor("Y", {n}, DataType::kFloat32);
  Buffer r = kb.tensor("R", {n}, DataType::kBFloat16);
  Buffer hi = kb.tensor("Hi", {n}, DataType::kFloat32), lo = kb.tensor("Lo", {n}, DataType::kFloat32);
  kb.kernel({ceildiv(n, 64)}, 128, [&](const std::vector<Expr>& blk) {
    kb.parallel({lift(64)}, [&](const std::vector<Expr>& i) {
      Expr j = kb.let("j", blk[0] * 64 + i[0]);
      kb.store(r, {j}, kb.load(x, {j}));
      kb.store(hi, {j}, max(kb.load(x, {j}), kb.load(y, {j})));
      kb.store(lo, {j}, min(kb.load(x, {j}), kb.load(y, {j})));
    });
  });
  Kernel k = compile(kb.finish(), tl_options());
  // Special patterns, each alone in an otherwise ordinary 16-lane vector and also packed together.
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00400000u, 0x3F808000u,
                               0x3F818000u, 0xBF808000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                               0x7F800001u, 0xFFC00001u, 0x7FFFFFFFu, 0x7FC00000u, 0x00800000u, 0x007FFFFFu};
  Rng rng = Rng::for_current_test();
  std::vector<float> xs, ys;
  for (uint32_t s : specials) {
    for (int l = 0; l < 16; ++l) xs.push_back(l == 5 ? from_bits(s) : float(rng.normal()));
    for (int l = 0; l < 16; ++l) ys.push_back(float(rng.normal()));
  }
  for (uint32_t s : specials) xs.push_back(from_bits(s));
  for (uint32_t s : specials) ys.push_back(from_bits(specials[(s * 7u) % (sizeof specials / 4)]));
  for (int i = 0; i < 2000; ++i) {
    xs.push_back(from_bits(rng.bits32()));
    ys.push_back(i % 3 ? from_bits(rng.bits32()) : xs.back());
  }
  const int64_t count = int64_t(xs.size());
  std::vector<uint16_t> rounded(xs.size());
  std::vector<float> maxes(xs.size()), mins(xs.size());
  k({TensorView(xs.data(), DType::kF32, {count}), TensorView(ys.data(), DType::kF32, {count}),
     TensorView(rounded.data(), DType::kBF16, {count}), TensorView(maxes.data(), DType::kF32, {count}),
     TensorView(mins.data(), DType::kF32, {count})});
  for (size_t i = 0; i < xs.size(); ++i) {
    const float a = xs[i], b = ys[i];
    ASSERT_EQ(rounded[i], f32_to_bf16(a)) << "bf16 of " << hex(bits_of(a));
    ASSERT_EQ(bits_of(maxes[i]), bits_of(a > b ? a : b)) << "max(" << hex(bits_of(a)) << ", " << hex(bits_of(b)) << ")";
    ASSERT_EQ(bits_of(mins[i]), bits_of(a < b ? a : b)) << "min(" << hex(bits_of(a)) << ", " << hex(bits_of(b)) << ")";
  }
}

}  // namespace
}  // namespace tessera::test
