// K-grouped GEMMs (DeepGEMM's API, docs/gemm.md): D[g] = C[g] + A[K_g]^T B[K_g] in fp32 for bf16 and FP8 with
// per-channel scales (fp32 and packed UE8M0, gran_k 32 and 128, K tails), K sizes or psum ends (gaps,
// empty groups), c absent / separate / d itself, the SM90 'nt' form, determinism and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gemm/grouped_harness.h"

namespace tessera::test {
namespace {

struct KGroups {
  std::vector<int64_t> k0, k;  // row range of each group
  std::vector<int32_t> layout;
  int64_t total = 0;
};

// Sizes laid out back to back (each a multiple of `alignment`) or as psum ends at aligned starts.
KGroups k_groups(const std::vector<int64_t>& sizes, int64_t alignment, bool psum) {
  KGroups g;
  int64_t pos = 0;
  for (int64_t s : sizes) {
    const int64_t start = psum ? (pos + alignment - 1) / alignment * alignment : pos;
    g.k0.push_back(s == 0 && psum ? pos : start);
    g.k.push_back(s);
    pos = g.k0.back() + s;
    g.layout.push_back(int32_t(psum ? pos : s));
  }
  g.total = (pos + alignment - 1) / alignment * alignment;
  return g;
}

// Per-channel FP8 of a [total, mn] matrix: rows of each group in blocks of gran_k (last block partial),
// amax floor 1e-4, scale amax / 448 (power of two when ue8m0). Scales fp32 [sum blocks, mn]; deq float64.
struct PerChannel {
  Buffer data, scale;
  std::vector<double> deq;
};
PerChannel per_channel(const KGroups& g, int64_t mn, int gran_k, bool ue8m0, Rng& rng) {
  int64_t blocks = 0;
  for (int64_t k : g.k) blocks += (k + gran_k - 1) / gran_k;
  PerChannel p{Buffer(DType::kF8E4M3, {g.total, mn}), Buffer(DType::kF32, {blocks, mn}),
               std::vector<double>(size_t(g.total * mn), 0.0)};
  int64_t row = 0;
  for (size_t gi = 0; gi < g.k.size(); ++gi)
    for (int64_t b0 = 0; b0 < g.k[gi]; b0 += gran_k, ++row) {
      const int64_t r0 = g.k0[gi] + b0, r1 = g.k0[gi] + std::min(g.k[gi], b0 + gran_k);
      for (int64_t c = 0; c < mn; ++c) {
        std::vector<float> x;
        float amax = 0;
        for (int64_t r = r0; r < r1; ++r) {
          x.push_back(float(rng.normal()));
          amax = std::max(amax, std::fabs(x.back()));
        }
        float sf = std::max(amax, 1e-4f) / 448.0f;
        if (ue8m0) sf = ue8m0_to_f32(f32_to_ue8m0_ceil(sf));
        p.scale.data<float>()[row * mn + c] = sf;
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t q = f32_to_e4m3_sat(x[size_t(r - r0)] * (1.0f / sf));
          p.data.data<uint8_t>()[r * mn + c] = q;
          p.deq[size_t(r * mn + c)] = double(e4m3_to_f32(q)) * sf;
        }
      }
    }
  return p;
}

// int32 [sum_g ceil(blocks_g / 4), mn]: each group's exponents packed four per word, byte 0 padding.
Buffer pack_per_channel(const Buffer& sf, const KGroups& g, int gran_k) {
  const int64_t mn = sf.view.shape[1];
  int64_t words = 0;
  for (int64_t k : g.k) words += ((k + gran_k - 1) / gran_k + 3) / 4;
  Buffer out(DType::kI32, {words, mn});
  std::memset(out.bytes.data(), 0, out.bytes.size());
  int64_t in_row = 0, out_row = 0;
  for (int64_t k : g.k) {
    const int64_t blocks = (k + gran_k - 1) / gran_k;
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t c = 0; c < mn; ++c)
        out.bytes[size_t(((out_row + b / 4) * mn + c) * 4 + b % 4)] =
            uint8_t(f32_bits(sf.data<float>()[(in_row + b) * mn + c]) >> 23);
    in_row += blocks;
    out_row += (blocks + 3) / 4;
  }
  return out;
}

