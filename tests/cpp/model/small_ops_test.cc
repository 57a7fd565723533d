// The model's small operations against float64 on random inputs: norms, YaRN rotary (both layouts),
// the 128-point Hadamard transform, q8 (both scale formats) and the bf16 x f32 products.
#include "model/small_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "tessera/core/dtype.h"

namespace tessera::model {
namespace {

std::vector<float> randn(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = float(d(gen));
  return v;
}

TEST(ModelSmallOps, NormsMatchFloat64) {
  const int64_t rows = 7, n = 384;
  const auto x = randn(size_t(rows * n), 1, 3.0), w = randn(size_t(n), 2), b = randn(size_t(n), 3);
  std::vector<float> y(x.size()), z(x.size());
  rms_norm(x.data(), w.data(), rows, n, y.data());
  layer_norm(x.data(), w.data(), b.data(), rows, n, z.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0, s = 0;
    for (int64_t i = 0; i < n; ++i) {
      ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
      s += x[size_t(r * n + i)];
    }
    const double mean = s / n;
    double var = 0;
    for (int64_t i = 0; i < n; ++i) var += (x[size_t(r * n + i)] - mean) * (x[size_t(r * n + i)] - mean);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(r * n + i);
      const double rms = x[k] / std::sqrt(ss / n + 1e-6) * w[size_t(i)];
      const double ln = (x[k] - mean) / std::sqrt(var / n + 1e-6) * w[size_t(i)] + b[size_t(i)];
      EXPECT_NEAR(y[k], rms, 2e-6 * (std::fabs(rms) + 1));
      EXPECT_NEAR(z[k], ln, 2e-6 * (std::fabs(ln) + 1));
    }
  }
}

// DeepSeek's precompute_freqs_cis in float64, then both rotary layouts.
TEST(ModelSmallOps, YarnRotaryMatchesFloat64) {
  for (const bool yarn : {false, true}) {
    Config c;
    c.original_seq_len = 64;
    c.max_seq_len = yarn ? 200 : 64;
    const int64_t positions = 150, dim = 64, half = 32;
    const RopeTable t = make_rope_table(c, positions);
    std::vector<double> freqs(half);
    for (int i = 0; i < half; ++i) freqs[size_t(i)] = std::pow(c.rope_theta, -2.0 * i / dim);
    if (yarn) {
      auto cd = [&](double rot) {
        return dim * std::log(c.original_seq_len / (rot * 2 * std::numbers::pi)) / (2 * std::log(c.rope_theta));
      };
      const double low = std::max(std::floor(cd(c.beta_fast)), 0.0),
                   high = std::min(std::ceil(cd(c.beta_slow)), double(dim - 1));
      for (int i = 0; i < half; ++i) {
        const double smooth = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
        freqs[size_t(i)] = freqs[size_t(i)] / c.rope_factor * (1 - smooth) + freqs[size_t(i)] * smooth;
      }
    }
    for (const int64_t pos : {int64_t(0), int64_t(1), int64_t(77), positions - 1}) {
      const auto x = randn(dim, uint64_t(pos) + 10);
      std::vector<float> a = x, h = x;
      rope_interleaved(a.data(), t, pos);
      rope_halves(h.data(), t, pos);
      for (int i = 0; i < half; ++i) {
        const double cs = std::cos(pos * freqs[size_t(i)]), sn = std::sin(pos * freqs[size_t(i)]);
        const double x0 = x[size_t(2 * i)], x1 = x[size_t(2 * i + 1)], y0 = x[size_t(i)], y1 = x[size_t(i + half)];
        EXPECT_NEAR(a[size_t(2 * i)], x0 * cs - x1 * sn, 1e-5);
        EXPECT_NEAR(a[size_t(2 * i + 1)], x0 * sn + x1 * cs, 1e-5);
        EXPECT_NEAR(h[size_t(i)], y0 * cs - y1 * sn, 1e-5);
        EXPECT_NEAR(h[size_t(i + half)], y0 * sn + y1 * cs, 1e-5);
      }
    }
  }
}

TEST(ModelSmallOps, HadamardMatchesSylvesterMatrix) {
  const auto x = randn(128, 5);
  std::vector<float> y = x;
  hadamard128(y.data());
  for (int i = 0; i < 128; ++i) {
    double ref = 0;
    for (int j = 0; j < 128; ++j) ref += (__builtin_popcount(unsigned(i & j)) % 2 ? -1.0 : 1.0) * x[size_t(j)];
    ref /= std::sqrt(128.0);
    EXPECT_NEAR(y[size_t(i)], ref, 1e-5 * (std::fabs(ref) + 1));
  }
}

TEST(ModelSmallOps, Q8MatchesDefinition) {
  auto x = randn(3 * 128, 6, 5.0);
  std::fill(x.begin() + 128, x.begin() + 256, 0.0f);  // an all-zero block gets scale 1
  x[300] = 1e4f;                                      // a large value saturates nothing: it sets the scale
  for (const bool ue8m0 : {false, true}) {
    std::vector<uint8_t> codes(x.size());
    float scales[3];
    q8_row(x.data(), int64_t(x.size()), ue8m0, codes.data(), scales);
    for (int b = 0; b < 3; ++b) {
      double amax = 0;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(double(x[size_t(b * 128 + i)])));
      double s = amax == 0 ? 1.0 : double(float(amax) / 448.0f);
      if (ue8m0 && amax > 0) s = std::exp2(std::ceil(std::log2(s)));
      EXPECT_EQ(scales[b], float(s)) << "block " << b;
      for (int i = 0; i < 128; ++i) {
        const size_t k = size_t(b * 128 + i);
        const double v = e4m3_to_f32(codes[k]);
        // Round to nearest: the dequantised value is within half an e4m3 step of x / s.
        const double target = x[k] / s;
        EXPECT_LE(std::fabs(v), 448.0);
        const double step = std::exp2(std::max(std::floor(std::log2(std::max(std::fabs(target), 1e-30))), -6.0) - 3);
        EXPECT_LE(std::fabs(v - target), 0.5 * step + 1e-12) << k;
        EXPECT_EQ(codes[k], f32_to_e4m3_sat(float(x[k] / float(s))));
      }
    }
  }
}

