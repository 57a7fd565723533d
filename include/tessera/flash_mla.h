// tessera/flash_mla.h - FlashMLA's attention on the CPU: MLA decode over a paged KV cache (dense bf16/fp16,
// or sparse over an FP8 cache), sparse MLA prefill, dense MHA prefill (forward and backward), and the FP8 KV-cache
// quantiser (FlashMLA's API, docs/attention.md).
//
// Conventions shared by every function:
//  - MQA/GQA over one latent vector per KV head: V is the first d_v elements of each K row (dense prefill:
//    separate k and v).
//  - Scores are softmax_scale * q.k^T with bf16 (or fp16) inputs and fp32 accumulation; FP8 tokens are
//    dequantised e4m3 -> fp32 * scale -> bf16 first. Softmax statistics are natural-log.
//  - A query row that sees no token gets out = 0 and lse = +inf (max_logits = -inf).
//  - Results are bitwise identical for every thread count: long token lists are split into parts whose
//    boundaries depend only on the problem (never on threads), and the parts are combined in a fixed
//    order with lse = logsumexp(lse_s), out = sum exp(lse_s - lse) * out_s.
//  - Outputs are written by the caller's views (any strides, last dimension contiguous). Invalid
//    arguments throw tessera::Error naming the argument and the rule, before any output is touched.
//  - KV slots and block_table entries that are not referenced are never read.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::flash_mla {

// ---- work partition (get_mla_metadata) ----

// The split plan of one call: for request i, num_splits[i+1] - num_splits[i] parts of its token list;
// tile_scheduler_metadata [parts, 8] assigns consecutive (request, split) items to parts (threads):
// row p = {req_begin, split_begin, req_end, split_end, item_begin, item_end, total_items, 0}, where the
// (req, split) range [begin, end) is exclusive at the end and items count (request, split) pairs.
struct Schedule {
  int64_t parts = 0;
  std::vector<int32_t> tile_scheduler_metadata;  // parts * 8
  std::vector<int32_t> num_splits;               // batch + 1, prefix sums
};

// The old call form: cache_seqlens [b] int32 (values read), num_q_tokens_per_head_k = s_q*h_q/h_k.
// Sparse decode (topk given) splits every request's topk-long list instead of its cache length;
// is_fp8_kvcache is accepted for compatibility (the split rule is the same for every cache format).
Schedule get_mla_metadata(const TensorView& cache_seqlens, int64_t num_q_tokens_per_head_k, int64_t num_heads_k,
                          std::optional<int64_t> num_heads_q = std::nullopt, bool is_fp8_kvcache = false,
                          std::optional<int64_t> topk = std::nullopt);

// FlashMLASchedMeta: the first flash_mla_with_kvcache call records its configuration and plan; later
// calls with the same object must have the same configuration (an error names the first field that
// differs) and reuse the plan.
struct SchedConfig {
  int64_t b = 0, s_q = 0, h_q = 0, page_block_size = 0, h_k = 0;
  bool causal = false, is_fp8_kvcache = false;
  std::optional<int64_t> topk, extra_page_block_size, extra_topk;
};
struct SchedMeta {
  bool have_initialized = false;
  SchedConfig config;
  Schedule schedule;
};

// ---- decode ----

// Inputs of flash_mla_with_kvcache, with FlashMLA's argument names. Optional tensors are nullptr when
// absent (None).
//  Dense (indices == nullptr): q [b, s_q, h_q, d] bf16|fp16; k_cache [blocks, page_block_size, h_k, d] same
//    dtype; block_table [b, max_blocks] int32; cache_seqlens [b] int32; token t of request i is
//    k_cache[block_table[i, t / page_block_size], t % page_block_size]. causal: query j of s_q sees keys
//    0..L-s_q+j (bottom-right). h_q % h_k == 0; query head h uses KV head h / (h_q / h_k).
//  Sparse (indices given): is_fp8_kvcache, h_k == 1, q [b, s_q, h_q, 576|512] bf16, k_cache
//    [blocks, block_size, 1, 656|584] (float8_e4m3fn|int8|uint8 bytes; V32 | MODEL1 layout, FlashMLA's API,
// docs/attention.md);
//    indices [b, s_q, topk] int32 flat slots (block * block_size + offset); a slot < 0 or >= blocks *
//    block_size is invalid and skipped. topk_length [b]: only the first topk_length[i] entries count.
//    extra_k_cache / extra_indices_in_kvcache [b, s_q, extra_topk] / extra_topk_length: a second cache in
//    the same format whose tokens join the same softmax. attn_sink [h_q] fp32: out *= 1/(1+exp(sink-lse)).
// Outputs: out [b, s_q, h_q, head_dim_v] (q's dtype), lse [b, h_q, s_q] float32.
struct KvcacheInputs {
  TensorView q;
  TensorView k_cache;
  const TensorView* block_table = nullptr;
  const TensorView* cache_seqlens = nullptr;
  int64_t head_dim_v = 512;
  std::optional<double> softmax_scale;  // default d^-0.5
  bool causal = false;
  bool is_fp8_kvcache = false;
  const TensorView* indices = nullptr;
  const TensorView* attn_sink = nullptr;
  const TensorView* extra_k_cache = nullptr;
  const TensorView* extra_indices_in_kvcache = nullptr;
  const TensorView* topk_length = nullptr;
  const TensorView* extra_topk_length = nullptr;
};

