// `tessera bench select`: tessera::select::topk on DeepSelect's two workloads, against the
// standard-library top-k (nth_element + sort) on the same rows, same threads, same run.
#include "select/select_bench.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <string>

#include "limit_pct.h"
#include "random_fill.h"
#include "select/select_peer.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/select.h"
#include "timing.h"

namespace tessera::bench {

const char* const kSelectHelp = R"(usage: tessera bench select [--json] [--full] [--threads N]

Top-k per row (tessera::select::topk, DeepSelect's topk):
  topk_f32_sorted  the sampler: fp32 rows of V = 129280, topk 512, sorted values + int64 indices
  topk_bf16        the indexer: bf16 rows of 8K-128K, topk 2048 (and 512 with --full), int32 indices
                   only (return_value=False, DeepSelect's recommended indexer call)
Columns: M = rows per call (b), N = row length (V), K = topk.

Method: one batch of random normal rows is generated and copied until the copies exceed 4x L3, and
successive calls rotate through the copies, so the rows are never cache-resident. Every result (ours
and the peer's) is checked first: distinct indices, min(selected) >= max(unselected), values bitwise
copies of the input. Then a warm-up and timed calls (at least 5, about 0.3 s); medians reported.
  GB/s   = (input bytes + output bytes) / time (DeepSelect's own metric)
  %limit = GB/s / DRAM read GB/s measured right after the row (tessera info's loop)
  peer   = std::nth_element on (value, index) pairs + std::sort of the k selected, rows spread over
           the same thread pool; xpeer = peer time / our time
)";

namespace {

struct SelectCase {
  const char* op;
  bool bf16;
  int64_t rows, cols;
  int k;
  bool full_only;
};

const SelectCase kCases[] = {
    {"topk_f32_sorted", false, 6, 129280, 512, false}, {"topk_f32_sorted", false, 64, 129280, 512, false},
    {"topk_bf16", true, 256, 8192, 2048, false},       {"topk_bf16", true, 64, 32768, 2048, false},
    {"topk_bf16", true, 6, 131072, 2048, false},       {"topk_bf16", true, 32, 131072, 2048, false},
    {"topk_bf16", true, 256, 16384, 512, true},        {"topk_bf16", true, 6, 1048576, 512, true},
    {"topk_bf16", true, 64, 65536, 512, true},
};

constexpr int64_t kRotationOverL3 = 4;

class SelectBench {
 public:
  SelectBench(const Options& o, const MachineLimits& l) : opt_(o), lim_(l) {}

  std::vector<Row> run() {
    int total = 0, index = 0;
    for (const SelectCase& c : kCases) total += opt_.full || !c.full_only;
    for (const SelectCase& c : kCases) {
      if (c.full_only && !opt_.full) continue;
      std::fprintf(stderr, "[bench select %d/%d] %s b=%lld V=%lld topk=%d\n", ++index, total, c.op, (long long)c.rows,
                   (long long)c.cols, c.k);
      Row row;
      row.component = "select";
      row.op = c.op;
      row.m = c.rows;
      row.n = c.cols;
      row.k = c.k;
      try {
        run_case(c, &row);
      } catch (const std::exception& e) {
        row.status = std::string("error: ") + e.what();
      }
      if (!row.ok()) std::fprintf(stderr, "[bench select] %s FAILED: %s\n", c.op, row.status.c_str());
      rows_.push_back(row);
    }
    return std::move(rows_);
  }

 private:
  void run_case(const SelectCase& c, Row* row) {
    const int es = c.bf16 ? 2 : 4;
    const int64_t batch_bytes = c.rows * c.cols * es;
    const int copies =
        batch_bytes <= kRotationOverL3 * lim_.l3_bytes ? int(kRotationOverL3 * lim_.l3_bytes / batch_bytes) + 1 : 1;
    std::vector<AlignedPtr<char>> data;
    data.push_back(aligned_array<char>(size_t(batch_bytes)));
    for_random_normal_blocks(c.rows, c.cols, 1, uint64_t(c.cols) * 131 + uint64_t(c.k),
                             [&](int64_t r0, int64_t nr, const float* v) {
                               char* dst = data[0].get() + r0 * c.cols * es;
                               for (int64_t i = 0; i < nr * c.cols; ++i) {
                                 if (c.bf16) {
                                   const uint16_t h = f32_to_bf16(v[i]);
                                   std::memcpy(dst + 2 * i, &h, 2);
                                 } else {
                                   std::memcpy(dst + 4 * i, &v[i], 4);
                                 }
                               }
                             });
    for (int i = 1; i < copies; ++i) {
      data.push_back(aligned_array<char>(size_t(batch_bytes)));
      std::memcpy(data.back().get(), data[0].get(), size_t(batch_bytes));
    }
    const bool sorted = !c.bf16, values = !c.bf16, idx64 = !c.bf16;
    auto idx = aligned_array<int64_t>(size_t(c.rows * c.k));
    auto val = aligned_array<uint32_t>(size_t(c.rows * c.k));
    const DType vt = c.bf16 ? DType::kBF16 : DType::kF32;
    const TensorView idx_view(idx.get(), idx64 ? DType::kI64 : DType::kI32, {c.rows, c.k});
    const TensorView val_view(val.get(), vt, {c.rows, c.k});
    select::TopkOptions o;
    o.sorted = sorted;
    auto ours = [&](int64_t i) {
      const TensorView in(data[size_t(i % copies)].get(), vt, {c.rows, c.cols});
      select::topk(in, c.k, nullptr, nullptr, values ? &val_view : nullptr, idx_view, nullptr, o);
    };

    // ---- check, then time ----
    ours(0);
    std::vector<int32_t> idx32(size_t(c.rows * c.k));
    for (size_t j = 0; j < idx32.size(); ++j)
      idx32[j] = idx64 ? int32_t(idx.get()[j]) : reinterpret_cast<const int32_t*>(idx.get())[j];
    const SelectBatch batch{data[0].get(), c.bf16, c.rows, c.cols};
    std::string problem = check_topk_result(batch, c.k, idx32.data(), values ? val.get() : nullptr);
    if (!problem.empty()) {
      row->status = "wrong result: " + problem;
      return;
    }
    row->check_error = 0;
    const double ms = time_median(ours).median_ms;
    const double bytes = double(batch_bytes) + double(c.rows * c.k) * ((idx64 ? 8 : 4) + (values ? es : 0));
    row->time_ms = ms;
    row->gbps = bytes / (ms * 1e-3) * 1e-9;
    set_dram_read_pct(row, row->gbps, lim_);

    // ---- peer: nth_element + sort ----
    row->peer = "nth_element+sort";
    std::vector<int32_t> peer_idx(static_cast<size_t>(c.rows * c.k));
    auto peer = [&](int64_t i) {
      std_topk(SelectBatch{data[size_t(i % copies)].get(), c.bf16, c.rows, c.cols}, c.k, peer_idx.data());
    };
    peer(0);
    problem = check_topk_result(batch, c.k, peer_idx.data(), nullptr);
    if (!problem.empty()) {
      row->peer += " (wrong result)";
      return;
    }
    row->peer_time_ms = time_median(peer).median_ms;
    row->peer_ratio = row->peer_time_ms / ms;
  }

  const Options& opt_;
  const MachineLimits& lim_;
  std::vector<Row> rows_;
};

const char* verdict(double pct, double ratio) {
  if (!std::isfinite(pct) || !std::isfinite(ratio)) return "[n/a]";
  return pct >= 60 && ratio >= 5 ? "[met]" : "[not met]";
}

}  // namespace

std::vector<Row> run_select_bench(const Options& options, const MachineLimits& limits) {
  return SelectBench(options, limits).run();
}

void print_select_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "\ngeometric means (rows that passed) and targets (>= 60%% of DRAM read, >= 5x peer):\n");
  for (const char* op : {"topk_f32_sorted", "topk_bf16"}) {
    std::vector<const Row*> group;
    for (const Row& r : rows)
      if (r.op == op) group.push_back(&r);
    if (group.empty()) continue;
    const GeoMeans g = geo_means(group);
    std::fprintf(out, "  %-16s %2d rows: %7s of DRAM read, %7s nth_element+sort %s\n", op, g.rows,
                 format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str(),
                 verdict(g.pct_of_limit, g.peer_ratio));
  }
}

}  // namespace tessera::bench
