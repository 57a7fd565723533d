// tessera/gemm_grouped.h - DeepGEMM's MoE GEMMs and the rest of its GEMM API on the CPU
// (DeepGEMM's API, docs/gemm.md). Conventions as in gemm.h: outputs written in place, fp32
// accumulation with one rounding, bitwise identical for any thread count, every argument validated
// (tessera::Error naming the argument and the rule) before any output is touched.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/gemm.h"

namespace tessera::gemm {

// ---- M-grouped, contiguous layout (A [M_sum, K], B [G, N, K] ('nt') or [G, K, N] ('nn'), D [M_sum, N] bf16) ----
// grouped_layout (int32):
//  - use_psum_layout == false: [M_sum], the group of each row, or -1 for a padding row (D row = 0).
//    Every group's segment starts at a multiple of mk_alignment.
//  - use_psum_layout == true: [G], exclusive end row of each group; group i starts at
//    align(end[i-1], mk_alignment). Gap rows (and rows after the last end) are zero in D when
//    ensure_zero_padding, else untouched.
struct ContiguousLayout {
  TensorView grouped_layout;
  bool use_psum_layout = false;
  bool ensure_zero_padding = true;
  int mk_alignment = 128;
};

void m_grouped_bf16_gemm_nt_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const ContiguousLayout& layout);
void m_grouped_bf16_gemm_nn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const ContiguousLayout& layout);
// SFA [M_sum, sf_k] (per token) or packed; SFB [G, ceil(N/gn), sf_k] fp32 or [G, N, ceil(sf_k/4)] int32
// ('nn': the last two dimensions of B and SFB transposed).
void m_grouped_fp8_fp4_gemm_nt_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                          const ContiguousLayout& layout, const Recipe& recipe = {});
void m_grouped_fp8_fp4_gemm_nn_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                          const ContiguousLayout& layout, const Recipe& recipe = {});

// ---- M-grouped, masked layout (A [G, max_m, K], B [G, N, K], D [G, max_m, N] bf16, masked_m int32 [G]) ----
// D[g, :masked_m[g]] = A[g, :masked_m[g]] . B[g]^T. Rows at or beyond masked_m[g] are left untouched
// (DeepGEMM leaves them unspecified; writing them would cost more than the GEMM when masked_m << max_m).
// expected_m is a hint (> 0) and does not change results.
void m_grouped_bf16_gemm_nt_masked(const TensorView& a, const TensorView& b, const TensorView& d,
                                   const TensorView& masked_m, int64_t expected_m);
void m_grouped_fp8_fp4_gemm_nt_masked(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                      const TensorView& masked_m, int64_t expected_m, const Recipe& recipe = {});

// ---- K-grouped (MoE weight gradient): D[g] = C[g] + A[K_g]^T . B[K_g], D/C [G, M, N] fp32 ----
// 'tn': A [sum K, M], B [sum K, N] (MN-major). Group sizes: use_psum_layout == false -> grouped_layout
// int32 [G] of K sizes (ks_cpu, if given, must match); true -> exclusive ends, group g starts at
// align(end[g-1], k_alignment) (ks_cpu, if given, holds each group's K or that K aligned up). Empty groups: D[g] =
// C[g]. FP8 scale factors per channel (recipe (1, 1, gran_k)): fp32 [sum_g ceil(k_g/gran_k), M] or packed int32 [sum_g
// ceil(k_g/(4 gran_k)), M].
struct KGroupedLayout {
  TensorView grouped_layout;
  std::vector<int64_t> ks;  // DeepGEMM's ks_cpu (optional host copy of the sizes); empty = none
  bool use_psum_layout = false;
  int k_alignment = 128;
};
void k_grouped_bf16_gemm_tn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const TensorView* c, const KGroupedLayout& layout);
void k_grouped_fp8_gemm_tn_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                      const TensorView* c, const KGroupedLayout& layout, int gran_k = 128);
// SM90 form: per group a K-major [M, k_g] (and [N, k_g]) block, blocks stored one after another in a
// flat a/b; SFA [M, sum_g ceil(k_g/128)] and SFB [N, ...] fp32 (any strides).
void k_grouped_fp8_gemm_nt_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                      const TensorView* c, const std::vector<int64_t>& ks);

// ---- other DeepGEMM GEMMs ----
// FP8 nt GEMM whose output skips M columns in the middle of every (L + R)-wide head:
// logical column n goes to d column n + floor((n + R) / (L + R)) * M; gap columns are untouched.
void fp8_gemm_nt_skip_head_mid(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                               std::array<int64_t, 3> head_splits, const Recipe& recipe = {});
// How the per-head einsums ('bhr,hdr->bhd', 'bhd,hdr->bhr') sum. kOneChain: DeepGEMM's order, each
// output one fp32 chain over K in order (the same bits on every ISA level and thread count).
// kFastest: the GEMM dispatcher's kernels (decode GEMVs, bf16 pair products, K blocks), deterministic
// per level like every GEMM; the model's MLA projections use it.
enum class EinsumOrder { kOneChain, kFastest };

// bf16 einsum: 'bmk,bnk->mn' (fp32 d requires c == d, bf16 d requires no c; fp32 sums batch by batch),
// 'bhr,hdr->bhd', 'bhd,hdr->bhr' (summed as `order` says).
void einsum(const std::string& expr, const TensorView& a, const TensorView& b, const TensorView& d,
            const TensorView* c = nullptr, EinsumOrder order = EinsumOrder::kOneChain);
// FP8 einsum 'bhr,hdr->bhd': a = (x [b,h,r], sf [b,h,ceil(r/128)]), b = (y [h,d,r], sf [h,ceil(d/128),ceil(r/128)]),
// d = c + x.y when c is given (c may be d). The other expressions raise a not-implemented error.
void fp8_einsum(const std::string& expr, const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                const TensorView* c = nullptr, const Recipe& recipe = {});
// d = a . b^T (a [M,K] bf16, b [N,K] fp32, d fp32 [M,N] or [S,M,N]) and sqr_sum[m] = sum_k a[m,k]^2
// ([M] or [S,M]); with S splits K is cut in 64-blocks and split s gets nb/S blocks (+1 for s < nb % S);
// the caller sums the splits. K % 64 == 0, N % 8 == 0, N <= 128. Computed in fp32 (at least TF32 precision).
void tf32_hc_prenorm_gemm(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView& sqr_sum,
                          int num_splits = 0);

}  // namespace tessera::gemm