// Current form: `meta` from get_mla_metadata() (a default SchedMeta).
void flash_mla_with_kvcache(const KvcacheInputs& in, SchedMeta& meta, const TensorView& out, const TensorView& lse);
// Old form: a Schedule from get_mla_metadata(cache_seqlens, ...) for this batch (its num_splits must be
// the plan this call would make: an error says to recompute it otherwise).
void flash_mla_with_kvcache(const KvcacheInputs& in, const Schedule& schedule, const TensorView& out,
                            const TensorView& lse);

// ---- sparse prefill ----

// q [s_q, h_q, d_qk] bf16, kv [s_kv, h_kv, d_qk] bf16, indices [s_q, h_kv, topk] int32 (an index < 0 or
// >= s_kv is invalid and skipped), h_q % h_kv == 0, d_v <= d_qk. attn_sink [h_q] fp32, topk_length [s_q]
// int32 (optional). Outputs: out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q] fp32 (max of the scaled
// scores), lse [s_q, h_q] fp32; sink does not change max_logits and lse.
struct SparsePrefillInputs {
  TensorView q;
  TensorView kv;
  TensorView indices;
  double sm_scale = 0;
  int64_t d_v = 512;
  const TensorView* attn_sink = nullptr;
  const TensorView* topk_length = nullptr;
};
void flash_mla_sparse_fwd(const SparsePrefillInputs& in, const TensorView& out, const TensorView& max_logits,
                          const TensorView& lse);

// ---- dense MHA prefill (flash_attn_varlen_func) ----

// q [total_q, h_q, d_qk], k [total_kv, h_kv, d_qk], v [total_kv, h_kv, d_v]: bf16 or fp16 (one dtype), any
// strides. cu_seqlens_qo / cu_seqlens_kv int32 [b + 1]: prefix sums from 0 to total_q / total_kv; request i
// has queries [cu_qo[i], cu_qo[i+1]) and keys [cu_kv[i], cu_kv[i+1]), each count <= max_seqlen_qo /
// max_seqlen_kv. h_q % h_kv == 0 (query head h uses KV head h / (h_q / h_kv)). causal: query j of a request
// with n_q queries and n_kv keys sees keys 0..n_kv-n_q+j (bottom-right). Outputs: out [total_q, h_q, d_v]
// (q's dtype, last dim contiguous), lse [total_q, h_q] fp32.
struct VarlenInputs {
  TensorView q, k, v;
  TensorView cu_seqlens_qo, cu_seqlens_kv;
  int64_t max_seqlen_qo = 0, max_seqlen_kv = 0;
  std::optional<double> softmax_scale;  // default d_qk^-0.5
  bool causal = false;
};
void flash_attn_varlen_fwd(const VarlenInputs& in, const TensorView& out, const TensorView& lse);

// The backward of flash_attn_varlen_fwd for the same `in`: out and lse as the forward returned them (any
// strides), dout [total_q, h_q, d_v] (q's dtype, any strides) the gradient of out, dlse [total_q, h_q] fp32
// (optional) the gradient of lse. Writes dq [total_q, h_q, d_qk], dk [total_kv, h_kv, d_qk], dv
// [total_kv, h_kv, d_v] (q's dtype or fp32, last dim contiguous; GQA sums over a KV head's query heads).
// P = exp(scale * q.k - lse) is recomputed in fp32; all sums are fp32; with bf16 inputs at the amx and
// avx512bf16 levels P and dS are rounded to bf16 as product operands (as on GPUs). Keys no query sees get
// dk = dv = 0.
void flash_attn_varlen_bwd(const VarlenInputs& in, const TensorView& out, const TensorView& lse, const TensorView& dout,
                           const TensorView& dq, const TensorView& dk, const TensorView& dv,
                           const TensorView* dlse = nullptr);

// ---- FP8 KV cache ----

enum class KvCacheLayout {
  kV32,     // 656 bytes/token: 512 e4m3 (4 tiles of 128), 4 fp32 scales, 64 bf16 RoPE; d = 576
  kModel1,  // 584 bytes/token, per block: B*576 bytes (448 e4m3 in 7 tiles of 64, 64 bf16 RoPE) then B*8
            // bytes of scales (7 UE8M0 + 1 pad); d = 512
};
int64_t kv_cache_head_dim(KvCacheLayout layout);         // 576 | 512
int64_t kv_cache_bytes_per_token(KvCacheLayout layout);  // 656 | 584

// Quantises k [blocks, block_size, 1, d] bf16 into `out` [blocks, block_size, 1, bytes_per_token] bytes
// (float8_e4m3fn|int8|uint8; stride(0) >= block_size * bytes_per_token may include padding, which is
// left untouched). Per tile: s = max(amax / 448, 1e-4) rounded up to a power of two, value = e4m3(x / s).
void quantize_k_cache(const TensorView& k, KvCacheLayout layout, const TensorView& out);
// The inverse: e4m3 -> fp32 * s -> bf16, RoPE copied; out [blocks, block_size, 1, d] bf16.
void dequantize_k_cache(const TensorView& quant, KvCacheLayout layout, const TensorView& out);

}  // namespace tessera::flash_mla
