// Degenerate sizes (M == 0 / N == 0: no write; K == 0: d = c or zeros) and writes confined to a
// window of a larger buffer, for every GEMM family and layout (DeepGEMM's API, docs/gemm.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

class GemmEdgeCases : public IsaLayoutTest {};

// Builds the same shape for the three families (plain bf16, cuBLASLt e4m3, FP8 with block scales).
std::vector<PreparedGemm> prepare_all_families(Layout layout, const GemmShape& s, Rng& rng) {
  std::vector<PreparedGemm> out;
  out.push_back(prepare_plain(Family::kBf16, DType::kBF16, layout, s, rng));
  out.push_back(prepare_plain(Family::kCublasLt, DType::kF8E4M3, layout, s, rng));
  out.push_back(prepare_scaled(scale_recipe("fp8 token(1,128) x block(128,128) f32"), layout, s, rng));
  out.push_back(prepare_scaled(scale_recipe("fp4 x fp4 ue8m0 packed (defaults)"), layout, s, rng));
  return out;
}

TEST_P(GemmEdgeCases, EmptyMOrNWritesNothing) {
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s :
       {GemmShape{0, 48, 64, kKm, kKm, 2, kBf16, CMode::kNone},
        GemmShape{0, 7, 128, kMNm, kKm, 0, kF32, CMode::kSeparate},
        GemmShape{9, 0, 64, kKm, kMNm, 1, kBf16, CMode::kInPlace}, GemmShape{1, 0, 2, kKm, kKm, 3, kF32, CMode::kNone},
        GemmShape{0, 0, 0, kKm, kKm, 1, kBf16, CMode::kNone}}) {
    for (PreparedGemm& g : prepare_all_families(layout(), s, rng)) {
      // check() verifies every byte outside the (empty) view of d kept its initial value.
      EXPECT_TRUE(run_and_check(g));
    }
  }
}

TEST_P(GemmEdgeCases, EmptyKGivesCOrZeros) {
  Rng rng = Rng::for_current_test();
  for (CMode c_mode : {CMode::kNone, CMode::kSeparate, CMode::kInPlace}) {
    for (DType d_type : {kBf16, kF32}) {
      for (PreparedGemm& g : prepare_all_families(layout(), {5, 49, 0, kKm, kKm, 2, d_type, c_mode}, rng)) {
        ASSERT_TRUE(run_and_check(g));
        // Bitwise: d is exactly c (copied or left in place), or +0.0 everywhere.
        const int es = dtype_storage_bytes(d_type);
        std::vector<uint8_t> expected = g.d_initial;
        for (int64_t r = 0; r < g.d.rows; ++r)
          for (int64_t c = 0; c < g.d.cols; ++c) {
            uint8_t* dst = expected.data() + (r * g.d.ld + c) * es;
            if (c_mode == CMode::kSeparate) {
              std::memcpy(dst, g.c->storage.data() + (r * g.c->ld + c) * es, size_t(es));
            } else if (c_mode == CMode::kNone) {
              std::memset(dst, 0, size_t(es));
            }
          }
        EXPECT_TRUE(bitwise_equal(g.d.storage, expected, g.d.rows, g.d.ld, g.d.ld, es)) << g.what;
      }
    }
  }
}

// d is a window in the middle of a larger poisoned matrix: rows above and below, columns left and
// right of it, and the bytes before its data pointer must keep their poison.
TEST_P(GemmEdgeCases, WritesOnlyInsideAWindowOfALargerBuffer) {
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s : {GemmShape{3, 47, 128, kKm, kKm, 0, kBf16, CMode::kNone},
                             GemmShape{129, 49, 64, kKm, kMNm, 0, kF32, CMode::kNone}}) {
    for (PreparedGemm& g : prepare_all_families(layout(), s, rng)) {
      const int64_t top = 2, left = 3;
      Matrix big = make_poisoned_matrix(s.d_dtype, s.m + 4, s.n + 6, 0);
      const std::vector<uint8_t> before = big.storage;
      const int es = dtype_storage_bytes(s.d_dtype);
      const TensorView window(big.storage.data() + (top * big.ld + left) * es, s.d_dtype, {s.m, s.n}, {big.ld, 1});
      if (g.family == Family::kFp8Fp4) {
        call_scaled(layout(), {g.a.view, g.sa->view}, {g.b.view, g.sb->view}, window, nullptr, g.recipe);
      } else {
        call_plain(g.family, layout(), g.a.view, g.b.view, window, nullptr);
      }
      int64_t bad = 0;
      std::string first;
      for (int64_t r = 0; r < big.rows; ++r)
        for (int64_t c = 0; c < big.cols; ++c) {
          const bool inside = r >= top && r < top + s.m && c >= left && c < left + s.n;
          const size_t at = size_t((r * big.ld + c) * es);
          const bool same = std::memcmp(big.storage.data() + at, before.data() + at, size_t(es)) == 0;
          std::string why;
          if (!inside && !same) why = "outside the window was modified";
          if (inside) {
            const double v = big.get(r, c), want = g.ref[size_t((r - top) * s.n + (c - left))];
            if (!(std::fabs(v - want) <=
                  0.02 * std::fabs(want) + 1e-3 * g.ref_abs[size_t((r - top) * s.n + (c - left))]))
              why = "inside the window: got " + std::to_string(v) + ", expected " + std::to_string(want);
          }
          if (!why.empty() && bad++ == 0) first = "(" + std::to_string(r) + ", " + std::to_string(c) + ") " + why;
        }
      EXPECT_EQ(bad, 0) << g.what << "\n  first bad element of the big buffer " << first;
    }
  }
}

