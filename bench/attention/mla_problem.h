// One FlashMLA benchmark case: the inputs (sized and rotated so every call reads its KV bytes from DRAM),
// our call, and what the peer and the check need (each query group's K rows as bf16, its queries, the
// outputs). A group is one token list: (request, query token) for sparse decode, (request) for dense
// decode (one KV head), (query token) for sparse prefill; its rows are the h_q query heads (dense decode:
// s_q * h_q rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/memory.h"
#include "tessera/flash_mla.h"
#include "tessera/info.h"

namespace tessera::bench {

enum class MlaOp { kSparseV32, kSparseModel1, kDense, kPrefill };

struct MlaCase {
  MlaOp op;
  int b, s_q, h_q;
  int tokens;  // topk (sparse) or cache length (dense)
  bool quick;  // in the default subset
};

const char* mla_op_name(MlaOp op);

class MlaProblem {
 public:
  MlaProblem(const MlaCase& c, const MachineLimits& limits);

  // Our call on input copy i (copies rotate so calls do not hit in cache).
  void run_ours(int64_t i);
  // Worst error of `out` (bf16 [groups * rows][512] in group order) over the first checked groups,
  // against float64, in units of the spec's tolerance (<= 1 passes); `scale` widens the tolerance.
  double check(const uint16_t* out, double scale) const;
  // Our output: bf16 [groups * rows][512] in group order.
  const uint16_t* our_output() const { return out_.get(); }

  // ---- what the peer needs ----
  int64_t groups() const { return groups_; }
  int rows() const { return rows_; }
  int64_t tokens() const { return tokens_; }
  int d_qk() const { return d_qk_; }
  float scale() const { return scale_; }
  // Row r of group g's queries (d_qk bf16) and the causal limit of that row (tokens it may see).
  const uint16_t* q_row(int64_t g, int r) const;
  int64_t visible(int r) const;
  // Tokens [t0, t1) of group g's K rows of input copy i, dequantised the plain way (e4m3 -> fp32 * scale
  // -> bf16), into k [tokens][d_qk] and, unless v_t is null, v_t [512][tokens] (V transposed).
  void gather(int64_t g, int64_t i, uint16_t* k, uint16_t* v_t, int64_t t0, int64_t t1) const;

  double flops() const;       // 2 * rows * attended tokens * (d_qk + 512), summed over groups
  double bytes_read() const;  // KV bytes + Q + O
  int copies() const { return copies_; }

 private:
  void build_fp8_cache(uint64_t seed);
  void build_bf16_kv(uint64_t seed, int64_t rows);

  MlaCase c_;
  int64_t groups_ = 0;
  int rows_ = 0, d_qk_ = 0, copies_ = 1;
  int64_t tokens_ = 0;
  float scale_ = 0;
  AlignedPtr<uint16_t> q_, out_;
  AlignedPtr<float> lse_, max_logits_;
  AlignedPtr<uint8_t> cache_;  // FP8 cache bytes, or bf16 kv / paged cache
  int64_t cache_tokens_ = 0, block_stride_ = 0;
  std::vector<AlignedPtr<int32_t>> indices_;  // per copy: sparse indices or dense block tables
  AlignedPtr<int32_t> seqlens_;
  flash_mla::Schedule schedule_;
};

}  // namespace tessera::bench
