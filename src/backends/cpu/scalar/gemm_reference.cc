// The scalar reference GEMM: the spec's formula written out, fp32 accumulation in k order within each
// scale group, one multiply by sa*sb per group. Deliberately simple; parallel over rows only so that a
// forced-reference run (TESSERA_FORCE_REFERENCE=1) of a real model finishes.
#include <algorithm>
#include <vector>

#include "gemm/gemm_problem.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {
namespace {

float load(const cpu::GemmSrc& s, int64_t r, int64_t k) {
  switch (s.type) {
    case cpu::GemmSrcType::kBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(s.data)[r * s.stride_r + k * s.stride_k]);
    case cpu::GemmSrcType::kF32:
      return static_cast<const float*>(s.data)[r * s.stride_r + k * s.stride_k];
    case cpu::GemmSrcType::kE4M3:
      return e4m3_to_f32(static_cast<const uint8_t*>(s.data)[r * s.stride_r + k * s.stride_k]);
    case cpu::GemmSrcType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(s.data)[r * s.stride_r + k * s.stride_k]);
    case cpu::GemmSrcType::kE5M2:
      return e5m2_to_f32(static_cast<const uint8_t*>(s.data)[r * s.stride_r + k * s.stride_k]);
    case cpu::GemmSrcType::kE2M1: {
      if (s.fp4_along_r) {
        const uint8_t byte = static_cast<const uint8_t*>(s.data)[(r / 2) * s.stride_r + k * s.stride_k];
        return e2m1_to_f32((r & 1) ? byte >> 4 : byte & 0xF);
      }
      const uint8_t byte = static_cast<const uint8_t*>(s.data)[r * s.stride_r + (k / 2) * s.stride_k];
      return e2m1_to_f32((k & 1) ? byte >> 4 : byte & 0xF);
    }
  }
  return 0.0f;
}

// Rows [r0, r0 + rows) of s widened to fp32, row i at out + i * k.
void widen_rows(const cpu::GemmSrc& s, int64_t r0, int64_t rows, int64_t k, float* out) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t kk = 0; kk < k; ++kk) out[i * k + kk] = load(s, r0 + i, kk);
}

// Rows of A per step and B rows per block: each element is widened once per block instead of once per
// product (the scalar level runs every GEMM here; per-product conversions made it ~10x slower).
constexpr int64_t kRowsA = 8, kRowsB = 32;

}  // namespace

void run_gemm_reference(const GemmProblem& p) {
  const int64_t groups = scale_groups(p);
  const int64_t group = p.group > 0 ? p.group : p.k;
  parallel_for(p.m, [&](int64_t m0, int64_t m1) {
    std::vector<float> a(size_t(kRowsA * p.k)), b(size_t(kRowsB * p.k)), tile(size_t(kRowsA * p.n));
    for (int64_t mb = m0; mb < m1; mb += kRowsA) {
      const int64_t rows = std::min(kRowsA, m1 - mb);
      widen_rows(p.a, mb, rows, p.k, a.data());
      for (int64_t nb = 0; nb < p.n; nb += kRowsB) {
        const int64_t cols = std::min(kRowsB, p.n - nb);
        widen_rows(p.b, nb, cols, p.k, b.data());
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) {
            const float* x = a.data() + i * p.k;
            const float* y = b.data() + j * p.k;
            float acc = 0.0f;
            for (int64_t g = 0; g < groups; ++g) {
              float part = 0.0f;
              const int64_t k_end = std::min(p.k, (g + 1) * group);
              for (int64_t k = g * group; k < k_end; ++k) part += x[k] * y[k];
              if (p.group > 0) {
                acc += part * (p.sa.at(g, mb + i) * p.sb.at(g, nb + j));
              } else {
                acc += part;
              }
            }
            tile[size_t(i * p.n + nb + j)] = acc;
          }
      }
      finalize_tile(p, tile.data(), p.n, false, mb, rows, 0, p.n);
    }
  });
}

}  // namespace tessera::gemm