// D[g] = base[g] + sum over group g's rows of a[r]^T b[r]; a [total, m], b [total, n] float64.
std::vector<double> k_reference(const std::vector<double>& a, const std::vector<double>& b, const KGroups& g, int64_t m,
                                int64_t n, const std::vector<double>& base) {
  std::vector<double> ref = base;
  for (size_t gi = 0; gi < g.k.size(); ++gi)
    for (int64_t r = g.k0[gi]; r < g.k0[gi] + g.k[gi]; ++r)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) ref[(gi * m + i) * n + j] += a[size_t(r * m + i)] * b[size_t(r * n + j)];
  return ref;
}

std::vector<double> f32_values(const Buffer& d) {
  std::vector<double> v(size_t(d.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = d.data<float>()[i];
  return v;
}

gemm::KGroupedLayout k_layout(const Buffer& layout, bool psum, int alignment, std::vector<int64_t> ks = {}) {
  gemm::KGroupedLayout l;
  l.grouped_layout = layout.view;
  l.use_psum_layout = psum;
  l.k_alignment = alignment;
  l.ks = std::move(ks);
  return l;
}

TEST(KGrouped, Bf16SizesAndPsumWithEveryCMode) {
  Rng rng = Rng::for_current_test();
  const int64_t m = 24, n = 40;
  for (const bool psum : {false, true}) {
    const KGroups g =
        k_groups(psum ? std::vector<int64_t>{37, 0, 100, 64, 3} : std::vector<int64_t>{64, 0, 96, 32}, 32, psum);
    const int64_t groups = int64_t(g.k.size());
    Bf16Operand a = random_bf16({g.total, m}, rng), b = random_bf16({g.total, n}, rng);
    const Buffer layout = int32_buffer(g.layout);
    for (const int c_mode : {0, 1, 2}) {  // none, separate, c is d
      Buffer d = poisoned_f32({groups, m, n}), c(DType::kF32, {groups, m, n});
      std::vector<double> base(size_t(groups * m * n), 0.0);
      for (int64_t i = 0; i < c.numel(); ++i) c.data<float>()[i] = float(rng.normal() * 8);
      if (c_mode) base = f32_values(c);
      if (c_mode == 2) std::memcpy(d.bytes.data(), c.bytes.data(), c.bytes.size());
      const TensorView* cv = c_mode == 0 ? nullptr : c_mode == 1 ? &c.view : &d.view;
      gemm::k_grouped_bf16_gemm_tn_contiguous(a.buf.view, b.buf.view, d.view, cv, k_layout(layout, psum, 32));
      EXPECT_LT(calc_diff(f32_values(d), k_reference(a.values, b.values, g, m, n, base)), 1e-10)
          << "psum " << psum << " c mode " << c_mode;
    }
  }
}

TEST(KGrouped, Fp8PerChannelScalesBothStyles) {
  Rng rng = Rng::for_current_test();
  const int64_t m = 24, n = 40;
  for (const int gran_k : {32, 128})
    for (const bool psum : {false, true})
      for (const bool packed : {false, true}) {
        const KGroups g =
            k_groups(psum ? std::vector<int64_t>{37, 0, 200, 129} : std::vector<int64_t>{64, 0, 224, 160}, 32, psum);
        const PerChannel a = per_channel(g, m, gran_k, packed, rng), b = per_channel(g, n, gran_k, packed, rng);
        const Buffer sfa = pack_per_channel(a.scale, g, gran_k), sfb = pack_per_channel(b.scale, g, gran_k);
        const Buffer layout = int32_buffer(g.layout);
        const int64_t groups = int64_t(g.k.size());
        Buffer d = poisoned_f32({groups, m, n});
        gemm::k_grouped_fp8_gemm_tn_contiguous({a.data.view, packed ? sfa.view : a.scale.view},
                                               {b.data.view, packed ? sfb.view : b.scale.view}, d.view, nullptr,
                                               k_layout(layout, psum, 32), gran_k);
        const std::vector<double> zero(size_t(groups * m * n), 0.0);
        EXPECT_LT(calc_diff(f32_values(d), k_reference(a.deq, b.deq, g, m, n, zero)), 1e-10)
            << "gran_k " << gran_k << " psum " << psum << " packed " << packed;
      }
}

TEST(KGrouped, Sm90NtFormAndDeterminism) {
  Rng rng = Rng::for_current_test();
  const int64_t m = 16, n = 24;
  const std::vector<int64_t> ks = {128, 0, 256, 384};
  const KGroups g = k_groups(ks, 128, false);
  const PerChannel a = per_channel(g, m, 128, false, rng), b = per_channel(g, n, 128, false, rng);
  // per group a K-major [mn, k_g] block, blocks one after another; scales [mn, sum blocks] (transposed view)
  auto flat = [&](const PerChannel& p, int64_t mn) {
    Buffer out(DType::kF8E4M3, {g.total * mn});
    int64_t at = 0;
    for (size_t gi = 0; gi < ks.size(); ++gi)
      for (int64_t c = 0; c < mn; ++c)
        for (int64_t r = g.k0[gi]; r < g.k0[gi] + ks[gi]; ++r)
          out.bytes[size_t(at++)] = p.data.bytes[size_t(r * mn + c)];
    return out;
  };
  auto transposed = [](TensorView v) {
    std::swap(v.shape[0], v.shape[1]);
    std::swap(v.strides[0], v.strides[1]);
    return v;
  };
  const Buffer fa = flat(a, m), fb = flat(b, n);
  std::vector<uint8_t> first;
  for (const int threads : {1, 2, 3}) {
    NumThreadsScope scope(threads);
    Buffer d = poisoned_f32({4, m, n});
    gemm::k_grouped_fp8_gemm_nt_contiguous({fa.view, transposed(a.scale.view)}, {fb.view, transposed(b.scale.view)},
                                           d.view, nullptr, ks);
    if (threads == 1) {
      EXPECT_LT(calc_diff(f32_values(d), k_reference(a.deq, b.deq, g, m, n, std::vector<double>(size_t(4 * m * n)))),
                1e-10);
      first = d.bytes;
    } else {
      EXPECT_TRUE(bitwise_equal(first, d.bytes, 4 * m, n, n, 4)) << threads << " threads";
    }
  }
}

TEST(KGrouped, BadLayoutsLeaveDUntouched) {
  Rng rng = Rng::for_current_test();
  constexpr const char* kFn = "k_grouped_bf16_gemm_tn_contiguous";
  Bf16Operand a = random_bf16({96, 8}, rng), b = random_bf16({96, 16}, rng);
  Buffer d = poisoned_f32({2, 8, 16});
  const std::vector<uint8_t> before = d.bytes;
  auto run = [&](const std::vector<int32_t>& values, bool psum, std::vector<int64_t> ks = {}) {
    const Buffer layout = int32_buffer(values);
    gemm::k_grouped_bf16_gemm_tn_contiguous(a.buf.view, b.buf.view, d.view, nullptr,
                                            k_layout(layout, psum, 32, std::move(ks)));
  };
  EXPECT_TRUE(throws_invalid([&] { run({64, 40}, false); }, {kFn, "grouped_layout", "multiple of the K alignment"}));
  EXPECT_TRUE(throws_invalid([&] { run({64, 64}, false); }, {kFn, "96"}));
  EXPECT_TRUE(throws_invalid([&] { run({64}, false); }, {kFn, "grouped_layout"}));
  EXPECT_TRUE(throws_invalid([&] { run({64, 32}, false, {64, 0}); }, {kFn, "'ks_cpu'"}));
  EXPECT_TRUE(throws_invalid([&] { run({90, 60}, true); }, {kFn, "grouped_layout"}));
  EXPECT_TRUE(throws_invalid([&] { run({20, 25}, true); }, {kFn, "grouped_layout", "gap"}));  // inside [20, 32)
  EXPECT_TRUE(before == d.bytes);
}

}  // namespace
}  // namespace tessera::test
