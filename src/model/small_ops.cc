// Small operations of the model (small_ops.h).
#include "small_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>

#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/registry.h"
#include "core/abs_max.h"
#include "linear.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm.h"

namespace tessera::model {
namespace {

constexpr double kNormEps = 1e-6;

// Four floats in a vector register (SSE / NEON) through the compiler's vector extension; element-wise
// operations only, each rounded as the scalar one.
using F4 = float __attribute__((vector_size(16)));
F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store4(float* p, F4 v) {
  std::memcpy(p, &v, sizeof v);
}

// RMSNorm of R rows at once: each row's double sum of squares keeps its order (the same bits), the R
// chains sit in registers side by side instead of one add latency per element.
template <int R>
void rms_norm_rows(const float* x, int64_t ld, const float* w, int64_t n, float* y) {
  double ss[R] = {};
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < R; ++r) ss[r] += double(x[r * ld + i]) * x[r * ld + i];
  for (int r = 0; r < R; ++r) {
    const float inv = float(1.0 / std::sqrt(ss[r] / double(n) + kNormEps));
    const float* xr = x + r * ld;
    float* yr = y + r * ld;
    const F4 inv4 = F4{} + inv;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) store4(yr + i, load4(xr + i) * inv4 * load4(w + i));
    for (; i < n; ++i) yr[i] = xr[i] * inv * w[i];
  }
}

}  // namespace

void for_rows(int64_t rows, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn) {
  if (rows * work_per_row < 16384 || rows == 1) {
    fn(0, rows);
    return;
  }
  parallel_for(rows, fn);
}

void rms_norm_strided(const float* x, int64_t ld, const float* w, int64_t rows, int64_t n, float* y) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) rms_norm_rows<4>(x + r * ld, ld, w, n, y + r * ld);
    for (; r < r1; ++r) rms_norm_rows<1>(x + r * ld, ld, w, n, y + r * ld);
  });
}

void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float* y) {
  rms_norm_strided(x, n, w, rows, n, y);
}

void layer_norm(const float* x, const float* w, const float* b, int64_t rows, int64_t n, float* y) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += xr[i];
      const double mean = s / double(n);
      double v = 0;
      for (int64_t i = 0; i < n; ++i) v += (xr[i] - mean) * (xr[i] - mean);
      const double inv = 1.0 / std::sqrt(v / double(n) + kNormEps);
      for (int64_t i = 0; i < n; ++i) yr[i] = float((xr[i] - mean) * inv) * w[i] + b[i];
    }
  });
}

RopeTable make_rope_table(const Config& c, int64_t positions) {
  const int64_t dim = c.qk_rope_head_dim, half = dim / 2;
  const double base = c.rope_theta;
  std::vector<double> freqs(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freqs[size_t(i)] = 1.0 / std::pow(base, double(2 * i) / double(dim));
  if (c.max_seq_len > c.original_seq_len) {
    auto correction_dim = [&](double rotations) {
      return double(dim) * std::log(double(c.original_seq_len) / (rotations * 2 * std::numbers::pi)) /
             (2 * std::log(base));
    };
    const double low = std::max(std::floor(correction_dim(c.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(c.beta_slow)), double(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      const double smooth = 1 - ramp;
      freqs[size_t(i)] = freqs[size_t(i)] / c.rope_factor * (1 - smooth) + freqs[size_t(i)] * smooth;
    }
  }
  RopeTable t;
  t.half = half;
  t.cos.resize(size_t(positions * half));
  t.sin.resize(size_t(positions * half));
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(p) * freqs[size_t(i)];
      t.cos[size_t(p * half + i)] = float(std::cos(angle));
      t.sin[size_t(p * half + i)] = float(std::sin(angle));
    }
  return t;
}

void rope_interleaved(float* x, const RopeTable& t, int64_t pos) {
  const float* c = t.cos.data() + pos * t.half;
  const float* s = t.sin.data() + pos * t.half;
  for (int64_t i = 0; i < t.half; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c[i] - b * s[i];
    x[2 * i + 1] = a * s[i] + b * c[i];
  }
}

void rope_halves(float* x, const RopeTable& t, int64_t pos) {
  const float* c = t.cos.data() + pos * t.half;
  const float* s = t.sin.data() + pos * t.half;
  for (int64_t i = 0; i < t.half; ++i) {
    const float a = x[i], b = x[i + t.half];
    x[i] = a * c[i] - b * s[i];
    x[i + t.half] = a * s[i] + b * c[i];
  }
}

void hadamard128(float* x) {
  // Stages 1 and 2 inside each group of 4 values, then the wider stages on 4-wide vectors: every value
  // sees the same adds in the same stage order as the textbook loop, so the same bits.
  for (int g = 0; g < 128; g += 4) {
    const float a0 = x[g] + x[g + 1], a1 = x[g] - x[g + 1], a2 = x[g + 2] + x[g + 3], a3 = x[g + 2] - x[g + 3];
    x[g] = a0 + a2;
    x[g + 1] = a1 + a3;
    x[g + 2] = a0 - a2;
    x[g + 3] = a1 - a3;
  }
  for (int h = 4; h < 128; h *= 2)
    for (int i = 0; i < 128; i += 2 * h)
      for (int j = i; j < i + h; j += 4) {
        const F4 a = load4(x + j), b = load4(x + j + h);
        store4(x + j, a + b);
        store4(x + j + h, a - b);
      }
  const F4 norm = F4{} + float(1.0 / std::sqrt(128.0));
  for (int i = 0; i < 128; i += 4) store4(x + i, load4(x + i) * norm);
}

float q8_scale(float amax, bool ue8m0) {
  if (!(amax > 0)) return 1.0f;
  const float s = amax / 448.0f;
  if (!ue8m0) return s;
  int e = 0;
  const float m = std::frexp(s, &e);  // s = m 2^e, m in [0.5, 1)
  return m == 0.5f ? s : std::ldexp(1.0f, e);
}

void q8_row(const float* x, int64_t k, bool ue8m0, uint8_t* codes, float* scales) {
  const auto& kernels = *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "model quantiser"));
  for (int64_t b = 0; b < k / 128; ++b) {
    const float* xb = x + b * 128;
    const float s = q8_scale(abs_max16(xb, 128), ue8m0);
    scales[b] = s;
    // x / s is x * (1 / s) exactly when s is a normal power of two (every UE8M0 scale, and 1 for a zero
    // block): the level's vector rounding then gives the division's bits.
    const uint32_t bits = f32_bits(s);
    if ((bits & 0x7FFFFFu) == 0 && (bits >> 23) - 1u < 254u) {
      kernels.e4m3_sat_mul(codes + b * 128, xb, 128, 1.0f / s);
    } else {
      for (int i = 0; i < 128; ++i) codes[b * 128 + i] = f32_to_e4m3_sat(xb[i] / s);
    }
  }
}

