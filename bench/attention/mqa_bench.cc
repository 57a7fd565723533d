// `tessera bench attention` MQA rows: tessera::attention::fp8_fp4_mqa_logits (prefill, causal ranges)
// and fp8_fp4_paged_mqa_logits (decode over a paged FP8 cache) with H = 64, D = 128, against a
// dequantise + oneDNN bf16 GEMM peer that materialises the [queries x heads, keys] scores (paged: per
// request, over the pages it reads).
#include "attention/mqa_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>

#include "limit_pct.h"
#include "peers/onednn_matmul.h"
#include "quick_scale.h"
#include "random_fill.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/mqa_logits.h"
#include "timing.h"

namespace tessera::bench {
namespace {

constexpr int64_t kHeads = 64, kDim = 128, kBlockKv = 64;
constexpr int64_t kPeerQueryBlock = 32;  // queries per peer GEMM (bounds its materialised scores)

struct MqaCase {
  const char* op;  // "mqa_prefill" or "mqa_paged"
  int64_t queries, keys, next_n;
  bool full_only;
};

// DeepGEMM's MQA-logits test shapes (S in {2048, 8192}, S_kv in {8192, 65536}) scaled to two cores; decode: batch
// 64 with next_n 1 and 2 (DeepGEMM's paged test), 4096 tokens of context.
const MqaCase kCases[] = {
    {"mqa_prefill", 512, 2048, 1, false}, {"mqa_prefill", 512, 8192, 1, false}, {"mqa_prefill", 2048, 8192, 1, true},
    {"mqa_paged", 64, 4096, 1, false},    {"mqa_paged", 64, 4096, 2, false},
};

// Random operands: q e4m3 [rows, H, D], keys e4m3 [keys, D] with fp32 per-token scales, weights.
struct Operands {
  AlignedPtr<uint8_t> q, k;
  AlignedPtr<float> k_scale, weights;
};

Operands make_operands(int64_t q_rows, int64_t keys, uint64_t seed) {
  Operands o;
  o.q = aligned_array<uint8_t>(size_t(q_rows * kHeads * kDim));
  o.k = aligned_array<uint8_t>(size_t(keys * kDim));
  o.k_scale = aligned_array<float>(size_t(keys));
  o.weights = aligned_array<float>(size_t(q_rows * kHeads));
  for_random_normal_blocks(q_rows * kHeads, kDim, 64, seed, [&](int64_t r0, int64_t n, const float* v) {
    for (int64_t i = 0; i < n * kDim; ++i) o.q[size_t(r0 * kDim + i)] = f32_to_e4m3_sat(v[i]);
  });
  for_random_normal_blocks(keys, kDim, 64, seed + 1, [&](int64_t r0, int64_t n, const float* v) {
    for (int64_t r = 0; r < n; ++r) {
      float amax = 1e-4f;
      for (int64_t d = 0; d < kDim; ++d) amax = std::max(amax, std::fabs(v[r * kDim + d]));
      const float sf = amax / 448.0f;
      o.k_scale[size_t(r0 + r)] = sf;
      for (int64_t d = 0; d < kDim; ++d) o.k[size_t((r0 + r) * kDim + d)] = f32_to_e4m3_sat(v[r * kDim + d] / sf);
    }
  });
  for_random_normal_blocks(q_rows, kHeads, 64, seed + 2, [&](int64_t r0, int64_t n, const float* v) {
    std::copy_n(v, n * kHeads, o.weights.get() + r0 * kHeads);
  });
  return o;
}

// float64 logit of query row i (all heads) against key j, from the quantised operands.
double reference_logit(const Operands& o, int64_t i, int64_t j) {
  double sum = 0;
  for (int64_t h = 0; h < kHeads; ++h) {
    double dot = 0;
    for (int64_t d = 0; d < kDim; ++d)
      dot += double(e4m3_to_f32(o.q[size_t((i * kHeads + h) * kDim + d)])) * e4m3_to_f32(o.k[size_t(j * kDim + d)]);
    sum += o.weights[size_t(i * kHeads + h)] * std::max(dot * o.k_scale[size_t(j)], 0.0);
  }
  return sum;
}

// Worst |error| / (1e-3 * rms of the checked logits) over sampled rows and keys: <= 1 passes (bf16 peers
// round their scores, so the bound is DeepGEMM's FP8 calc_diff scale, not fp32 rounding).
double check_error(const Operands& o, const float* logits, int64_t ld,
                   const std::vector<std::pair<int64_t, int64_t>>& ij) {
  std::vector<double> ref, got;
  double sq = 0;
  for (const auto& [i, j] : ij) {
    ref.push_back(reference_logit(o, i, j));
    got.push_back(logits[i * ld + j]);
    sq += ref.back() * ref.back();
  }
  const double rms = std::sqrt(sq / double(ref.size())) + 1e-30;
  double worst = 0;
  for (size_t n = 0; n < ref.size(); ++n) {
    if (!std::isfinite(got[n])) return INFINITY;
    worst = std::max(worst, std::fabs(got[n] - ref[n]) / (2e-2 * rms));
  }
  return worst;
}

class MqaBench {
 public:
  MqaBench(const Options& o, const MachineLimits& l) : opt_(o), lim_(l) { OnednnMatmul::set_threads(o.threads); }