// The model's bits are fixed by the plain loops: the vectorised forms must give exactly their results.
TEST(ModelSmallOps, RmsNormBitsAreThoseOfTheSequentialSum) {
  const int64_t n = 257;
  for (const int64_t rows : {1, 3, 8, 11, 17}) {
    const auto x = randn(size_t(rows * n), uint64_t(20 + rows), 7.0), w = randn(size_t(n), 21);
    std::vector<float> y(x.size());
    rms_norm(x.data(), w.data(), rows, n, y.data());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
      const float inv = float(1.0 / std::sqrt(ss / double(n) + 1e-6));
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(f32_bits(y[size_t(r * n + i)]), f32_bits(x[size_t(r * n + i)] * inv * w[size_t(i)]))
            << "rows " << rows << " row " << r << " col " << i;
    }
    // The strided form over the first n - 6 values of each row, in place; the rest of a row untouched.
    std::vector<float> z = x;
    rms_norm_strided(z.data(), n, w.data(), rows, n - 6, z.data());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> expect(size_t(n - 6));
      rms_norm(x.data() + r * n, w.data(), 1, n - 6, expect.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(f32_bits(z[size_t(r * n + i)]), f32_bits(i < n - 6 ? expect[size_t(i)] : x[size_t(r * n + i)]))
            << "strided, rows " << rows << " row " << r << " col " << i;
    }
  }
}

TEST(ModelSmallOps, HadamardBitsAreThoseOfTheButterflyLoop) {
  for (uint64_t seed = 30; seed < 40; ++seed) {
    const auto x = randn(128, seed, 100.0);
    std::vector<float> ref = x, y = x;
    for (int h = 1; h < 128; h *= 2)
      for (int i = 0; i < 128; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const float a = ref[size_t(j)], b = ref[size_t(j + h)];
          ref[size_t(j)] = a + b;
          ref[size_t(j + h)] = a - b;
        }
    for (float& v : ref) v *= float(1.0 / std::sqrt(128.0));
    hadamard128(y.data());
    for (int i = 0; i < 128; ++i) ASSERT_EQ(f32_bits(y[size_t(i)]), f32_bits(ref[size_t(i)])) << i;
  }
}

TEST(ModelSmallOps, Bf16RowBitsAreThoseOfTheScalarRounding) {
  // Ties, carries into the exponent, subnormals, infinities and NaNs with payloads, then random bits.
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu,
                                0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC12345u,
                                0x7FFFFFFFu, 0x00008000u, 0x00018000u, 0x807FFFFFu, 0x7F7F8000u};
  std::mt19937_64 gen(50);
  while (bits.size() < 1001) bits.push_back(uint32_t(gen()));
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = f32_from_bits(bits[i]);
  std::vector<uint16_t> y(x.size());
  f32_to_bf16_row(x.data(), int64_t(x.size()), y.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], f32_to_bf16(x[i])) << std::hex << bits[i];
}

TEST(ModelSmallOps, Q8AmaxSkipsNanAndKeepsInfinity) {
  for (const bool ue8m0 : {false, true}) {
    auto x = randn(256, 41, 3.0);
    x[77] = NAN;  // a NaN never becomes the amax, as with std::max(amax, |x|)
    x[128 + 5] = -INFINITY;
    float amax = 0;
    for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(x[size_t(i)]));
    std::vector<uint8_t> codes(x.size());
    float scales[2];
    q8_row(x.data(), 256, ue8m0, codes.data(), scales);
    EXPECT_EQ(scales[0], q8_scale(amax, ue8m0));
    EXPECT_EQ(scales[1], q8_scale(INFINITY, ue8m0));
  }
}

TEST(ModelSmallOps, Bf16ProductMatchesFloat64) {
  const int64_t rows = 3, n = 37, k = 200;
  const auto x = randn(size_t(rows * k), 7), wf = randn(size_t(n * k), 8);
  std::vector<uint16_t> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
  std::vector<float> out(size_t(rows * n));
  matmul_bf16_f32(x.data(), rows, w.data(), n, k, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {  // x is rounded to bf16 first
        const double p = double(bf16_to_f32(f32_to_bf16(x[size_t(r * k + i)]))) * bf16_to_f32(w[size_t(j * k + i)]);
        ref += p;
        mag += std::fabs(p);
      }
      EXPECT_NEAR(out[size_t(r * n + j)], ref, 1e-6 * mag);
    }
  const std::vector<float> logits = {1, 3, 3, -INFINITY, NAN, 2};
  EXPECT_EQ(argmax_rows(logits.data(), 2, 3), (std::vector<int32_t>{1, 2}));
}

}  // namespace
}  // namespace tessera::model
