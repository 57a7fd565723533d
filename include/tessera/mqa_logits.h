// tessera/mqa_logits.h - DeepGEMM's MQA logits: the lightning indexer of DeepSeek sparse
// attention (DeepGEMM's API, docs/gemm.md), on the CPU.
//
//   logit[i, j] = sum_h w[i, h] * relu(score(q[i, h, :], k[j, :]))
//
// Operand formats (DeepGEMM's "personalities"):
//  - FP8: q float8_e4m3fn, no scale (fold it into the weights); kv float8_e4m3fn with one float32
//    scale per token: score = (q . k) * kv_sf[j].
//  - MX (q_sf given): q and kv are float8_e4m3fn or packed FP4 (int8/uint8: two e2m1 per byte, element
//    2i in the low nibble), each with int32 scales holding four UE8M0 exponents per int32 (byte b scales
//    elements [32b, 32b+32) of D, little-endian): score = sum_d (q[d] qs[d/32]) (k[d] ks[d/32]).
// Shapes: H (heads) in [1, 128], D (head_dim) in {32, 64, 128} (32 only for FP8); weights float32, or
// bfloat16 when the logits are bfloat16 (DeepGEMM's rule). Logits float32 or bfloat16, row-major with
// any row stride.
//
// Numerics: q and k are converted to bf16 exactly (e4m3, e2m1 and their power-of-two scales are
// representable), products accumulate in fp32 along D in a fixed order, the per-token fp32 scale is
// applied to the dot product, then relu, weight, and a sum over heads in a fixed order; one rounding
// at the end for bf16 logits. The result of each element is independent of the thread count and of
// the run: repeated calls are bitwise identical. On the fast path (AVX512_BF16) dot products use
// vdpbf16ps (bf16 denormal inputs read as zero, which e4m3/e2m1 values never are); the scalar path
// (TESSERA_ISA=scalar) is the reference.
//
// Errors: every rule violation throws Error(kInvalidArgument) naming the argument before any output
// is written; `indices` (varlen paged logits) throws Error(kNotImplemented).
#pragma once

#include <cstdint>

#include "tessera/core/tensor.h"

namespace tessera::attention {

// ---- prefill / chunk: fp8_fp4_mqa_logits ----
// q [S, H, D] (FP4: [S, H, D/2] bytes), any strides; q_sf nullptr (FP8) or int32 [S, H].
// kv [S_kv, D] (FP4: [S_kv, D/2]) with kv.stride(1) == 1; kv_sf float32 [S_kv] (FP8) or int32 [S_kv] (MX).
// weights [S, H] with stride(1) == 1. ks, ke int32 [S] (cu_seq_len_k_start / _end).
// logits: [S, S_kv] (max_seqlen_k == 0) or [S, max_seqlen_k] (compressed), stride(1) == 1.
//  - max_seqlen_k == 0: logits[i, j] for j in [max(ks, 0), min(ke, S_kv)); clean_logits writes exact -inf
//    everywhere else in the row; without it the other entries are not written (DeepGEMM: unspecified).
//  - max_seqlen_k > 0 (compressed, clean_logits must be false): logits[i, t] = logit[i, ks[i] + t] for
//    t < ke[i] - ks[i]; requires 0 <= ks[i] <= ke[i] <= S_kv and ke[i] - ks[i] <= max_seqlen_k;
//    entries t >= ke[i] - ks[i] are not written.
void fp8_fp4_mqa_logits(const TensorView& q, const TensorView* q_sf, const TensorView& kv, const TensorView& kv_sf,
                        const TensorView& weights, const TensorView& ks, const TensorView& ke, const TensorView& logits,
                        bool clean_logits, int64_t max_seqlen_k);

// ---- decode over a paged FP8 cache: fp8_fp4_paged_mqa_logits ----
// The schedule DeepGEMM's metadata helper returns, int32 [num_sms + 1, 2]: entry t = (batch b, page p)
// where worker t starts, when the pages every request must read (ceil(max_j len[b, j] / block_kv)
// pages for request b) are split into num_sms equal contiguous shares; the last entry is (B, 0).
// context_lens: int32 [B] or [B, next_n] (see below). out: int32 [num_sms + 1, 2], stride(1) == 1.
void get_paged_mqa_logits_metadata(const TensorView& context_lens, int block_kv, int num_sms, const TensorView& out);

// q [B, next_n, H, D] (FP4: [..., D/2] bytes), any strides; q_sf nullptr or int32 [B, next_n, H].
// kv_cache uint8 (or int8) [num_blocks, block_kv, 1, D + 4] (FP4: D/2 + 4), with stride(1) == D + 4
// and stride(3) == 1 (any page stride): page n holds block_kv * D value bytes (token-major), then
// block_kv float32 scales (MX: int32 UE8M0 words). weights [B * next_n, H], stride(1) == 1.
// context_lens int32: [B, next_n] = the number of tokens query (b, j) sees; [B] (DeepGEMM's older
// form) = len[b] - next_n + j + 1 for query j (the causal last next_n positions), floored at 0.
// block_table int32 [B, max_blocks] with stride(1) == 1: page of token p of request b is
// block_table[b, p / block_kv], slot p % block_kv; only pages below ceil(len / block_kv) are read and
// their entries must lie in [0, num_blocks). schedule_meta: int32 [n + 1, 2] from
// get_paged_mqa_logits_metadata for these lengths and this block_kv (every entry is checked against it;
// the CPU schedules by itself). max_context_len <= max_blocks * block_kv. logits [B * next_n,
// max_context_len] (stride(1) == 1): row b * next_n + j holds positions p < len(b, j) <= max_context_len;
// clean_logits writes exact -inf at positions >= len, otherwise they are not written.
void fp8_fp4_paged_mqa_logits(const TensorView& q, const TensorView* q_sf, const TensorView& kv_cache,
                              const TensorView& weights, const TensorView& context_lens, const TensorView& block_table,
                              const TensorView& schedule_meta, const TensorView& logits, int64_t max_context_len,
                              bool clean_logits, const TensorView* indices = nullptr);

}  // namespace tessera::attention
