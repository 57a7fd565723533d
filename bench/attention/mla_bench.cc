// The FlashMLA rows of `tessera bench attention`: sparse FP8 decode (V32, MODEL1), dense bf16 decode and
// sparse prefill, each checked against float64 and then timed against the unfused oneDNN peer.
#include "attention/mla_bench.h"

#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <tuple>

#include "attention/gemm_ceilings.h"
#include "attention/mla_peer.h"
#include "attention/mla_problem.h"
#include "limit_pct.h"
#include "quick_scale.h"
#include "timing.h"

namespace tessera::bench {

namespace {

// clang-format off
const MlaCase kCases[] = {
    {MlaOp::kSparseV32, 8, 1, 64, 2048, true},   {MlaOp::kSparseV32, 4, 2, 64, 2048, true},
    {MlaOp::kSparseV32, 8, 1, 128, 2048, true},  {MlaOp::kSparseV32, 4, 2, 128, 2048, true},
    {MlaOp::kSparseV32, 16, 2, 128, 2048, false},
    {MlaOp::kSparseModel1, 4, 2, 64, 2048, true}, {MlaOp::kSparseModel1, 8, 1, 128, 2048, false},
    {MlaOp::kDense, 4, 1, 64, 4096, true},       {MlaOp::kDense, 4, 2, 64, 4096, true},
    {MlaOp::kDense, 4, 1, 128, 4096, true},      {MlaOp::kDense, 2, 2, 128, 16384, false},
    {MlaOp::kDense, 8, 1, 16, 8192, false},
    {MlaOp::kPrefill, 1, 64, 64, 2048, true},    {MlaOp::kPrefill, 1, 32, 128, 2048, true},
};
// clang-format on

constexpr double kPeerTolScale = 4;
constexpr uint16_t kBf16NaN = 0x7FC0;

// The GEMM ceilings of a (rows, tokens, d_qk) shape (tessera's, then oneDNN's), measured once per run:
// several rows share a shape.
GemmCeilings ceilings_of(int rows, int tokens, int d_qk) {
  static std::map<std::tuple<int, int, int>, GemmCeilings> measured;
  const auto key = std::make_tuple(rows, tokens, d_qk);
  const auto it = measured.find(key);
  if (it != measured.end()) return it->second;
  return measured[key] = mla_gemm_ceilings(rows, tokens, d_qk);
}

void run_case(const MlaCase& c, const MachineLimits& lim, Row* row) {
  MlaProblem p(c, lim);
  std::vector<uint16_t> poisoned(size_t(p.groups() * p.rows() * 512), kBf16NaN);
  std::copy(poisoned.begin(), poisoned.end(), const_cast<uint16_t*>(p.our_output()));
  p.run_ours(0);
  row->check_error = p.check(p.our_output(), 1.0);
  if (!(row->check_error <= 1.0)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "wrong result: check error %.3g x tolerance", row->check_error);
    row->status = buf;
    return;
  }
  const double ms = time_median([&](int64_t i) { p.run_ours(i); }).median_ms, seconds = ms * 1e-3;
  row->time_ms = ms;
  row->gflops = p.flops() / seconds * 1e-9;
  row->gbps = p.bytes_read() / seconds * 1e-9;
  const double balance = lim.bf16_peak_gflops / lim.dram_read_gbps;
  if (p.flops() / p.bytes_read() >= balance) {
    set_bf16_peak_pct(row, lim);
    const GemmCeilings ceilings = ceilings_of(p.rows(), int(p.tokens()), p.d_qk());
    if (row->limit_value > 0) {
      row->pct_ceiling = 100.0 * ceilings.tessera_gflops / row->limit_value;
      row->pct_peer_ceiling = 100.0 * ceilings.onednn_gflops / row->limit_value;
    }
  } else {
    set_dram_read_pct(row, row->gbps, lim);
  }
  if (!MlaPeer::available()) return;
  row->peer = "dequant+" + OnednnMatmul::label();
  try {
    MlaPeer peer(p);
    peer.run(0, poisoned.data());
    if (!(p.check(poisoned.data(), kPeerTolScale) <= 1.0)) {
      row->peer += " (wrong result)";
    } else {
      row->peer_time_ms = time_median([&](int64_t i) { peer.run(i, poisoned.data()); }).median_ms;
      row->peer_ratio = row->peer_time_ms / ms;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[bench attention] peer failed on %s: %s\n", row->op.c_str(), e.what());
  }
  settle_threads();
}

}  // namespace

std::vector<Row> run_mla_bench(const Options& options, const MachineLimits& limits) {
  OnednnMatmul::set_threads(options.threads);
  std::vector<Row> rows;
  int total = 0, index = 0;
  for (const MlaCase& c : kCases) total += c.quick || options.full;
  for (MlaCase c : kCases) {
    if (!c.quick && !options.full) continue;
    // Slower levels: fewer requests (decode) or query rows (prefill); the per-query work stays the same.
    if (c.op == MlaOp::kPrefill) {
      c.s_q = int(scaled_size(c.s_q, options.quick_scale, 8, 8));
    } else {
      c.b = int(scaled_size(c.b, options.quick_scale, 1, 1));
    }
    Row row;
    row.component = "attention";
    row.op = mla_op_name(c.op);
    row.m = c.op == MlaOp::kPrefill ? c.s_q : int64_t(c.b) * c.s_q;
    row.n = c.h_q;
    row.k = c.tokens;
    std::fprintf(stderr, "[bench attention %d/%d] %s b=%d s_q=%d h_q=%d tokens=%d\n", ++index, total, row.op.c_str(),
                 c.b, c.s_q, c.h_q, c.tokens);
    try {
      run_case(c, limits, &row);
    } catch (const std::exception& e) {
      row.status = std::string("error: ") + e.what();
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace tessera::bench
