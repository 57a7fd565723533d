#include "moe/moe_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <numeric>
#include <random>
#include <string>

#include "gemm/grouped_operands.h"
#include "limit_pct.h"
#include "moe/moe_unfused.h"
#include "tessera/core/dtype.h"
#include "tessera/mega_moe.h"
#include "timing.h"

namespace tessera::bench {

const char* const kMoeHelp = R"(usage: tessera bench moe [--json] [--full] [--threads N]

DeepGEMM's Mega MoE on one rank (tessera::mega_moe::fp8_fp4_mega_moe: FP8 activations with per-32 UE8M0
scales, FP4 weights, SwiGLU with the top-k weight, FP8 re-quantisation, weighted combine):
  fp8_fp4_mega_moe  M = tokens, N = hidden, K = intermediate; experts and top-k in the progress line
  quick: prefill-like 256 tokens (hidden 2048, intermediate 512, 16 experts, top-4) and decode 8 tokens
  --full adds 512 tokens of hidden 4096, intermediate 1024, 32 experts, top-8
Routing: top-k of random scores, so experts get uneven loads. Decode rows rotate between copies of the
weights that together exceed 4x L3 (as the GEMM bench's decode rows), so their bytes come from DRAM.

Method: the fused call and the peer are checked against each other first (worst |difference| over
2% of max |y| is check_error; both round the same steps, so it is normally 0 or one bf16 step); then a
warm-up and timed calls (at least 5, about 0.3 s), medians reported.
  GFLOP/s = 2 * (routed slots) * 3 * hidden * intermediate / time
  %limit  = prefill: GFLOP/s / bf16 peak measured right after the row (FP4 weights widened to bf16);
            decode: GB/s / DRAM read GB/s measured right after the row, where GB/s = the bytes of the
            weights of the experts that got tokens (FP4 codes and UE8M0 scales of both layers) / time
  peer    = the unfused sequence of tessera's own parts on the same inputs: gather each expert's rows
            into a psum layout, m_grouped_fp8_fp4_gemm_nt_contiguous, SwiGLU + FP8 re-quantisation
            in a plain parallel loop, the second grouped GEMM, the per-token sum (the vector
            reduction the fused layer's combine uses);
            xpeer = unfused time / fused time (> 1: fusing wins)
Targets (the summary): fused >= 1.3x unfused at prefill and >= 1.2x at decode; decode weight bytes at
>= 70% of DRAM read.
)";

namespace {

struct MoeCase {
  int64_t tokens, hidden, inter, experts, topk;
  bool decode;  // a few tokens per expert: DRAM-bound on the weights
  bool full_only;
};

const MoeCase kCases[] = {
    {256, 2048, 512, 16, 4, false, false},
    {8, 2048, 512, 16, 4, true, false},
    {512, 4096, 1024, 32, 8, false, true},
};

// Weight copies that together exceed 4x L3 (one when a single copy already does).
constexpr int64_t kRotationOverL3 = 4;
constexpr int kMaxCopies = 128;
int weight_copies(int64_t bytes, int64_t l3_bytes) {
  if (bytes > kRotationOverL3 * l3_bytes) return 1;
  return int(std::min<int64_t>(kRotationOverL3 * l3_bytes / bytes + 1, kMaxCopies));
}

// Bytes of the weights the call reads: both layers' FP4 codes and scales of every expert with a token.
double weight_bytes_read(const MoeCase& c, const std::vector<int64_t>& idx, const MxOperand& l1, const MxOperand& l2) {
  std::vector<bool> hit(size_t(c.experts), false);
  for (int64_t e : idx) hit[size_t(e)] = true;
  const double per_expert =
      double(l1.data_bytes() + l1.scale_bytes() + l2.data_bytes() + l2.scale_bytes()) / double(c.experts);
  return per_expert * double(std::count(hit.begin(), hit.end(), true));
}

// Top-k of random normal scores per token (distinct experts), weights in [0.25, 1.25).
void random_routing(const MoeCase& c, uint64_t seed, std::vector<int64_t>* idx, std::vector<float>* w) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform(0.25f, 1.25f);
  std::vector<float> score(size_t(c.experts));
  std::vector<int64_t> order(size_t(c.experts));
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (auto& s : score) s = normal(rng);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + c.topk, order.end(),
                      [&](int64_t a, int64_t b) { return score[size_t(a)] > score[size_t(b)]; });
    for (int64_t k = 0; k < c.topk; ++k) {
      idx->push_back(order[size_t(k)]);
      w->push_back(uniform(rng));
    }
  }
}

