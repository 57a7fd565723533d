// The scalar reference GEMM: the spec's formula written out, fp32 accumulation in k order within each
// scale group, one multiply by sa*sb per group. Deliberately simple; parallel over rows only so that a
// forced-reference run (TESSERA_FORCE_REFERENCE=1) of a real model finishes.
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

}  // namespace

void run_gemm_reference(const GemmProblem& p) {
  const int64_t groups = scale_groups(p);
  const int64_t group = p.group > 0 ? p.group : p.k;
  parallel_for(p.m, [&](int64_t m0, int64_t m1) {
    std::vector<float> row(size_t(p.n));
    for (int64_t m = m0; m < m1; ++m) {
      for (int64_t n = 0; n < p.n; ++n) {
        float acc = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
          float part = 0.0f;
          const int64_t k_end = std::min(p.k, (g + 1) * group);
          for (int64_t k = g * group; k < k_end; ++k) part += load(p.a, m, k) * load(p.b, n, k);
          if (p.group > 0) {
            acc += part * (p.sa.at(g, m) * p.sb.at(g, n));
          } else {
            acc += part;
          }
        }
        row[size_t(n)] = acc;
      }
      finalize_tile(p, row.data(), 0, false, m, 1, 0, p.n);
    }
  });
}

}  // namespace tessera::gemm