// An e4m3 NaN code (S.1111.111) in a weight row makes that output column NaN for every token, and one in
// an activation row that output row NaN: decode rows (the GEMVs, which widen e4m3 through codes that
// have no NaN of their own) and packed ones alike.
TEST_P(GemmEdgeCases, E4m3NanCodesGiveNanOutputs) {
  if (layout() != Layout::kNT) GTEST_SKIP() << "K-major operands only (the decode GEMV's layout)";
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s :
       {GemmShape{1, 37, 200, kKm, kKm, 0, kF32, CMode::kNone}, GemmShape{4, 41, 1280, kKm, kKm, 0, kF32, CMode::kNone},
        GemmShape{6, 23, 96, kKm, kKm, 0, kF32, CMode::kNone},
        GemmShape{12, 19, 256, kKm, kKm, 0, kF32, CMode::kNone}}) {
    PreparedGemm g = prepare_scaled(scale_recipe("fp8 token(1,128) x block(128,128) f32"), layout(), s, rng);
    // Both signs of NaN in weight rows (the GEMVs trace a NaN seen in a block of rows to its row).
    const int64_t nan_col = s.n / 2, pos_nan_col = s.n / 3, nan_row = s.m - 1;
    g.b.storage[size_t(nan_col * s.k + s.k - 3)] = 0xFF;  // rows of k bytes (pad 0), near the K tail
    g.b.storage[size_t(pos_nan_col * s.k + 1)] = 0x7F;
    if (s.m > 1) g.a.storage[size_t(nan_row * s.k + 5)] = 0x7F;
    g.run();
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        const bool expect_nan = j == nan_col || j == pos_nan_col || (s.m > 1 && i == nan_row);
        EXPECT_EQ(std::isnan(g.d.get(i, j)), expect_nan) << g.what << " at (" << i << ", " << j << ")";
      }
  }
}

// Subnormal e4m3 codes (and zeros) between normal ones, as a quantiser leaves them, and more: the
// decode GEMVs give the same bits whether or not MXCSR flushes denormals (DAZ and FTZ, as
// torch.set_flush_denormal sets them), match the float64 reference both times, and leave MXCSR as
// they found it.
TEST_P(GemmEdgeCases, E4m3SubnormalCodesIgnoreFlushDenormals) {
#if defined(__x86_64__)
  if (layout() != Layout::kNT) GTEST_SKIP() << "K-major operands only (the decode GEMV's layout)";
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s : {GemmShape{1, 37, 1088, kKm, kKm, 0, kF32, CMode::kNone},
                             GemmShape{4, 29, 704, kKm, kKm, 0, kF32, CMode::kNone}}) {
    PreparedGemm g = prepare_scaled(scale_recipe("fp8 token(1,128) x block(128,128) f32"), layout(), s, rng);
    // Every 5th weight code subnormal (the avx2 GEMV's planes turn them into fp32 denormals), and the
    // float64 reference again.
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t k = j % 5; k < s.k; k += 5) {
        uint8_t& code = g.b.storage[size_t(j * s.k + k)];  // K-major rows of k codes (pad 0)
        code = uint8_t((code & 0x80) | (1 + (j + k) % 7));
        g.b.values[size_t(j * s.k + k)] = e4m3_to_f32(code);
      }
    compute_reference(&g, s);
    ASSERT_TRUE(run_and_check(g));
    const std::vector<uint8_t> plain = g.d.storage;
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ
    g.run();
    EXPECT_EQ(_mm_getcsr() & ~0x3Fu, (csr | 0x8040u) & ~0x3Fu) << g.what << ": MXCSR not restored";
    _mm_setcsr(csr);
    EXPECT_TRUE(g.d.storage == plain) << g.what << ": other bits under DAZ/FTZ";
    EXPECT_TRUE(g.check());
  }
#else
  GTEST_SKIP() << "x86 MXCSR only";
#endif
}

TESSERA_INSTANTIATE_ISA_LAYOUT(GemmEdgeCases);

}  // namespace
}  // namespace tessera::test
