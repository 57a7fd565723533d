// `tessera bench ep` (run under mpirun): DeepEP's standard configuration scaled to this machine. Each
// case is checked first (every received row against its source, combine against the fp32 sum of its
// identity experts), then timed as the slowest rank's median over repeated calls, next to the shared-
// memory copy limit measured between the same ranks and MPI_Alltoallv moving the same payload.
#include "ep/ep_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "ep/ep_data.h"
#include "ep/ep_mpi.h"
#include "tessera/ep.h"

namespace tessera::bench {

const char* const kEpHelp = R"(usage: mpirun -np 2 tessera bench ep [--json] [--full] [--threads N]
       (Open MPI as root: mpirun --allow-run-as-root ...; --bind-to core keeps ranks on their cores)

ElasticBuffer (DeepEP v2) dispatch/combine and Buffer (v1) low-latency dispatch/combine between the
ranks of this mpirun job. Only rank 0 prints. Without mpirun, or with one rank, the suite is skipped.
Standard config (DeepEP's, scaled to this machine): 4096 tokens per rank, hidden 7168, top-8 of 256
experts (uniformly random), non-expanded layout:
  dispatch_fp8    e4m3 x with 56 fp32 scale packs per token   (7488 bytes per dispatched token)
  dispatch_bf16   bf16 x                                       (14432 bytes per dispatched token)
  combine_bf16    the bf16 dispatch's rows back, summed        (14368 bytes per combined token)
                  x = recv_x, which lives in the buffer's shared memory: the sources read it in place
  combine_bf16_private_x  the same with x in private memory (the rows are copied to the sources)
  ll_dispatch_fp8 / ll_combine_bf16: low-latency mode, 128 tokens per rank (latency in time_ms); its
                  dispatch writes one row per (token, destination expert), while its MPI peer moves
                  each token once per destination rank (about top-k / ranks times fewer bytes); the
                  summary prints the layout's floor: its bytes moved at the copy limit
--full adds the expanded layout (dispatch_bf16_expand, expert_alignment 128): it writes every token once
per local expert (about 4x the bytes here), which the per-token accounting below does not count.

Bytes (DeepEP's accounting): a dispatched (token, destination rank) pair moves hidden bytes + scale
packs + topk indices (8 B) + weights (4 B); a combined pair moves hidden * 2 + topk weights.
  GB/s    = LOCAL-EXCLUDED bytes per rank / time: pairs whose destination is another rank. This is
            the figure compared with the limit.
  *_logical rows: GB/s counting every pair, the rank's own included (DeepEP's "logical" bandwidth).
  %limit  = GB/s / shm copy GB/s measured between these ranks right after the case (payload bytes one
            process copies into another's shared memory per second while the other does the same; see
            include/tessera/ep/shm_bandwidth.h). With 2 ranks about half of every rank's copying is to
            itself, which local-excluded bytes do not count. The summary prints the dispatch cases'
            ceiling, measured right after the limit: the %limit of the dispatch's traffic pattern moved
            by the copy loop alone, without routing or metadata (every rank reads its rows once and
            writes each to every rank, itself included). Combine has none: a plain loop reading every
            rank's rows and writing their sum measured slower than the combine itself.
  peer    = MPI_Alltoallv of the same per-destination byte counts between pre-packed buffers (packing
            not timed); xpeer = MPI time / our time.
Times are the slowest rank's, median of repeated calls after a warm-up; each call allocates its
outputs (from tessera's reusable pool) and returns complete results.
)";

namespace {

constexpr int kWarmup = 2;

constexpr int64_t kLimitBytes = int64_t(64) << 20;

struct Run {
  std::shared_ptr<ep::Group> group;
  EpCase c;
  std::vector<double> limits;  // the shm copy limit measured after each case
  int reps = 10;
  std::vector<Row> rows;
};

Row base_row(const std::string& op, const EpCase& c, int64_t tokens) {
  Row r;
  r.component = "ep";
  r.op = op;
  r.m = tokens;
  r.n = c.hidden;
  r.k = c.topk;
  r.limit_name = "shm_copy_gbps";
  return r;
}

// Adds the local-excluded row (with its limit and peer) and the logical row. `ceiling`: the traffic
// pattern whose copy loops alone (measured right after the case, like the limit) set the row's ceiling.
// `layout_bytes` (instead): bytes the call's output layout makes this rank write into other ranks at the
// least; moved at the limit they take layout_bytes / limit, so the ceiling in % of the limit is
// remote / layout bytes.
void add_rows(Run& run, Row row, double ms, double remote_bytes, double all_bytes, const std::vector<int64_t>& send,
              const std::vector<int64_t>& recv, std::optional<ep::ShmPattern> ceiling = std::nullopt,
              double layout_bytes = 0) {
  const int R = run.group->size();
  const double remote = sum_over_ranks(*run.group, remote_bytes) / R, all = sum_over_ranks(*run.group, all_bytes) / R;
  // The limit is measured again right after each case: on a shared machine the copy rate drifts.
  const double limit = ep::measure_shm_copy_gbps_in_group(*run.group, kLimitBytes);
  run.limits.push_back(limit);
  if (ceiling && limit > 0) {
    const double best = ep::measure_shm_pattern_gbps_in_group(*run.group, *ceiling, kLimitBytes);
    if (best > 0) row.pct_ceiling = 100.0 * best / limit;
  }
  if (layout_bytes > 0) row.pct_ceiling = 100.0 * remote / (sum_over_ranks(*run.group, layout_bytes) / R);
  row.time_ms = ms;
  row.gbps = remote / (ms * 1e-3) * 1e-9;
  row.pct_of_limit = limit > 0 ? 100.0 * row.gbps / limit : kNotAvailable;
  row.peer = "mpi_alltoallv";
  row.peer_time_ms = mpi_alltoallv_ms(*run.group, send, recv, kWarmup, run.reps);
  row.peer_ratio = row.peer_time_ms / ms;
  Row logical = row;
  logical.op += "_logical";
  logical.gbps = all / (ms * 1e-3) * 1e-9;
  logical.pct_of_limit = kNotAvailable;
  logical.peer.clear();
  logical.peer_time_ms = logical.peer_ratio = kNotAvailable;
  run.rows.push_back(row);
  run.rows.push_back(logical);
}

// Per destination rank: how many of this rank's tokens go there.
std::vector<int64_t> tokens_per_rank(const EpInputs& in, const EpCase& c) {
  std::vector<int64_t> n(size_t(c.ranks), 0);
  const int epr = c.experts / c.ranks;
  for (int64_t t = 0; t < in.T; ++t) {
    std::vector<bool> hit(size_t(c.ranks), false);
    for (int k = 0; k < in.K; ++k) hit[size_t(in.idx[size_t(t * in.K + k)] / epr)] = true;
    for (int d = 0; d < c.ranks; ++d) n[size_t(d)] += hit[size_t(d)];
  }
  return n;
}

std::vector<int64_t> scaled(const std::vector<int64_t>& counts, int64_t bytes) {
  std::vector<int64_t> v;
  for (int64_t n : counts) v.push_back(n * bytes);
  return v;
}

double remote_sum(const std::vector<int64_t>& bytes, int me) {
  double s = 0;
  for (size_t d = 0; d < bytes.size(); ++d) s += int(d) == me ? 0.0 : double(bytes[d]);
  return s;
}
double all_sum(const std::vector<int64_t>& bytes) {
  double s = 0;
  for (int64_t b : bytes) s += double(b);
  return s;
}

void progress(const Run& run, const char* what) {
  if (run.group->rank() == 0) std::fprintf(stderr, "tessera bench ep: %s\n", what);
}

void normal_cases(Run& run, bool full) {
  const EpCase& c = run.c;
  const int me = run.group->rank(), R = c.ranks;
  const EpInputs in = make_ep_inputs(c, me);
  ep::ElasticBufferConfig cfg;
  cfg.num_max_tokens_per_rank = int(c.tokens);
  cfg.hidden = c.hidden;
  cfg.num_topk = c.topk;
  cfg.num_cpu_timeout_secs = 120;
  ep::ElasticBuffer buf(run.group, cfg);
  const std::vector<int64_t> out_tokens = tokens_per_rank(in, c);
  const TensorView idx(const_cast<int64_t*>(in.idx.data()), DType::kI64, {c.tokens, int64_t(c.topk)});
  const TensorView w(const_cast<float*>(in.w.data()), DType::kF32, {c.tokens, int64_t(c.topk)});

  for (int variant = 0; variant < (full ? 3 : 2); ++variant) {
    const bool fp8 = variant == 0, expand = variant == 2;
    const std::string op = fp8 ? "dispatch_fp8" : expand ? "dispatch_bf16_expand" : "dispatch_bf16";
    progress(run, op.c_str());
    ep::DispatchArgs a;
    a.x = fp8 ? TensorView(const_cast<uint8_t*>(in.x8.data()), DType::kF8E4M3, {c.tokens, int64_t(c.hidden)})
              : TensorView(const_cast<uint16_t*>(in.x.data()), DType::kBF16, {c.tokens, int64_t(c.hidden)});
    if (fp8) a.sf = TensorView(const_cast<float*>(in.sf.data()), DType::kF32, {c.tokens, int64_t(in.packs)});
    a.topk_idx = idx;
    a.topk_weights = w;
    a.num_experts = c.experts;
    a.do_expand = expand;
    a.expert_alignment = expand ? 128 : 1;
    Row row = base_row(op, c, c.tokens);
    const ep::DispatchResult first = buf.dispatch(a);
    if (!expand) row.status = check_dispatch(first, c, int(c.tokens), fp8);
    if (row.status.empty()) row.status = "ok";
    // Source-rank counts of what arrived (for the peer's receive sizes).
    std::vector<int64_t> in_tokens;
    int32_t prev = 0;
    for (int32_t p : first.handle->psum_num_recv_tokens_per_scaleup_rank) {
      in_tokens.push_back(p - prev);
      prev = p;
    }
    const double ms = median_call_ms(*run.group, kWarmup, run.reps, [&] { buf.dispatch(a); });
    const int64_t bytes = dispatch_token_bytes(c, fp8);
    add_rows(run, row, ms, remote_sum(scaled(out_tokens, bytes), me), all_sum(scaled(out_tokens, bytes)),
             scaled(out_tokens, bytes), scaled(in_tokens, bytes), ep::ShmPattern::kFanOut);

    if (fp8 || expand) continue;
    // Combine the bf16 dispatch's rows back (identity experts): x = recv_x, which lives in the
    // buffer's shared memory (read in place by the sources), then x = a private copy of it.
    const int64_t cbytes = combine_token_bytes(c);
    const std::vector<uint16_t> private_x(first.recv_x.view.ptr<uint16_t>(),
                                          first.recv_x.view.ptr<uint16_t>() + first.recv_x.view.numel());
    for (const bool in_place : {true, false}) {
      const std::string cop = in_place ? "combine_bf16" : "combine_bf16_private_x";
      progress(run, cop.c_str());
      ep::CombineArgs ca;
      ca.x = in_place ? first.recv_x.view
                      : TensorView(const_cast<uint16_t*>(private_x.data()), DType::kBF16,
                                   {first.recv_x.view.shape[0], first.recv_x.view.shape[1]});
      ca.topk_weights = first.recv_topk_weights.view;
      Row crow = base_row(cop, c, c.tokens);
      const ep::CombineResult combined = buf.combine(ca, *first.handle);
      crow.status = check_combine(combined, in, c);
      if (crow.status.empty()) crow.status = "ok";
      const double cms = median_call_ms(*run.group, kWarmup, run.reps, [&] { buf.combine(ca, *first.handle); });
      add_rows(run, crow, cms, remote_sum(scaled(in_tokens, cbytes), me), all_sum(scaled(in_tokens, cbytes)),
               scaled(in_tokens, cbytes), scaled(out_tokens, cbytes));
    }
  }
  (void)R;
}

void low_latency_cases(Run& run) {
  EpCase c = run.c;
  c.tokens = 128;
  const int me = run.group->rank();
  const EpInputs in = make_ep_inputs(c, me);
  ep::BufferConfig cfg;
  cfg.low_latency_mode = true;
  cfg.num_rdma_bytes = ep::Buffer::get_low_latency_rdma_size_hint(int(c.tokens), c.hidden, c.ranks, c.experts);
  cfg.num_cpu_timeout_secs = 120;
  ep::Buffer buf(run.group, cfg);
  const std::vector<int64_t> out_tokens = tokens_per_rank(in, c);
  ep::LowLatencyDispatchArgs a;
  a.x = TensorView(const_cast<uint16_t*>(in.x.data()), DType::kBF16, {c.tokens, int64_t(c.hidden)});
  a.topk_idx = TensorView(const_cast<int64_t*>(in.idx.data()), DType::kI64, {c.tokens, int64_t(c.topk)});
  a.num_max_dispatch_tokens_per_rank = int(c.tokens);
  a.num_experts = c.experts;
  // The bf16 dispatch feeds the combine (identity experts) and is checked row by row.
  progress(run, "ll_dispatch_fp8, ll_combine_bf16");
  a.use_fp8 = false;
  const ep::LowLatencyDispatchResult plain = buf.low_latency_dispatch(a);
  std::vector<int64_t> in_tokens(size_t(c.ranks), 0);
  const int64_t* range = plain.handle->layout_range.view.ptr<int64_t>();
  const int epr = c.experts / c.ranks;
  std::vector<EpInputs> all;
  for (int s = 0; s < c.ranks; ++s) all.push_back(s == me ? in : make_ep_inputs(c, s));
  std::string status = "ok";
  for (int e = 0; e < epr; ++e) {
    const int32_t n = plain.recv_count.view.ptr<int32_t>()[e];
    for (int i = 0; i < n && status == "ok"; ++i) {
      const int64_t row = int64_t(e) * plain.recv_x.view.strides[0] / c.hidden + i;
      const int32_t t = plain.handle->src_info.view.ptr<int32_t>()[e * plain.handle->src_info.view.strides[0] + i];
      int src = 0;
      while (src + 1 < c.ranks && (range[e * c.ranks + src + 1] >> 32) <= i) ++src;
      if (std::memcmp(plain.recv_x.view.ptr<uint16_t>() + row * c.hidden,
                      &all[size_t(src)].x[size_t(t) * size_t(c.hidden)], size_t(c.hidden) * 2) != 0)
        status = "wrong result: low-latency row " + std::to_string(i) + " of expert " + std::to_string(e);
    }
  }
  // Distinct tokens per source (what the transport moved to this rank).
  std::vector<std::vector<bool>> seen(size_t(c.ranks), std::vector<bool>(size_t(c.tokens), false));
  for (int e = 0; e < epr; ++e)
    for (int s = 0; s < c.ranks; ++s) {
      const int64_t first_row = range[e * c.ranks + s] >> 32, count = range[e * c.ranks + s] & 0xFFFFFFFF;
      for (int64_t i = first_row; i < first_row + count; ++i)
        seen[size_t(s)]
            [size_t(plain.handle->src_info.view.ptr<int32_t>()[e * plain.handle->src_info.view.strides[0] + i])] = true;
    }
  for (int s = 0; s < c.ranks; ++s)
    for (bool b : seen[size_t(s)]) in_tokens[size_t(s)] += b;

  a.use_fp8 = true;
  Row row = base_row("ll_dispatch_fp8", c, c.tokens);
  row.status = status;
  const double ms = median_call_ms(*run.group, kWarmup, run.reps * 5, [&] { buf.low_latency_dispatch(a); });
  const int64_t bytes = dispatch_token_bytes(c, true);
  // The layout's floor: one e4m3 row and its scales per (token, expert on another rank) - what the
  // limit's pattern moves; rows for this rank's own experts are left out, so the floor stays below
  // what any implementation can take.
  const double layout_bytes =
      double(std::count_if(in.idx.begin(), in.idx.end(), [&](int64_t e) { return e >= 0 && e / epr != me; })) *
      double(c.hidden + c.hidden / 128 * 4);
  add_rows(run, row, ms, remote_sum(scaled(out_tokens, bytes), me), all_sum(scaled(out_tokens, bytes)),
           scaled(out_tokens, bytes), scaled(in_tokens, bytes), std::nullopt, layout_bytes);

  // Combine: the rows of the bf16 dispatch, weighted by this rank's topk weights.
  const ep::LowLatencyDispatchResult fresh = [&] {
    a.use_fp8 = false;
    return buf.low_latency_dispatch(a);
  }();
  std::vector<uint16_t> y(size_t(fresh.recv_x.view.shape[0] * fresh.recv_x.view.shape[1] * c.hidden));
  std::memcpy(y.data(), fresh.recv_x.view.data, y.size() * 2);
  ep::LowLatencyCombineArgs ca;
  ca.x =
      TensorView(y.data(), DType::kBF16, {fresh.recv_x.view.shape[0], fresh.recv_x.view.shape[1], int64_t(c.hidden)});
  ca.topk_idx = a.topk_idx;
  ca.topk_weights = TensorView(const_cast<float*>(in.w.data()), DType::kF32, {c.tokens, int64_t(c.topk)});
  Row crow = base_row("ll_combine_bf16", c, c.tokens);
  const ep::LowLatencyCombineResult out = buf.low_latency_combine(ca, *fresh.handle);
  crow.status = "ok";
  for (int64_t t = 0; t < c.tokens && crow.status == "ok"; ++t)
    for (int hh = 0; hh < c.hidden; ++hh) {
      float acc = 0.0f;
      for (int k = 0; k < c.topk; ++k) {
        const float product = in.w[size_t(t * c.topk + k)] * bf16_to_f32(in.x[size_t(t * c.hidden + hh)]);
        acc += product;
      }
      if (out.combined_x.view.ptr<uint16_t>()[t * c.hidden + hh] != f32_to_bf16(acc)) {
        crow.status = "wrong result: low-latency combined token " + std::to_string(t);
        break;
      }
    }
  const double cms =
      median_call_ms(*run.group, kWarmup, run.reps * 5, [&] { buf.low_latency_combine(ca, *fresh.handle); });
  // Combine moves one row per (token, local expert): count lanes per destination rank.
  std::vector<int64_t> lanes_out(size_t(c.ranks), 0), lanes_in(size_t(c.ranks), 0);
  for (int64_t v : in.idx) ++lanes_out[size_t(v / epr)];
  for (int e = 0; e < epr; ++e)
    for (int s = 0; s < c.ranks; ++s) lanes_in[size_t(s)] += range[e * c.ranks + s] & 0xFFFFFFFF;
  const int64_t row_bytes = int64_t(c.hidden) * 2;
  add_rows(run, crow, cms, remote_sum(scaled(lanes_in, row_bytes), me), all_sum(scaled(lanes_in, row_bytes)),
           scaled(lanes_in, row_bytes), scaled(lanes_out, row_bytes));
}

}  // namespace

std::vector<Row> run_ep_bench(const Options& options, const MachineLimits&) {
  if (!launched_by_mpirun()) {
    std::fprintf(stderr, "tessera bench ep: skipped: run it under mpirun, e.g. `mpirun -np 2 tessera bench ep`\n");
    return {};
  }
  Run run;
  run.group = ep::Group::world();
  if (run.group->size() < 2) {
    std::fprintf(stderr, "tessera bench ep: skipped: needs at least 2 ranks (mpirun -np 2 ...)\n");
    return {};
  }
  if (run.group->rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    std::fprintf(stderr, "tessera bench ep: rank %d could not silence its stdout\n", run.group->rank());
  run.c.ranks = run.group->size();
  if (run.group->rank() == 0) std::fprintf(stderr, "tessera bench ep: %s\n", run.group->topology().describe().c_str());
  try {
    normal_cases(run, options.full);
    low_latency_cases(run);
  } catch (const std::exception& e) {
    Row r = base_row("error", run.c, run.c.tokens);
    r.status = std::string("error: ") + e.what();
    run.rows.push_back(r);
  }
  if (run.group->rank() == 0 && !run.limits.empty()) {
    std::string list;
    char buf[32];
    for (double l : run.limits) {
      std::snprintf(buf, sizeof buf, "%s%.1f", list.empty() ? "" : ", ", l);
      list += buf;
    }
    std::fprintf(stderr, "tessera bench ep: shm copy limit measured after each case: %s GB/s per rank\n", list.c_str());
  }
  return run.rows;
}

}  // namespace tessera::bench
