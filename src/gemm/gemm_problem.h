// The canonical GEMM every public gemm function reduces to (after validation):
//   D[m, n] = C[m, n] + sum_g (sum_{k in group g} A[m, k] * B[n, k]) * sa[g][m] * sb[g][n]
// accumulated in fp32 and rounded once to D's dtype. A and B are seen as [M, K] and [N, K] through
// strides (either may be K- or MN-contiguous); scales are already expanded to one fp32 per row and
// K-group (see scales.h).
#pragma once

#include <cstdint>

#include "backends/cpu/gemm_kernel_set.h"
#include "tessera/core/dtype.h"

namespace tessera::gemm {

// Bytes per element of a source's rows as the drivers address them (fp8/fp4 rows: 1).
inline int src_bytes(const cpu::GemmSrc& s) {
  return s.type == cpu::GemmSrcType::kBF16 ? 2 : s.type == cpu::GemmSrcType::kF32 ? 4 : 1;
}

// Scales of one operand, for the common K-group g (`group` K-values wide) and operand row r:
//  - fp32 mode: value(g, r) = data[(g / g_div) * stride_g + r / r_div];
//  - packed UE8M0 mode (DeepGEMM's int32 scale tensors, read in place): the exponent byte
//    ue8m0[(r / r_div) * row_bytes + (kb / 4) * word_bytes + kb % 4] with kb = g / g_div.
// g_div = the operand's gran_k / group, r_div = its gran_mn (1 per row/channel, 128 per block).
struct ScaleTable {
  const float* data = nullptr;
  const uint8_t* ue8m0 = nullptr;
  int64_t stride_g = 0;
  int64_t row_bytes = 0, word_bytes = 0;
  int g_div = 1;
  int r_div = 1;
  float at(int64_t g, int64_t r) const {
    const int64_t kb = g / g_div, rr = r / r_div;
    if (ue8m0) return ue8m0_to_f32(ue8m0[rr * row_bytes + (kb / 4) * word_bytes + kb % 4]);
    return data[kb * stride_g + rr];
  }
  // The table seen from row `rows` on (rows must be a multiple of r_div).
  ScaleTable shifted(int64_t rows) const {
    ScaleTable t = *this;
    if (ue8m0) t.ue8m0 += (rows / r_div) * row_bytes;
    if (data) t.data += rows / r_div;
    return t;
  }
};

// out[(g - g0) * out_stride + (r - r0)] = value(g, r) for g in [g0, g0+ng), r in [r0, r0+nr);
// entries r in [nr, out_stride) are set to 0 so vector loads past the last row read finite values.
void expand_scales(const ScaleTable& t, int64_t g0, int64_t ng, int64_t r0, int64_t nr, float* out, int64_t out_stride);

// Whether every scale of rows [0, rows) and K groups [0, groups) is 2^e with lo <= e <= hi (no sign, no
// fraction): such scales can be folded into fp8 / fp4 operands exactly (packed.cc, gemv.cc).
bool scales_are_powers_of_two(const ScaleTable& t, int64_t rows, int64_t groups, int lo, int hi);

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  cpu::GemmSrc a{}, b{};
  // K values per scale group; 0 = unscaled (sa, sb unused).
  int group = 0;
  ScaleTable sa, sb;
  // Output and optional addend (c == d allowed: accumulate in place).
  void* d = nullptr;
  DType d_type = DType::kBF16;
  int64_t ldd = 0;
  const void* c = nullptr;
  DType c_type = DType::kBF16;
  int64_t ldc = 0;
  const char* fn = "gemm";  // public name, for messages and TESSERA_PRINT_PLAN
  // Write D with non-temporal stores (set by run_gemm_batch when the call's whole D is large).
  bool stream_d = false;
  // Every output is one fp32 FMA chain over k = 0 .. K-1 in order, started from zero (DeepGEMM's
  // order for its einsums: a single K chain per output). Unscaled problems only. The dispatcher then
  // takes a kernel set with GemmKernelSet::k_order_chain (or the reference) and the plan one K chunk.
  bool k_chain = false;
};

int64_t scale_groups(const GemmProblem& p);

// Runs the problem with the best implementation for this machine (TESSERA_ISA / TESSERA_FORCE_REFERENCE
// cap the choice; TESSERA_VERBOSE_DISPATCH=1 prints why faster ones were refused).
void run_gemm(const GemmProblem& p);
// Runs independent problems (e.g. the groups of an MoE GEMM) with as few parallel regions as possible.
void run_gemm_batch(const GemmProblem* problems, int64_t count);

// The scalar reference implementation (backends/cpu/scalar/gemm_reference.cc): fp32 arithmetic in k order,
// parallel over rows. The golden model the fast paths are tested against.
void run_gemm_reference(const GemmProblem& p);

// Writes D (rows [r0, r0+rows), cols [c0, c0+cols)) from an fp32 tile plus C:
// transposed == false: tile[i * ldt + j] is D[r0+i, c0+j]; true: tile[j * ldt + i] is D[r0+i, c0+j].
void finalize_tile(const GemmProblem& p, const float* tile, int64_t ldt, bool transposed, int64_t r0, int64_t rows,
                   int64_t c0, int64_t cols);

}  // namespace tessera::gemm