void run_case(const MoeCase& c, const MachineLimits& limits, Row* row) {
  const MxOperand x = random_mx_operand(c.tokens, c.hidden, false, 32, 11);
  const MxOperand l1 = random_mx_operand(c.experts * 2 * c.inter, c.hidden, true, 32, 12);
  const MxOperand l2 = random_mx_operand(c.experts * c.hidden, c.inter, true, 32, 13);
  std::vector<int64_t> idx;
  std::vector<float> w;
  random_routing(c, 14, &idx, &w);

  mega_moe::BufferShape shape;
  shape.num_experts = int(c.experts);
  shape.num_max_tokens_per_rank = int(c.tokens);
  shape.num_topk = int(c.topk);
  shape.hidden = int(c.hidden);
  shape.intermediate_hidden = int(c.inter);
  auto buffer = mega_moe::SymmBuffer::create(nullptr, shape);
  const mega_moe::BufferLayout& bl = buffer->layout();
  std::memcpy(buffer->data() + bl.x, x.data.get(), size_t(x.data_bytes()));
  std::memcpy(buffer->data() + bl.x_sf, x.scale.get(), size_t(x.scale_bytes()));
  std::memcpy(buffer->data() + bl.topk_idx, idx.data(), idx.size() * 8);
  std::memcpy(buffer->data() + bl.topk_weights, w.data(), w.size() * 4);
  // Copy 0 is l1 / l2; decode rows add identical copies to rotate through (call i reads copy i % n).
  std::vector<MxOperand> l1_copies, l2_copies;
  const int copies = c.decode ? weight_copies(l1.data_bytes() + l2.data_bytes(), limits.l3_bytes) : 1;
  for (int i = 1; i < copies; ++i) {
    l1_copies.push_back(clone_mx_operand(l1));
    l2_copies.push_back(clone_mx_operand(l2));
  }
  std::vector<gemm::ScaledTensor> w1, w2;
  for (int i = 0; i < copies; ++i) {
    const MxOperand& a = i == 0 ? l1 : l1_copies[size_t(i - 1)];
    const MxOperand& b = i == 0 ? l2 : l2_copies[size_t(i - 1)];
    w1.push_back({a.data_view(c.experts, 2 * c.inter), a.scale_view(c.experts, 2 * c.inter)});
    w2.push_back({b.data_view(c.experts, c.hidden), b.scale_view(c.experts, c.hidden)});
  }
  std::vector<uint16_t> y_fused(size_t(c.tokens * c.hidden)), y_unfused(y_fused.size());
  const TensorView y_view(y_fused.data(), DType::kBF16, {c.tokens, c.hidden});
  auto fused = [&](int64_t i) {
    mega_moe::fp8_fp4_mega_moe(y_view, w1[size_t(i % copies)], w2[size_t(i % copies)], nullptr, *buffer);
  };

  MoeInputs in;
  in.tokens = c.tokens;
  in.hidden = c.hidden;
  in.inter = c.inter;
  in.experts = c.experts;
  in.topk = c.topk;
  in.x = x.data.get();
  in.x_sf = x.scale.get();
  in.topk_idx = idx.data();
  in.topk_weights = w.data();
  in.l1 = w1[0];
  in.l2 = w2[0];
  UnfusedMoe unfused(in);
  auto peer = [&](int64_t i) {
    unfused.use_weights(w1[size_t(i % copies)], w2[size_t(i % copies)]);
    unfused.run(y_unfused.data());
  };

  fused(0);
  peer(0);
  double worst = 0, ymax = 0;
  for (size_t i = 0; i < y_fused.size(); ++i) {
    const double a = bf16_to_f32(y_fused[i]), b = bf16_to_f32(y_unfused[i]);
    if (!std::isfinite(a)) {
      row->status = "wrong result: non-finite y";
      return;
    }
    worst = std::max(worst, std::fabs(a - b));
    ymax = std::max(ymax, std::fabs(b));
  }
  row->check_error = worst / (0.02 * std::max(ymax, 1e-30));
  if (row->check_error > 1) {
    row->status = "wrong result: fused and unfused differ by " + std::to_string(worst);
    return;
  }
  const double flops = 2.0 * double(idx.size()) * 3.0 * double(c.hidden) * double(c.inter);
  row->time_ms = time_median(fused).median_ms;
  row->gflops = flops / (row->time_ms * 1e-3) * 1e-9;
  if (c.decode) {
    row->gbps = weight_bytes_read(c, idx, l1, l2) / (row->time_ms * 1e-3) * 1e-9;
    set_dram_read_pct(row, row->gbps, limits);
  } else {
    set_bf16_peak_pct(row, limits);
  }
  row->peer = "unfused";
  row->peer_time_ms = time_median(peer).median_ms;
  row->peer_ratio = row->peer_time_ms / row->time_ms;
}

}  // namespace

