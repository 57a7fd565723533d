// The other GEMMs of gemm_grouped.h (DeepGEMM's API, docs/gemm.md): einsum's three expressions,
// fp8_einsum 'bhr,hdr->bhd' (other expressions: not implemented), tf32_hc_prenorm_gemm with splits (each
// split's partial sums) and fp8_gemm_nt_skip_head_mid (column mapping, skipped columns untouched).
#include <gtest/gtest.h>

#include <cmath>

#include "gemm/grouped_harness.h"

namespace tessera::test {
namespace {

std::vector<double> bf16_values(const Buffer& d) {
  std::vector<double> v(size_t(d.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(d.data<uint16_t>()[i]);
  return v;
}
std::vector<double> f32_values(const Buffer& d) {
  std::vector<double> v(size_t(d.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = d.data<float>()[i];
  return v;
}

TEST(Einsum, ThreeExpressions) {
  Rng rng = Rng::for_current_test();
  const int64_t B = 5, H = 3, R = 160, D = 40;
  // 'bmk,bnk->mn' with an accumulating fp32 d (c is d)
  Bf16Operand a = random_bf16({B, 24, 72}, rng), b = random_bf16({B, 16, 72}, rng);
  Buffer d = poisoned_f32({24, 16});
  std::vector<double> ref = f32_values(d);
  for (int64_t s = 0; s < B; ++s)
    for (int64_t i = 0; i < 24; ++i)
      for (int64_t j = 0; j < 16; ++j)
        for (int64_t k = 0; k < 72; ++k)
          ref[size_t(i * 16 + j)] += a.values[size_t((s * 24 + i) * 72 + k)] * b.values[size_t((s * 16 + j) * 72 + k)];
  gemm::einsum("bmk,bnk->mn", a.buf.view, b.buf.view, d.view, &d.view);
  EXPECT_LT(calc_diff(f32_values(d), ref), 1e-10);

  // 'bhr,hdr->bhd' and 'bhd,hdr->bhr' with bf16 outputs, against float64
  Bf16Operand x = random_bf16({B, H, R}, rng), y = random_bf16({H, D, R}, rng), xd = random_bf16({B, H, D}, rng);
  Buffer z = poisoned_bf16({B, H, D}), zr = poisoned_bf16({B, H, R});
  gemm::einsum("bhr,hdr->bhd", x.buf.view, y.buf.view, z.view);
  gemm::einsum("bhd,hdr->bhr", xd.buf.view, y.buf.view, zr.view);
  std::vector<double> ref_d(size_t(B * H * D), 0.0), ref_r(size_t(B * H * R), 0.0);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t dd = 0; dd < D; ++dd)
        for (int64_t r = 0; r < R; ++r) {
          const double yv = y.values[size_t((h * D + dd) * R + r)];
          ref_d[size_t((bb * H + h) * D + dd)] += x.values[size_t((bb * H + h) * R + r)] * yv;
          ref_r[size_t((bb * H + h) * R + r)] += xd.values[size_t((bb * H + h) * D + dd)] * yv;
        }
  EXPECT_LT(calc_diff(bf16_values(z), ref_d), 1e-5);
  EXPECT_LT(calc_diff(bf16_values(zr), ref_r), 1e-5);
  EXPECT_TRUE(throws_error([&] { gemm::einsum("bmk,bkn->mn", a.buf.view, b.buf.view, d.view, &d.view); },
                           ErrorCode::kNotImplemented, {"einsum", "bmk,bkn->mn"}));
}

// DeepGEMM sums the per-head einsums in fp32 along one K chain per output; tessera does the same on
// every level (bf16 x bf16 products are exact in fp32, so the chain fixes every bit). K is longer than
// the packed driver's default K block, B = 1 is decode-shaped (the GEMVs would sum along K in lanes),
// b has a padded row stride, and every thread count gives the same bits.
TEST(Einsum, HeadExpressionsSumOneFp32ChainPerOutputOnEveryLevel) {
  Rng rng = Rng::for_current_test();
  const int64_t H = 2, R = 517, D = 283, R_pad = 531;
  Bf16Operand y_full = random_bf16({H, D, R_pad}, rng);
  const TensorView y(y_full.buf.view.data, DType::kBF16, {H, D, R}, {D * R_pad, R_pad, 1});
  auto yv = [&](int64_t h, int64_t dd, int64_t r) { return float(y_full.values[size_t((h * D + dd) * R_pad + r)]); };
  for (const int64_t B : {int64_t(1), int64_t(7)}) {
    Bf16Operand x = random_bf16({B, H, R}, rng), xd = random_bf16({B, H, D}, rng);
    std::vector<float> chain_d(size_t(B * H * D)), chain_r(size_t(B * H * R));
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t dd = 0; dd < D; ++dd) {
          float acc = 0.0f;
          for (int64_t r = 0; r < R; ++r) acc += float(x.values[size_t((bb * H + h) * R + r)]) * yv(h, dd, r);
          chain_d[size_t((bb * H + h) * D + dd)] = acc;
        }
        for (int64_t r = 0; r < R; ++r) {
          float acc = 0.0f;
          for (int64_t dd = 0; dd < D; ++dd) acc += float(xd.values[size_t((bb * H + h) * D + dd)]) * yv(h, dd, r);
          chain_r[size_t((bb * H + h) * R + r)] = acc;
        }
      }
    for (Isa level : all_isas()) {
      if (!isa_supported(level)) continue;
      IsaCapScope cap(level);
      for (int threads : {1, 2, 3}) {
        NumThreadsScope scope(threads);
        Buffer z = poisoned_bf16({B, H, D}), zr = poisoned_bf16({B, H, R}), z32 = poisoned_f32({B, H, D});
        gemm::einsum("bhr,hdr->bhd", x.buf.view, y, z.view);
        gemm::einsum("bhd,hdr->bhr", xd.buf.view, y, zr.view);
        gemm::einsum("bhr,hdr->bhd", x.buf.view, y, z32.view);
        for (size_t i = 0; i < chain_d.size(); ++i) {
          ASSERT_EQ(z.data<uint16_t>()[i], f32_to_bf16(chain_d[i])) << isa_name(level) << " B=" << B << " i=" << i;
          ASSERT_EQ(z32.data<float>()[i], chain_d[i]) << isa_name(level) << " B=" << B << " i=" << i;
        }
        for (size_t i = 0; i < chain_r.size(); ++i)
          ASSERT_EQ(zr.data<uint16_t>()[i], f32_to_bf16(chain_r[i])) << isa_name(level) << " B=" << B << " i=" << i;
      }
    }
  }
}

TEST(Fp8Einsum, BhrHdrBhdAndOtherExpressionsNotImplemented) {
  Rng rng = Rng::for_current_test();
  const int64_t B = 6, H = 3, R = 320, D = 136;
  const Fp8Operand x = quantised_fp8(0, B * H, R, 1, rng);  // per-token [B*H, ceil(R/128)]
  const Fp8Operand y = quantised_fp8(H, D, R, 128, rng);    // per-block [H, ceil(D/128), ceil(R/128)]
  TensorView xv = x.data.view, xs = x.scale.view;
  xv = TensorView(xv.data, xv.dtype, {B, H, R});
  xs = TensorView(xs.data, xs.dtype, {B, H, (R + 127) / 128});
  Buffer z = poisoned_bf16({B, H, D});
  gemm::fp8_einsum("bhr,hdr->bhd", {xv, xs}, {y.data.view, y.scale.view}, z.view);
  std::vector<double> ref(size_t(B * H * D), 0.0);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t dd = 0; dd < D; ++dd)
        for (int64_t r = 0; r < R; ++r)
          ref[size_t((bb * H + h) * D + dd)] +=
              x.deq[size_t((bb * H + h) * R + r)] * y.deq[size_t((h * D + dd) * R + r)];
  EXPECT_LT(calc_diff(bf16_values(z), ref), 1e-5);
  const std::vector<uint8_t> before = z.bytes;
  EXPECT_TRUE(throws_error(
      [&] {
        gemm::fp8_einsum("bhd,hdr->bhr", {xv, xs}, {y.data.view, y.scale.view}, z.view);
      },
      ErrorCode::kNotImplemented, {"fp8_einsum", "bhd,hdr->bhr"}));
  EXPECT_TRUE(before == z.bytes);
}

TEST(HcPrenorm, SplitsHoldTheirBlocksPartialSums) {
  Rng rng = Rng::for_current_test();
  const int64_t m = 13, n = 24, k = 448;  // 7 blocks of 64
  Bf16Operand a = random_bf16({m, k}, rng);
  Buffer b(DType::kF32, {n, k});
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = float(rng.normal());
  for (const int splits : {0, 1, 3, 16}) {
    const int64_t s = std::max(splits, 1);
    Buffer d = splits ? poisoned_f32({s, m, n}) : poisoned_f32({m, n});
    Buffer sq = splits ? poisoned_f32({s, m}) : poisoned_f32({m});
    gemm::tf32_hc_prenorm_gemm(a.buf.view, b.view, d.view, sq.view, splits);
    const int64_t nb = k / 64;
    int64_t block = 0;
    for (int64_t split = 0; split < s; ++split) {
      const int64_t count = nb / s + (split < nb % s ? 1 : 0), k0 = block * 64, k1 = (block + count) * 64;
      block += count;
      std::vector<double> got, want, got_sq, want_sq;
      for (int64_t i = 0; i < m; ++i) {
        double ss = 0;
        for (int64_t kk = k0; kk < k1; ++kk) ss += a.values[size_t(i * k + kk)] * a.values[size_t(i * k + kk)];
        got_sq.push_back(sq.data<float>()[split * m + i]);
        want_sq.push_back(ss);
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t kk = k0; kk < k1; ++kk)
            acc += a.values[size_t(i * k + kk)] * double(b.data<float>()[j * k + kk]);
          got.push_back(d.data<float>()[(split * m + i) * n + j]);
          want.push_back(acc);
        }
      }
      if (k1 == k0) {  // a split without blocks holds zeros
        for (double v : got) ASSERT_EQ(v, 0.0) << "split " << split;
        for (double v : got_sq) ASSERT_EQ(v, 0.0) << "split " << split;
        continue;
      }
      EXPECT_LT(calc_diff(got, want), 1e-10) << "splits " << splits << " split " << split;
      EXPECT_LT(calc_diff(got_sq, want_sq), 1e-10) << "splits " << splits << " split " << split;
    }
  }
}

