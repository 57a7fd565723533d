// The portable MLA kernel set: fp32 K rows and queries, one query row at a time, exact exp. It is the
// reference the vectorised sets are tested against, the path for CPUs without AVX-512 BF16, and the
// path for fp16 inputs (fp16 and bf16 values are exact in fp32).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/mla_kernel_set.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {
namespace {

constexpr int kTileTokens = 64;

size_t q_packed_bytes(int m, int d_qk) {
  return size_t(m) * size_t(d_qk) * sizeof(float);
}

void pack_q(const void* q, int m, int d_qk, void* packed) {
  std::memcpy(packed, q, q_packed_bytes(m, d_qk));
}

size_t scratch_bytes(int, int, int) {
  return kTileTokens * sizeof(float);
}

float dot(const float* a, const float* b, int n) {
  float acc = 0;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void attend_tile(const MlaTileArgs& a) {
  if (a.progress) a.progress(a.progress_ctx, 0, 1);
  const float* q = static_cast<const float*>(a.q_packed);
  const float* const* k = reinterpret_cast<const float* const*>(a.k_rows);
  const float* const* v = a.v_rows ? reinterpret_cast<const float* const*>(a.v_rows) : k;
  float* s = static_cast<float*>(a.scratch);
  for (int r = 0; r < a.m; ++r) {
    const int vis = a.visible ? a.visible[r] : a.nt;
    if (vis <= 0) continue;
    float tile_max = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (int t = 0; t < vis; ++t) {
      s[t] = a.scale * dot(q + size_t(r) * a.d_qk, k[t], a.d_qk);
      tile_max = std::fmax(tile_max, s[t]);
      nan |= std::isnan(s[t]);
    }
    if (nan) {  // the row's result is NaN, as the products would make it (finish_row reads the NaN sum)
      a.row_sum[r] = std::numeric_limits<float>::quiet_NaN();
      std::fill(a.o + size_t(r) * a.d_v, a.o + size_t(r + 1) * a.d_v, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    const float m_old = a.row_max[r], m_new = std::fmax(m_old, tile_max);
    if (m_new == -std::numeric_limits<float>::infinity()) continue;  // every score so far is -inf
    const float alpha = std::exp(m_old - m_new);
    float* o = a.o + size_t(r) * a.d_v;
    float sum = a.row_sum[r] * alpha;
    for (int c = 0; c < a.d_v; ++c) o[c] *= alpha;
    for (int t = 0; t < vis; ++t) {
      const float p = std::exp(s[t] - m_new);
      sum += p;
      for (int c = 0; c < a.d_v; ++c) o[c] += p * v[t][c];
    }
    a.row_max[r] = m_new;
    a.row_sum[r] = sum;
  }
}

// e4m3 -> fp32 * scale -> bf16, kept as fp32.
float dequant(uint8_t e, float scale) {
  return bf16_to_f32(f32_to_bf16(e4m3_to_f32(e) * scale));
}

void dequant_v32(const uint8_t* token, void* row) {
  float* out = static_cast<float*>(row);
  float scales[4];
  std::memcpy(scales, token + 512, sizeof(scales));
  for (int i = 0; i < 512; ++i) out[i] = dequant(token[i], scales[i / 128]);
  for (int i = 0; i < 64; ++i) {
    uint16_t h;
    std::memcpy(&h, token + 528 + 2 * i, 2);
    out[512 + i] = bf16_to_f32(h);
  }
}

void dequant_model1(const uint8_t* data, const uint8_t* scales, void* row) {
  float* out = static_cast<float*>(row);
  for (int i = 0; i < 448; ++i) out[i] = dequant(data[i], ue8m0_to_f32(scales[i / 64]));
  for (int i = 0; i < 64; ++i) {
    uint16_t h;
    std::memcpy(&h, data + 448 + 2 * i, 2);
    out[448 + i] = bf16_to_f32(h);
  }
}

const MlaKernelSet kSet = {
    "scalar", MlaElem::kF32, kTileTokens,    1,       1,     q_packed_bytes, pack_q, scratch_bytes, attend_tile,
    nullptr,  dequant_v32,   dequant_model1, nullptr, false,
};

}  // namespace

const MlaKernelSet* mla_kernels_scalar() {
  return &kSet;
}

}  // namespace tessera::cpu