std::vector<Row> run_moe_bench(const Options& options, const MachineLimits& limits) {
  std::vector<Row> rows;
  int total = 0, index = 0;
  for (const MoeCase& c : kCases) total += options.full || !c.full_only;
  for (const MoeCase& c : kCases) {
    if (c.full_only && !options.full) continue;
    std::fprintf(stderr,
                 "[bench moe %d/%d] fp8_fp4_mega_moe tokens=%lld hidden=%lld inter=%lld experts=%lld topk=%lld\n",
                 ++index, total, (long long)c.tokens, (long long)c.hidden, (long long)c.inter, (long long)c.experts,
                 (long long)c.topk);
    Row row;
    row.component = "moe";
    row.op = "fp8_fp4_mega_moe";
    row.m = c.tokens;
    row.n = c.hidden;
    row.k = c.inter;
    try {
      run_case(c, limits, &row);
    } catch (const std::exception& e) {
      row.status = std::string("error: ") + e.what();
    }
    if (!row.ok()) std::fprintf(stderr, "[bench moe] FAILED: %s\n", row.status.c_str());
    rows.push_back(row);
  }
  return rows;
}

void print_moe_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::vector<const Row*> prefill, decode;
  for (const Row& r : rows)
    if (r.component == "moe") (r.limit_name == "dram_read_gbps" ? decode : prefill).push_back(&r);
  if (prefill.empty() && decode.empty()) return;
  std::fprintf(out, "\ngeometric means (rows that passed):\n");
  const auto line = [&](const char* what, const std::vector<const Row*>& group, const char* limit, double pct_target,
                        double ratio_target) {
    if (group.empty()) return;
    const GeoMeans g = geo_means(group);
    std::fprintf(out, "  fp8_fp4_mega_moe %-7s %d rows: %7s of %s", what, g.rows, format_pct(g.pct_of_limit).c_str(),
                 limit);
    if (pct_target > 0)
      std::fprintf(out, " (target >= %.0f%%) [%s]", pct_target, g.pct_of_limit >= pct_target ? "met" : "not met");
    std::fprintf(out, ", %s unfused (target >= %.1fx) [%s]\n", format_ratio(g.peer_ratio).c_str(), ratio_target,
                 g.peer_ratio >= ratio_target ? "met" : "not met");
  };
  line("prefill", prefill, "bf16 peak", 0, 1.3);
  line("decode", decode, "DRAM read", 70, 1.2);
}

}  // namespace tessera::bench
