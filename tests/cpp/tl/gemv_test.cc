// The tile-language GEMV kernels (src/backends/cpu/tl_gemv.h), which T.gemm runs when A has at most four
// rows, at every level this CPU has that the registry gives one (avx2 and avx512: Highway, fp32 FMAs;
// avx512bf16 and amx: vdpbf16ps): against float64 for every row count, row-block remainders, K tails
// and K longer than one activation pass, fp8 and bf16 weights, padded strides and whole tiles,
// accumulate; bitwise repeatable; a NaN weight (either sign) gives NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/registry.h"
#include "backends/cpu/tl_gemv.h"
#include "tessera/core/cpu.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

struct Case {
  int rows, n_rows, k_len;
  bool fp8, accumulate;
  bool contiguous = false;  // rows exactly k_len apart: one tile (the kernel then prefetches tiles ahead)
};

// Random weights: bf16 values, or every fp8 code except the two NaNs (subnormals and zeros included).
std::vector<uint8_t> random_weights(Rng& rng, int64_t n, bool fp8) {
  std::vector<uint8_t> w(size_t(n) * (fp8 ? 1 : 2));
  if (fp8) {
    for (uint8_t& b : w) {
      b = uint8_t(rng.bits32());
      if ((b & 0x7F) == 0x7F) b ^= 1;
    }
  } else {
    const std::vector<uint16_t> v = to_bf16(random_floats(rng, size_t(n)));
    std::memcpy(w.data(), v.data(), w.size());
  }
  return w;
}

float weight(const std::vector<uint8_t>& w, int64_t i, bool fp8) {
  if (fp8) return e4m3_to_f32(w[size_t(i)]);
  uint16_t h;
  std::memcpy(&h, w.data() + 2 * i, 2);
  return bf16_to_f32(h);
}

// The kernel the registry gives `level`, or nullptr (scalar: T.gemm's own loops).
cpu::TlGemvFn kernel_at(Isa level) {
  return reinterpret_cast<cpu::TlGemvFn>(cpu::choose_kernel_at(cpu::Slot::kTlGemv, level, "test").table);
}

// Levels of this CPU that have a GEMV kernel.
std::vector<Isa> gemv_levels() {
  std::vector<Isa> out;
  for (Isa level : all_isas())
    if (isa_supported(level) && kernel_at(level)) out.push_back(level);
  return out;
}

void check(cpu::TlGemvFn kernel, const Case& c, Rng& rng) {
  const int64_t lda = c.k_len + 5, ldw = c.contiguous ? c.k_len : c.k_len + 3, ldo = c.n_rows + 2;
  const std::vector<uint16_t> a = to_bf16(random_floats(rng, size_t(c.rows * lda)));
  const std::vector<uint8_t> w = random_weights(rng, c.n_rows * ldw, c.fp8);
  std::vector<float> out(size_t(c.rows * ldo));
  for (size_t i = 0; i < out.size(); ++i) out[i] = float(i % 7) - 3.0f;  // accumulate adds to these
  const std::vector<float> before = out;
  cpu::TlGemvArgs g{};
  g.a = a.data(), g.lda = lda, g.rows = c.rows;
  g.w = w.data(), g.w_fp8 = c.fp8, g.ldw = ldw, g.n_rows = c.n_rows, g.k_len = c.k_len;
  g.out = out.data(), g.ldo = ldo, g.accumulate = c.accumulate;
  kernel(g);
  const std::string what = "rows=" + std::to_string(c.rows) + " n=" + std::to_string(c.n_rows) +
                           " k=" + std::to_string(c.k_len) + (c.fp8 ? " fp8" : " bf16") + (c.accumulate ? " acc" : "") +
                           (c.contiguous ? " contiguous" : "");
  for (int m = 0; m < c.rows; ++m) {
    for (int n = 0; n < c.n_rows; ++n) {
      double want = c.accumulate ? before[size_t(m * ldo + n)] : 0.0, mag = std::fabs(want);
      for (int k = 0; k < c.k_len; ++k) {
        const double t = double(bf16_to_f32(a[size_t(m * lda + k)])) * weight(w, n * ldw + k, c.fp8);
        want += t, mag += std::fabs(t);
      }
      // fp32 sums: each of at least 8 lanes adds at most k/8 products, then the lanes and the old value
      const double tolerance = (c.k_len / 8.0 + 8) * std::ldexp(mag, -24) + 1e-30;
      ASSERT_LE(std::fabs(out[size_t(m * ldo + n)] - want), tolerance) << what << " at (" << m << ", " << n << ")";
    }
    for (int64_t n = c.n_rows; n < ldo; ++n)
      ASSERT_EQ(out[size_t(m * ldo + n)], before[size_t(m * ldo + n)]) << what << ": wrote past the rows";
  }
  std::vector<float> again = before;
  g.out = again.data();
  kernel(g);
  ASSERT_EQ(again, out) << what << ": not repeatable";
}

TEST(TlGemv, MatchesFloat64) {
  Rng rng = Rng::for_current_test();
  for (Isa level : gemv_levels()) {
    SCOPED_TRACE(isa_name(level));
    const cpu::TlGemvFn kernel = kernel_at(level);
    for (bool fp8 : {true, false})
      for (int rows = 1; rows <= 4; ++rows)
        for (int n_rows : {1, 3, 4, 7, 8, 13, 20})
          for (int k_len : {1, 31, 64, 100, 128, 2048, 2100})
            check(kernel, {rows, n_rows, k_len, fp8, (n_rows + k_len) % 2 == 1}, rng);
    for (bool fp8 : {true, false})
      for (int rows = 1; rows <= 4; ++rows)
        for (int k_len : {64, 128, 192}) check(kernel, {rows, 64, k_len, fp8, rows % 2 == 0, true}, rng);
  }
}

TEST(TlGemv, NanWeightGivesNan) {
  for (Isa level : gemv_levels()) {
    SCOPED_TRACE(isa_name(level));
    std::vector<uint16_t> a(128, f32_to_bf16(1.0f));
    std::vector<uint8_t> w(8 * 128, 0x38);  // 1.0 in e4m3
    w[3 * 128 + 77] = 0x7F;
    w[6 * 128 + 5] = 0xFF;
    std::vector<float> out(8, 0.0f);
    cpu::TlGemvArgs g{};
    g.a = a.data(), g.lda = 128, g.rows = 1, g.w = w.data(), g.w_fp8 = 1, g.ldw = 128, g.n_rows = 8, g.k_len = 128;
    g.out = out.data(), g.ldo = 8;
    kernel_at(level)(g);
    for (int n = 0; n < 8; ++n) EXPECT_EQ(std::isnan(out[size_t(n)]), n == 3 || n == 6) << n;
    EXPECT_EQ(out[0], 128.0f);
  }
}

TEST(TlGemv, EveryVectorLevelHasOne) {
  for (Isa level : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (isa_supported(level)) {
      EXPECT_NE(kernel_at(level), nullptr) << isa_name(level);
    }
  }
}

}  // namespace
}  // namespace tessera::test