  std::vector<Row> run() {
    int total = 0, index = 0;
    for (const MqaCase& c : kCases) total += opt_.full || !c.full_only;
    for (MqaCase c : kCases) {
      if (c.full_only && !opt_.full) continue;
      // Slower levels: fewer query rows (prefill) or requests (paged decode), then fewer keys.
      const bool prefill = std::string(c.op) == "mqa_prefill";
      const int64_t listed = c.queries;
      c.queries = scaled_size(c.queries, opt_.quick_scale, prefill ? 64 : 8, prefill ? 64 : 8);
      c.keys = scaled_size(c.keys, opt_.quick_scale * double(listed) / double(c.queries), 512, 512);
      std::fprintf(stderr, "[bench attention mqa %d/%d] %s queries=%lld keys=%lld next_n=%lld\n", ++index, total, c.op,
                   (long long)c.queries, (long long)c.keys, (long long)c.next_n);
      Row row;
      row.component = "attention";
      row.op = c.op;
      row.m = c.queries * c.next_n;
      row.n = c.keys;
      row.k = kHeads;
      try {
        std::string(c.op) == "mqa_prefill" ? run_prefill(c, &row) : run_paged(c, &row);
      } catch (const std::exception& e) {
        row.status = std::string("error: ") + e.what();
      }
      if (!row.ok()) std::fprintf(stderr, "[bench attention mqa] %s FAILED: %s\n", c.op, row.status.c_str());
      rows_.push_back(row);
    }
    return std::move(rows_);
  }

 private:
  void finish(Row* row, double ms, double flops, double bytes) {
    row->time_ms = ms;
    row->gflops = flops / (ms * 1e-3) * 1e-9;
    row->gbps = bytes / (ms * 1e-3) * 1e-9;
    set_bf16_peak_pct(row, lim_);
  }

  // The peer's scores for query rows [q0, q1) against all keys [0, keys): dequantise to bf16 (the
  // token scale folded into K), one oneDNN GEMM, then relu / weights / head sum in plain loops.
  void peer_scores(const Operands& o, int64_t q0, int64_t q1, int64_t keys, const uint16_t* k_bf16, uint16_t* q_bf16,
                   uint16_t* scores, OnednnMatmul& mm, float* logits, int64_t ld, const int32_t* ke) {
    const int64_t rows = (q1 - q0) * kHeads;
    OnednnMatmul::parallel_for(rows * kDim, [&](int64_t a, int64_t b) {
      for (int64_t x = a; x < b; ++x) q_bf16[x] = f32_to_bf16(e4m3_to_f32(o.q[size_t(q0 * kHeads * kDim + x)]));
    });
    mm.run(q_bf16, k_bf16, scores);
    OnednnMatmul::parallel_for(q1 - q0, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i)
        for (int64_t j = 0; j < keys; ++j) {
          float sum = 0;
          for (int64_t h = 0; h < kHeads; ++h)
            sum += o.weights[size_t((q0 + i) * kHeads + h)] *
                   std::max(bf16_to_f32(scores[((i * kHeads + h) * keys) + j]), 0.0f);
          logits[(q0 + i) * ld + j] = ke && j >= ke[q0 + i] ? -INFINITY : sum;
        }
    });
  }

