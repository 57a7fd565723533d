// `tessera bench gemm`, grouped rows: every case is verified (ours and the dense peer) before it is
// timed; the dense GEMM doing the same work runs right after ours in the same process.
#include "gemm/grouped_bench.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "gemm/gemm_bench.h"
#include "gemm/grouped_runs.h"
#include "limit_pct.h"
#include "quick_scale.h"
#include "timing.h"

namespace tessera::bench {
namespace {

bool is_decode(const GroupedCase& c) {
  return c.layout == GroupedLayout::kMasked && c.max_m <= kGroupedDecodeMaxM;
}

void run_case(const GroupedCase& c, const MachineLimits& limits, uint64_t seed, Row* row) {
  const std::unique_ptr<GroupedRun> run = prepare_grouped_run(c, limits, seed);
  row->m = run->valid_rows;
  run->poison();
  run->ours(0);
  row->check_error = run->check_ours();
  if (row->check_error > 1.0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "wrong result: check error %.3g x tolerance", row->check_error);
    row->status = buf;
    return;
  }
  const double ms = time_median([&](int64_t i) { run->ours(i); }).median_ms;
  const double seconds = ms * 1e-3;
  row->time_ms = ms;
  row->gflops = 2.0 * double(run->valid_rows) * double(c.n) * double(c.k) / seconds * 1e-9;
  row->gbps = double(run->bytes) / seconds * 1e-9;
  if (is_decode(c)) {
    set_dram_read_pct(row, double(run->weight_data_bytes) / seconds * 1e-9, limits);
    set_decode_ceiling(row, 2.0 * double(run->valid_rows) * double(c.n) * double(c.k) / double(run->weight_data_bytes),
                       limits);
  } else {
    set_bf16_peak_pct(row, limits);
  }

  row->peer = run->peer;
  run->dense(0);
  const double dense_error = run->check_dense();
  if (dense_error > 1.0) {
    std::fprintf(stderr, "[bench gemm] WRONG RESULT from the dense peer of %s: check error %.3g x tolerance\n",
                 row->op.c_str(), dense_error);
    row->peer += " (wrong result)";
    return;
  }
  row->peer_time_ms = time_median([&](int64_t i) { run->dense(i); }).median_ms;
  row->peer_ratio = row->peer_time_ms / ms;
}

}  // namespace

std::vector<Row> run_grouped_gemm_bench(const Options& options, const MachineLimits& limits) {
  std::vector<Row> rows;
  int total = 0, index = 0;
  for (const GroupedCase& c : grouped_cases()) total += c.quick || options.full;
  for (GroupedCase c : grouped_cases()) {
    if (!c.quick && !options.full) continue;
    // Slower levels: fewer rows in all - fewer per contiguous group (not below the 128-row alignment),
    // then fewer groups (masked and decode groups are small already).
    if (options.quick_scale < 1) {
      const double rows = double(c.groups * c.rows_per_group) * options.quick_scale;
      if (c.layout != GroupedLayout::kMasked)
        c.rows_per_group = scaled_size(c.rows_per_group, options.quick_scale, kGroupedAlignment, kGroupedAlignment);
      c.groups = std::clamp(int64_t(rows / double(c.rows_per_group)), int64_t(1), c.groups);
    }
    std::fprintf(stderr, "[bench gemm grouped %d/%d] %s G=%lld rows/group=%lld%s n=%lld k=%lld\n", ++index, total, c.op,
                 (long long)c.groups, (long long)c.rows_per_group, c.uneven ? " (0.7-1.3x)" : "", (long long)c.n,
                 (long long)c.k);
    Row row;
    row.component = "gemm";
    row.op = c.op;
    row.n = c.n;
    row.k = c.k;
    try {
      run_case(c, limits, 0x6A09E667ull + uint64_t(index), &row);
    } catch (const std::exception& e) {
      row.status = std::string("error: ") + e.what();
      std::fprintf(stderr, "[bench gemm] %s FAILED: %s\n", c.op, row.status.c_str());
    }
    rows.push_back(row);
  }
  return rows;
}

std::vector<Row> run_gemm_and_grouped_bench(const Options& options, const MachineLimits& limits) {
  std::vector<Row> rows = run_gemm_bench(options, limits);
  const std::vector<Row> grouped = run_grouped_gemm_bench(options, limits);
  rows.insert(rows.end(), grouped.begin(), grouped.end());
  return rows;
}

void print_gemm_and_grouped_summary(std::FILE* out, const std::vector<Row>& rows) {
  print_gemm_summary(out, rows);
  print_grouped_gemm_summary(out, rows);
}

}  // namespace tessera::bench
