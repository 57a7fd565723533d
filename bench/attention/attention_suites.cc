// The one registration point of bench/attention: every attention suite's runner and summary, in the
// order `tessera bench attention` runs them, and the help text. A new suite adds one line to kSuites and
// a section to kAttentionHelp (a literal, so bench/components.cc may use it during static initialisation).

#include "attention/attention_bench.h"
#include "attention/fmha_bwd_bench.h"
#include "attention/mla_bench.h"
#include "attention/mqa_bench.h"

namespace tessera::bench {
namespace {

struct Suite {
  std::vector<Row> (*run)(const Options&, const MachineLimits&);
  void (*summarize)(std::FILE*, const std::vector<Row>&);
};

const Suite kSuites[] = {
    {run_mla_bench, print_mla_summary},
    {run_mqa_bench, print_mqa_summary},
    {run_fmha_bwd_bench, print_fmha_bwd_summary},
};

}  // namespace

const char* const kAttentionHelp = R"(usage: tessera bench attention [--json] [--full] [--threads N]

FlashMLA (tessera::flash_mla):
  mla_sparse_v32     sparse decode over the FP8 V32 cache (656 B/token), topk 2048
  mla_sparse_model1  sparse decode over the FP8 MODEL1 cache (584 B/token), topk 2048
  mla_dense          dense decode over a paged bf16 cache (d 576, one KV head, causal when s_q > 1)
  mla_prefill        sparse prefill (flash_mla_sparse_fwd) over a bf16 kv, topk 2048
Columns: M = query tokens (b * s_q; prefill: s_q), N = h_q, K = tokens per query (topk or cache length).
Method: the KV cache (on 2 MiB transparent huge pages, as a serving system's) and the index or
block-table copies that successive calls rotate through exceed 4x L3, so KV bytes come from DRAM.
Every result (ours and the peer's) is checked first against float64 on two query groups (spec
tolerances; the peer, whose logits are bf16, gets 4x). Then a warm-up and timed calls (at least 5,
about 0.3 s); medians reported.
  GFLOP/s = 2 * rows * attended tokens * (d_qk + 512) / time
  GB/s    = (KV bytes of the attended tokens + Q + O) / time
  %limit  = GFLOP/s / bf16_peak_gflops when the case's flop/byte exceeds the machine balance
            (bf16_peak_gflops / dram_read_gbps at the start; every MLA decode shape with h_q >= 16
            does), else GB/s / dram_read_gbps; the limit is measured right after the row
  peer    = dequantise the attended tokens (plain loops), oneDNN bf16 S = Q.K^T, fp32 softmax, oneDNN
            O = P.V, per query group; xpeer = peer time / our time
  ceiling = (compute-bound rows) tessera's own bf16 GEMM (nt, its fastest layout) on one query group's
            S = Q.K^T and O = P.V, timed after the row: the products alone, without the dequantisation,
            softmax and gathers the row also does; the summary prints each op's share of it, and
            oneDNN's rate on the same products (the ceiling the peer library sets)

MQA logits (tessera::attention, DeepGEMM's lightning indexer; H = 64, D = 128, FP8 q and kv):
  mqa_prefill  fp8_fp4_mqa_logits, causal ranges (query i sees keys [0, S_kv - S + i + 1)), clean logits
  mqa_paged    fp8_fp4_paged_mqa_logits over a shuffled paged cache (block_kv 64), every query sees the
               whole context
Columns: M = query tokens, N = keys (S_kv or context length), K = heads.
Method: results checked first against float64 on sampled logits; then a warm-up and timed calls.
  GFLOP/s = 2 * H * D * (query, key) pairs in range / time;  %limit = GFLOP/s / bf16_peak_gflops
            measured right after the row
  GB/s    = (q + kv + scales + weights + logits bytes) / time
  peer    = dequantise q and kv to bf16, oneDNN bf16 GEMM per block of 32 queries (all H heads against
            all keys, scores materialised), relu / weights / head sum in plain loops (prefill only)

FMHA backward (flash_attn_varlen_bwd, FlashMLA's dense MHA prefill backward; one request of 1024 tokens,
8 heads, d_qk 192, d_v 128; quick runs on slower levels take fewer tokens):
  fmha_bwd         not causal
  fmha_bwd_causal  causal
Columns: M = query tokens, N = heads, K = keys.
Method: dq on sampled query rows and dk, dv on sampled keys checked first against float64 (error within
2% of each sample's largest value); then a warm-up and timed calls.
  GFLOP/s = 2.5 x the forward's flops / time (FlashAttention-2's convention: the five products of the
            backward against the forward's two), forward = 2 * attended (query, key) pairs * h * (192 + 128)
  %limit  = GFLOP/s / bf16_peak_gflops (the level's matrix or vector bf16 peak) measured right after the row
  peer    = a naive backward per head: oneDNN S = Q.K^T and dP = dO.V^T (bf16 out), P and dS in fp32 loops
            (materialised, transposed copies too), oneDNN dV = P^T.dO, dK = dS^T.Q, dQ = dS.K
  ceiling = tessera's own bf16 GEMM (nt, its fastest layout) on the five products of one head, timed
            after the row and counted like it (2.5x the forward's flops over the five GEMMs' time): a
            backward made of these products runs at best at this rate; the summary prints each row's share,
            and oneDNN's rate on the same five products (the ceiling the peer library sets)
)";

std::vector<Row> run_attention_bench(const Options& options, const MachineLimits& limits) {
  std::vector<Row> rows;
  for (const Suite& s : kSuites) {
    std::vector<Row> part = s.run(options, limits);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

void print_attention_summary(std::FILE* out, const std::vector<Row>& rows) {
  for (const Suite& s : kSuites) s.summarize(out, rows);
}

}  // namespace tessera::bench