  // The peer once on NaN-poisoned logits (n values), its worst error in units of its tolerance from
  // `error`, then timed against our `ours_ms` unless the check failed.
  template <class Peer, class Error>
  static void check_and_time_peer(Row* row, double ours_ms, float* logits, int64_t n, Peer& peer, Error error) {
    std::fill_n(logits, n, NAN);
    peer(0);
    if (!(error() <= 1.0)) {
      row->peer += " (wrong result)";
      return;
    }
    settle_threads();
    row->peer_time_ms = time_median(peer).median_ms;
    row->peer_ratio = row->peer_time_ms / ours_ms;
  }

  void run_prefill(const MqaCase& c, Row* row) {
    const int64_t s = c.queries, s_kv = c.keys;
    const Operands o = make_operands(s, s_kv, uint64_t(s * 7 + s_kv));
    std::vector<int32_t> ks(static_cast<size_t>(s), 0), ke(static_cast<size_t>(s));
    double pairs = 0;
    for (int64_t i = 0; i < s; ++i) {
      ke[size_t(i)] = int32_t(s_kv - s + i + 1);
      pairs += double(ke[size_t(i)]);
    }
    auto logits = aligned_array<float>(size_t(s * s_kv));
    auto ours = [&](int64_t) {
      attention::fp8_fp4_mqa_logits(
          TensorView(o.q.get(), DType::kF8E4M3, {s, kHeads, kDim}), nullptr,
          TensorView(o.k.get(), DType::kF8E4M3, {s_kv, kDim}), TensorView(o.k_scale.get(), DType::kF32, {s_kv}),
          TensorView(o.weights.get(), DType::kF32, {s, kHeads}), TensorView(ks.data(), DType::kI32, {s}),
          TensorView(ke.data(), DType::kI32, {s}), TensorView(logits.get(), DType::kF32, {s, s_kv}), true, 0);
    };
    std::fill_n(logits.get(), s * s_kv, NAN);
    ours(0);
    const std::vector<std::pair<int64_t, int64_t>> samples = {
        {0, 0}, {0, s_kv - s}, {s / 2, s_kv / 3}, {s - 1, s_kv - 1}, {s - 1, 7}, {s / 3, s_kv - s + s / 3}};
    row->check_error = check_error(o, logits.get(), s_kv, samples);
    if (!(row->check_error <= 1.0)) {
      row->status = "wrong result: check error " + std::to_string(row->check_error) + " x tolerance";
      return;
    }
    const double ms = time_median(ours).median_ms;
    finish(row, ms, 2.0 * kHeads * kDim * pairs,
           double(s * kHeads * kDim + s_kv * (kDim + 4) + s * kHeads * 4 + s * s_kv * 4));
    if (!OnednnMatmul::available()) return;
    row->peer = "dequant+" + OnednnMatmul::label();
    try {  // a peer that fails costs only its own columns
      const int64_t qb = std::min(s, kPeerQueryBlock);
      OnednnMatmul mm(qb * kHeads, s_kv, kDim);
      auto k_bf16 = aligned_array<uint16_t>(size_t(s_kv * kDim));
      auto q_bf16 = aligned_array<uint16_t>(size_t(qb * kHeads * kDim));
      auto scores = aligned_array<uint16_t>(size_t(qb * kHeads * s_kv));
      auto peer = [&](int64_t) {
        OnednnMatmul::parallel_for(s_kv, [&](int64_t a, int64_t b) {
          for (int64_t j = a; j < b; ++j)
            for (int64_t d = 0; d < kDim; ++d)
              k_bf16[size_t(j * kDim + d)] = f32_to_bf16(e4m3_to_f32(o.k[size_t(j * kDim + d)]) * o.k_scale[size_t(j)]);
        });
        for (int64_t q0 = 0; q0 < s; q0 += qb)
          peer_scores(o, q0, q0 + qb, s_kv, k_bf16.get(), q_bf16.get(), scores.get(), mm, logits.get(), s_kv,
                      ke.data());
      };
      check_and_time_peer(row, ms, logits.get(), s * s_kv, peer,
                          [&] { return check_error(o, logits.get(), s_kv, samples); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[bench attention mqa] peer failed on %s: %s\n", c.op, e.what());
      row->peer += " (failed)";
    }
  }

  void run_paged(const MqaCase& c, Row* row) {
    const int64_t batch = c.queries, next_n = c.next_n, ctx = c.keys, nq = batch * next_n;
    const int64_t pages = ctx / kBlockKv, num_blocks = batch * pages;
    // Keys of request b are rows [b * ctx, (b + 1) * ctx) of `o.k`; the cache holds them page by page
    // in a shuffled order.
    const Operands o = make_operands(nq, batch * ctx, uint64_t(nq * 13 + ctx));
    const int64_t page_bytes = kBlockKv * (kDim + 4);
    auto cache = aligned_array<uint8_t>(size_t(num_blocks * page_bytes));
    std::vector<int32_t> table(static_cast<size_t>(batch * pages));
    for (int64_t p = 0; p < num_blocks; ++p) table[size_t(p)] = int32_t((p * 7919) % num_blocks);  // a permutation
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < ctx; ++t) {
        uint8_t* page = cache.get() + int64_t(table[size_t(b * pages + t / kBlockKv)]) * page_bytes;
        std::memcpy(page + (t % kBlockKv) * kDim, o.k.get() + (b * ctx + t) * kDim, kDim);
        std::memcpy(page + kBlockKv * kDim + (t % kBlockKv) * 4, o.k_scale.get() + b * ctx + t, 4);
      }
    std::vector<int32_t> lens(static_cast<size_t>(nq), static_cast<int32_t>(ctx));
    const int sms = num_threads();
    std::vector<int32_t> meta(static_cast<size_t>(2 * (sms + 1)));
    const TensorView lens_view(lens.data(), DType::kI32, {batch, next_n});
    attention::get_paged_mqa_logits_metadata(lens_view, int(kBlockKv), sms,
                                             TensorView(meta.data(), DType::kI32, {sms + 1, 2}));
    auto logits = aligned_array<float>(size_t(nq * ctx));
    auto ours = [&](int64_t) {
      attention::fp8_fp4_paged_mqa_logits(TensorView(o.q.get(), DType::kF8E4M3, {batch, next_n, kHeads, kDim}), nullptr,
                                          TensorView(cache.get(), DType::kU8, {num_blocks, kBlockKv, 1, kDim + 4}),
                                          TensorView(o.weights.get(), DType::kF32, {nq, kHeads}), lens_view,
                                          TensorView(table.data(), DType::kI32, {batch, pages}),
                                          TensorView(meta.data(), DType::kI32, {sms + 1, 2}),
                                          TensorView(logits.get(), DType::kF32, {nq, ctx}), ctx, false);
    };
    ours(0);
    const double worst = paged_error(o, logits.get(), nq, next_n, ctx, false);
    row->check_error = worst;
    if (!(worst <= 1.0)) {
      row->status = "wrong result: check error " + std::to_string(worst) + " x tolerance";
      return;
    }
    const double ms = time_median(ours).median_ms;
    finish(row, ms, 2.0 * kHeads * kDim * double(nq * ctx),
           double(nq * kHeads * (kDim + 4) + batch * ctx * (kDim + 4) + nq * ctx * 4));
    if (!OnednnMatmul::available()) return;
    row->peer = "dequant+" + OnednnMatmul::label();
    try {  // a peer that fails costs only its own columns
      // Per request: its pages dequantised into [ctx, D] bf16 (the token scale folded in), then the
      // prefill peer's GEMM and head sum for its next_n queries.
      OnednnMatmul mm(next_n * kHeads, ctx, kDim);
      auto k_bf16 = aligned_array<uint16_t>(size_t(ctx * kDim));
      auto q_bf16 = aligned_array<uint16_t>(size_t(next_n * kHeads * kDim));
      auto scores = aligned_array<uint16_t>(size_t(next_n * kHeads * ctx));
      auto peer = [&](int64_t) {
        for (int64_t b = 0; b < batch; ++b) {
          OnednnMatmul::parallel_for(ctx, [&](int64_t a, int64_t e) {
            for (int64_t t = a; t < e; ++t) {
              const uint8_t* page = cache.get() + int64_t(table[size_t(b * pages + t / kBlockKv)]) * page_bytes;
              const uint8_t* v = page + (t % kBlockKv) * kDim;
              float sf;
              std::memcpy(&sf, page + kBlockKv * kDim + (t % kBlockKv) * 4, 4);
              for (int64_t d = 0; d < kDim; ++d) k_bf16[size_t(t * kDim + d)] = f32_to_bf16(e4m3_to_f32(v[d]) * sf);
            }
          });
          peer_scores(o, b * next_n, (b + 1) * next_n, ctx, k_bf16.get(), q_bf16.get(), scores.get(), mm, logits.get(),
                      ctx, nullptr);
        }
      };
      check_and_time_peer(row, ms, logits.get(), nq * ctx, peer,
                          [&] { return paged_error(o, logits.get(), nq, next_n, ctx, true); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[bench attention mqa] peer failed on %s: %s\n", c.op, e.what());
      row->peer += " (failed)";
    }
  }

  // Worst error of paged logits at sampled (query, token) pairs: query row i reads request i / next_n,
  // whose token t is row (i / next_n) * ctx + t of o.k. Ours (fp32 scores): 1e-4 * (|ref| + 1) per
  // logit; a bf16 peer (rounded K and scores): the prefill rows' scale, 2e-2 * rms of the samples.
  static double paged_error(const Operands& o, const float* logits, int64_t nq, int64_t next_n, int64_t ctx,
                            bool bf16_scores) {
    std::vector<double> ref, got;
    double sq = 0;
    for (int64_t i : {int64_t(0), nq / 2, nq - 1})
      for (int64_t t : {int64_t(0), ctx / 2, ctx - 1}) {
        ref.push_back(reference_logit(o, i, (i / next_n) * ctx + t));
        got.push_back(logits[size_t(i * ctx + t)]);
        sq += ref.back() * ref.back();
      }
    const double rms = std::sqrt(sq / double(ref.size())) + 1e-30;
    double worst = 0;
    for (size_t n = 0; n < ref.size(); ++n) {
      if (!std::isfinite(got[n])) return INFINITY;
      const double tol = bf16_scores ? 2e-2 * rms : 1e-4 * (std::fabs(ref[n]) + 1);
      worst = std::max(worst, std::fabs(got[n] - ref[n]) / tol);
    }
    return worst;
  }

  const Options& opt_;
  const MachineLimits& lim_;
  std::vector<Row> rows_;
};

}  // namespace

std::vector<Row> run_mqa_bench(const Options& options, const MachineLimits& limits) {
  return MqaBench(options, limits).run();
}

void print_mqa_summary(std::FILE* out, const std::vector<Row>& rows) {
  bool any = false;
  for (const char* op : {"mqa_prefill", "mqa_paged"}) {
    std::vector<const Row*> group;
    for (const Row& r : rows)
      if (r.op == op) group.push_back(&r);
    if (group.empty()) continue;
    if (!any) std::fprintf(out, "\nMQA logits geometric means (rows that passed):\n");
    any = true;
    const GeoMeans g = geo_means(group);
    std::fprintf(out, "  %-12s %2d rows: %7s of bf16 peak  %7s dequant+%s\n", op, g.rows,
                 format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str(), OnednnMatmul::label().c_str());
    const AttentionTargets t = attention_targets();
    if (t.compute_pct > 0 && std::isfinite(g.pct_of_limit)) {
      const bool peer_ok = !std::isfinite(g.peer_ratio) || g.peer_ratio >= t.mqa_peer_ratio;
      std::fprintf(out, "  target at %s: %s >= %.0f%% of the level's peak and >= %.0fx the peer: %s\n", t.level, op,
                   t.compute_pct, t.mqa_peer_ratio, g.pct_of_limit >= t.compute_pct && peer_ok ? "[met]" : "[not met]");
    }
  }
}

}  // namespace tessera::bench