TEST(SkipHeadMid, MapsColumnsAndLeavesTheMiddleUntouched) {
  Rng rng = Rng::for_current_test();
  const int64_t m = 20, k = 320, left = 32, mid = 16, right = 32, heads = 3, n = heads * (left + right);
  const Fp8Operand a = quantised_fp8(0, m, k, 1, rng), b = quantised_fp8(0, n, k, 128, rng);
  Buffer d = poisoned_bf16({m, n + heads * mid});
  gemm::fp8_gemm_nt_skip_head_mid({a.data.view, a.scale.view}, {b.data.view, b.scale.view}, d.view, {left, mid, right});
  const int64_t width = n + heads * mid;
  std::vector<bool> written(size_t(width), false);
  std::vector<double> got, want;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t col = j + (j + right) / (left + right) * mid;
    written[size_t(col)] = true;
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a.deq[size_t(i * k + kk)] * b.deq[size_t(j * k + kk)];
      got.push_back(bf16_to_f32(d.data<uint16_t>()[i * width + col]));
      want.push_back(acc);
    }
  }
  EXPECT_LT(calc_diff(got, want), 1e-5);
  for (int64_t col = 0; col < width; ++col) {
    if (written[size_t(col)]) continue;
    for (int64_t i = 0; i < m; ++i)
      ASSERT_EQ(d.data<uint16_t>()[i * width + col], kPoisonBf16Value) << "skipped column " << col << " row " << i;
  }
}

}  // namespace
}  // namespace tessera::test