void q8_rows(const float* x, int64_t rows, int64_t k, bool ue8m0, uint8_t* codes, float* scales) {
  for_rows(rows, k, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) q8_row(x + r * k, k, ue8m0, codes + r * k, scales + r * (k / 128));
  });
}

void matmul_bf16_f32(const float* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k, float* out) {
  if (rows == 0 || n == 0) return;
  // x rounded to bf16, as DeepSeek's activations are; the product accumulates in f32 (the bf16 GEMM's
  // decode path reads w once at DRAM speed, its larger shapes use the matrix unit where there is one).
  const int64_t padded = gemm_rows(rows);  // batch invariance (linear.h)
  std::vector<uint16_t> xb(size_t(padded * k), 0);
  f32_to_bf16_row(x, rows * k, xb.data());
  std::vector<float> y(padded > rows ? size_t(padded * n) : 0);
  gemm::bf16_gemm_nt(TensorView(xb.data(), DType::kBF16, {padded, k}),
                     TensorView(const_cast<uint16_t*>(w), DType::kBF16, {n, k}),
                     TensorView(padded > rows ? y.data() : out, DType::kF32, {padded, n}));
  if (padded > rows) std::copy_n(y.data(), rows * n, out);
}

void f32_to_bf16_row(const float* x, int64_t n, uint16_t* y) {
  const auto& kernels = *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "model bf16 rows"));
  kernels.round_bf16(y, x, n);
}

void silu_mul(const float* g, const float* u, int64_t n, float* out) {
  constexpr int64_t kPiece = 1024;  // values per parallel row (an exp each)
  for_rows((n + kPiece - 1) / kPiece, kPiece, [&](int64_t p0, int64_t p1) {
    for (int64_t i = p0 * kPiece; i < std::min(n, p1 * kPiece); ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

void embed_tokens(const uint16_t* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t n, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= vocab)
      fail(ErrorCode::kInvalidArgument, "Model: token ", tokens[t], " at index ", t,
           " is outside [0, vocab_size = ", vocab, ")");
    const uint16_t* row = table + int64_t(tokens[t]) * dim;
    for (int64_t i = 0; i < dim; ++i) out[t * dim + i] = bf16_to_f32(row[i]);
  }
}

std::vector<int32_t> argmax_rows(const float* logits, int64_t rows, int64_t n) {
  std::vector<int32_t> out(size_t(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * n;
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i)
      if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    out[size_t(r)] = int32_t(std::max<int64_t>(best, 0));
  }
  return out;
}

}  // namespace tessera::model
