// Buffer (v1) low-latency dispatch and combine (decode). The sender casts each token once (FP8 with
// per-128 scales, optionally powers of two / UE8M0), sends it once to every rank holding one of its
// experts (direct mode), and the receiver fans it out into the masked per-expert layout
// [E_local, R * max, H]: expert e's rows are its tokens ordered by source rank, then source token.
// Combine sends each (token, local expert) row back; the source sums w * y over lanes in order.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ep/common/active_kernels.h"
#include "ep/common/input_checks.h"
#include "ep/common/owned_tensor.h"
#include "ep/common/parallel_range.h"
#include "ep/legacy/state.h"
#include "tessera/core/error.h"
#include "tessera/core/memory.h"

namespace tessera::ep {
namespace {

using namespace detail;

constexpr const char* kDispatch = "Buffer.low_latency_dispatch";
constexpr const char* kCombine = "Buffer.low_latency_combine";

// One of the two alternating output blocks, grown on demand. Not pre-faulted on purpose: the layout
// is mostly empty rows, and only the rows a call writes should cost memory.
std::shared_ptr<void> ll_block(std::shared_ptr<void>& slot, size_t& have, size_t need) {
  if (!slot || have < need) {
    void* p = aligned_alloc_bytes(std::max<size_t>(need, 64));
    slot = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    have = need;
  }
  return slot;
}

}  // namespace

LowLatencyDispatchResult Buffer::low_latency_dispatch(const LowLatencyDispatchArgs& a) {
  Comm& comm = st_->start(kDispatch);
  TESSERA_CHECK(st_->config.low_latency_mode, kDispatch, ": the buffer was created with low_latency_mode=False");
  const Topology& topo = st_->group->topology();
  const int R = topo.num_ranks, me = topo.rank;
  check_defined(kDispatch, "x", a.x);
  check_dtype(kDispatch, "x", a.x, {DType::kBF16});
  check_ndim(kDispatch, "x", a.x, {2});
  const int64_t T = a.x.shape[0], H = a.x.shape[1];
  const int num_max = a.num_max_dispatch_tokens_per_rank;
  TESSERA_CHECK(H > 0 && a.x.strides[1] == 1, kDispatch, ": argument 'x' must have contiguous rows, got strides ",
                a.x.strides_str());
  TESSERA_CHECK(num_max > 0 && T <= num_max, kDispatch, ": argument 'x' has ", T,
                " tokens, more than num_max_dispatch_tokens_per_rank=", num_max);
  TESSERA_CHECK(!a.use_ue8m0 || a.round_scale, kDispatch, ": use_ue8m0=True needs round_scale=True");
  TESSERA_CHECK(!a.use_fp8 || H % (a.use_ue8m0 ? 512 : 128) == 0, kDispatch, ": FP8 dispatch needs hidden to be a ",
                "multiple of ", a.use_ue8m0 ? 512 : 128, " (scales per 128 channels",
                a.use_ue8m0 ? ", 4 per int32" : "", "), got ", H);
  TESSERA_CHECK(H % 8 == 0, kDispatch, ": hidden must be a multiple of 8, got ", H);
  struct Op {
    std::shared_ptr<Routing> routing;
    DispatchPlan plan;
    DispatchState ds;
    uint64_t seq = 0;
    LowLatencyDispatchResult out;
    TensorView stats;
  };
  auto op = std::make_shared<Op>();
  op->routing = std::make_shared<Routing>(route_topk(kDispatch, a.topk_idx, a.num_experts, R));
  const Routing& r = *op->routing;
  TESSERA_CHECK(r.num_tokens == T, kDispatch, ": arguments 'x' ", a.x.shape_str(), " and 'topk_idx' ",
                a.topk_idx.shape_str(), " must have the same number of tokens");
  const int epr = r.experts_per_rank, K = r.num_topk;
  if (given(a.cumulative_local_expert_recv_stats)) {
    const TensorView& s = a.cumulative_local_expert_recv_stats;
    check_dtype(kDispatch, "cumulative_local_expert_recv_stats", s, {DType::kI32});
    check_ndim(kDispatch, "cumulative_local_expert_recv_stats", s, {1});
    TESSERA_CHECK(s.shape[0] == epr, kDispatch, ": argument 'cumulative_local_expert_recv_stats' must have ", epr,
                  " entries, got ", s.shape_str());
    op->stats = s;
  }
  // Cast once per token on the sending side.
  const int64_t packs = a.use_fp8 ? (a.use_ue8m0 ? H / 512 : H / 128) : 0;
  const int64_t x_bytes = a.use_fp8 ? H : 2 * H;
  TokenRows& own = op->plan.own;
  own.count = T;
  own.idx = r.idx.data();
  own.idx_stride = K;
  own.meta_stride = K;
  if (a.use_fp8) {
    // Grow-only: after the first call no allocation and no zero-fill, only the cast's own writes.
    std::vector<uint8_t>& cast = st_->ll_cast;
    std::vector<char>& scales = st_->ll_cast_scales;
    if (cast.size() < size_t(T * H)) cast.resize(size_t(T * H));
    if (scales.size() < size_t(T * packs * 4)) scales.resize(size_t(T * packs * 4));
    const cpu::EpKernels& k = kernels();
    const uint16_t* x = a.x.ptr<uint16_t>();
    parallel_range(comm.threads(), T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        char* sc = scales.data() + t * packs * 4;
        k.cast_e4m3(cast.data() + t * H, a.use_ue8m0 ? nullptr : reinterpret_cast<float*>(sc),
                    a.use_ue8m0 ? reinterpret_cast<uint8_t*>(sc) : nullptr, x + t * a.x.strides[0], H, a.round_scale);
      }
    });
    own.x = reinterpret_cast<const char*>(cast.data());
    own.x_stride = H;
    own.sf = scales.data();
    own.sf_stride = packs * 4;
  } else {
    own.x = static_cast<const char*>(a.x.data);
    own.x_stride = a.x.strides[0] * 2;
  }
  DispatchPlan& plan = op->plan;
  plan.routing = &r;
  plan.rec = DispatchRecord::make(x_bytes, packs, K);
  plan.hidden_bytes = x_bytes;
  plan.sf_bytes = packs * 4;
  plan.num_max = num_max;
  plan.mode = Mode::kDirect;

  // Outputs: the next of the two alternating blocks.
  const int64_t rows = int64_t(R) * num_max;
  const int slot = st_->ll_next;
  st_->ll_next ^= 1;
  const size_t xb = size_t(epr * rows * x_bytes), sb = size_t(epr * rows * packs * 4);
  auto xblock = ll_block(st_->ll_x[slot], st_->ll_x_bytes[slot], xb);
  op->out.recv_x = owned_view(xblock, a.use_fp8 ? DType::kF8E4M3 : DType::kBF16, {epr, rows, H}, {rows * H, H, 1});
  if (a.use_fp8) {
    auto sblock = ll_block(st_->ll_scales[slot], st_->ll_scales_bytes[slot], std::max<size_t>(sb, 4));
    op->out.recv_scales =
        owned_view(sblock, a.use_ue8m0 ? DType::kI32 : DType::kF32, {epr, rows, packs}, {rows * packs, 1, rows});
  }
  op->out.recv_count = allocate_tensor(DType::kI32, {int64_t(epr)});
  op->out.handle = std::make_shared<LowLatencyHandle>();
  LowLatencyHandle& h = *op->out.handle;
  h.num_max_dispatch_tokens_per_rank = num_max;
  h.hidden = int(H);
  h.num_experts = a.num_experts;
  h.src_info = allocate_tensor(DType::kI32, {int64_t(epr), rows});
  h.layout_range = allocate_tensor(DType::kI64, {int64_t(epr), int64_t(R)});

  op->seq = comm.begin(kDispatch);
  dispatch_send(comm, op->seq, plan, op->ds);
  LegacyState* st = st_.get();
  auto finish = [op, st, &comm, me, R, epr, K, rows, x_bytes, packs] {
    dispatch_receive(comm, op->seq, op->plan, op->ds);
    LowLatencyHandle& hh = *op->out.handle;
    auto data = std::make_shared<LowLatencyHandleData>();
    data->owner = st;
    data->routing = op->routing;
    data->lanes = std::max(1, std::min(K, epr));
    data->lane_rows.resize(size_t(R));
    int32_t* count = op->out.recv_count.view.ptr<int32_t>();
    int32_t* src_info = hh.src_info.view.ptr<int32_t>();
    int64_t* range = hh.layout_range.view.ptr<int64_t>();
    std::fill_n(count, epr, 0);
    std::fill_n(src_info, epr * rows, -1);
    // Row assignment (sequential, small): expert rows by (source rank, source token).
    for (int s = 0; s < R; ++s) {
      const GroupData& g = op->ds.groups[size_t(s)];
      data->recv_count.push_back(g.count);
      auto& lanes = data->lane_rows[size_t(s)];
      lanes.assign(size_t(g.count * data->lanes), -1);
      std::vector<int32_t> first(static_cast<size_t>(epr));
      for (int e = 0; e < epr; ++e) first[size_t(e)] = count[e];
      for (int64_t i = 0; i < g.count; ++i) {
        const int64_t t = g.token(i);
        int m = 0;
        for (int k = 0; k < K; ++k) {
          const int64_t e = g.rows.idx[t * g.rows.idx_stride + k];
          if (e < 0 || e / epr != me) continue;
          const int le = int(e - int64_t(me) * epr);
          const int32_t pos = count[le]++;
          src_info[le * rows + pos] = g.rows.src_token(t);
          lanes[size_t(i * data->lanes + m++)] = int32_t(le * rows + pos);
        }
      }
      for (int e = 0; e < epr; ++e)
        range[e * R + s] = (int64_t(first[size_t(e)]) << 32) | int64_t(count[e] - first[size_t(e)]);
    }
    // Copies: each received token into each of its local experts' rows. Scale packs go to a compact
    // [row][packs] list first (rows in expert order from staged_first), then out pack plane by pack plane:
    // the layout keeps a row's packs `rows` apart, so writing them row by row touched one line per
    // pack (15% of a 128-token FP8 dispatch).
    char* x = static_cast<char*>(op->out.recv_x.view.data);
    char* sc = op->out.recv_scales.defined() ? static_cast<char*>(op->out.recv_scales.view.data) : nullptr;
    const int64_t pack_bytes = packs * 4;
    std::vector<int64_t> staged_first(size_t(epr) + 1, 0);  // expert e's rows start at staged_first[e]
    for (int e = 0; e < epr; ++e) staged_first[size_t(e) + 1] = staged_first[size_t(e)] + count[e];
    std::vector<char>& staged = st->ll_staged;  // grow-only, like the cast
    if (sc && staged.size() < size_t(staged_first[size_t(epr)] * pack_bytes))
      staged.resize(size_t(staged_first[size_t(epr)] * pack_bytes));
    for (int s = 0; s < R; ++s) {
      const GroupData& g = op->ds.groups[size_t(s)];
      const auto& lanes = data->lane_rows[size_t(s)];
      parallel_range(comm.threads(), g.count, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t t = g.token(i);
          for (int m = 0; m < data->lanes; ++m) {
            const int32_t flat = lanes[size_t(i * data->lanes + m)];
            if (flat < 0) break;
            // Plain stores: steady-state calls rewrite the same rows, which stay in L3 (streaming
            // stores were slower; measurements: docs/notes/2026-12-05-measurements-moved-from-source.md).
            std::memcpy(x + int64_t(flat) * x_bytes, g.rows.x + t * g.rows.x_stride, size_t(x_bytes));
            if (sc)
              std::memcpy(&staged[size_t((staged_first[size_t(flat / rows)] + flat % rows) * pack_bytes)],
                          g.rows.sf + t * g.rows.sf_stride, size_t(pack_bytes));
          }
        }
      });
    }
    if (sc)
      parallel_range(comm.threads(), epr, [&](int64_t e0, int64_t e1) {
        for (int64_t le = e0; le < e1; ++le)
          for (int64_t p = 0; p < packs; ++p) {
            char* plane = sc + (le * packs + p) * rows * 4;
            for (int64_t pos = 0; pos < count[le]; ++pos)
              std::memcpy(plane + pos * 4, &staged[size_t((staged_first[size_t(le)] + pos) * pack_bytes + p * 4)], 4);
          }
      });
    if (op->stats.data)
      for (int e = 0; e < epr; ++e) op->stats.ptr<int32_t>()[e * op->stats.strides[0]] += count[e];
    hh.data = data;
    transport_finish(comm, op->seq);
  };
  return st_->pending.defer_result(finish, a.async || a.return_recv_hook, op->out);
}

LowLatencyCombineResult Buffer::low_latency_combine(const LowLatencyCombineArgs& a, const LowLatencyHandle& handle) {
  Comm& comm = st_->start(kCombine);
  TESSERA_CHECK(handle.data && handle.data->owner == st_.get(), kCombine,
                ": argument 'handle' was made by another buffer, or its dispatch was not received yet (call the "
                "dispatch's hook or wait for its event first)");
  const LowLatencyHandleData& h = *handle.data;
  const Routing& r = *h.routing;
  const int R = st_->group->size(), epr = r.experts_per_rank, K = r.num_topk;
  const int64_t T = r.num_tokens, H = handle.hidden, rows = int64_t(R) * handle.num_max_dispatch_tokens_per_rank;
  check_defined(kCombine, "x", a.x);
  check_dtype(kCombine, "x", a.x, {DType::kBF16});
  check_ndim(kCombine, "x", a.x, {3});
  TESSERA_CHECK(a.x.shape[0] == epr && a.x.shape[1] == rows && a.x.shape[2] == H && a.x.strides[2] == 1, kCombine,
                ": argument 'x' must be [", epr, ", ", rows, ", ", H, "] with contiguous rows, got ", a.x.shape_str(),
                " strides ", a.x.strides_str());
  check_ndim(kCombine, "topk_idx", a.topk_idx, {2});
  check_dtype(kCombine, "topk_idx", a.topk_idx, {DType::kI64});
  TESSERA_CHECK(a.topk_idx.shape[0] == T && a.topk_idx.shape[1] == K, kCombine, ": argument 'topk_idx' must be the ",
                "dispatch's [", T, ", ", K, "], got ", a.topk_idx.shape_str());
  for (int64_t t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k)
      TESSERA_CHECK(
          a.topk_idx.ptr<int64_t>()[t * a.topk_idx.strides[0] + k * a.topk_idx.strides[1]] == r.idx[size_t(t * K + k)],
          kCombine, ": argument 'topk_idx' differs from the dispatch's at [", t, ", ", k, "]");
  struct Op {
    CombinePlan plan;
    CombineSource src;
    CombineState cs;
    std::vector<float> w;
    std::vector<const uint16_t*> self_rows;  // this rank's expert outputs for its own tokens, read in place
    std::shared_ptr<const LowLatencyHandleData> data;
    uint64_t seq = 0;
    LowLatencyCombineResult out;
  };
  auto op = std::make_shared<Op>();
  op->data = handle.data;
  op->w = contiguous_f32(kCombine, "topk_weights", a.topk_weights, T, K);
  if (given(a.out)) {
    check_dtype(kCombine, "out", a.out, {DType::kBF16});
    check_ndim(kCombine, "out", a.out, {2});
    TESSERA_CHECK(a.out.shape[0] == T && a.out.shape[1] == H && a.out.strides[1] == 1, kCombine,
                  ": argument 'out' must be [", T, ", ", H, "] with contiguous rows, got ", a.out.shape_str());
    op->out.combined_x.view = a.out;
  } else {
    op->out.combined_x = allocate_tensor(DType::kBF16, {T, H});
  }
  CombinePlan& plan = op->plan;
  plan.rec = CombineRecord::make(H, h.lanes, 0);
  plan.hidden = H;
  plan.num_max = handle.num_max_dispatch_tokens_per_rank;
  plan.num_topk = K;
  plan.mode = Mode::kDirect;
  plan.order = CombineOrder::kPerLane;
  plan.weighted = true;
  plan.counts = h.recv_count;
  const char* x = static_cast<const char*>(a.x.data);
  const int64_t s0 = a.x.strides[0] * 2, s1 = a.x.strides[1] * 2, row_bytes = H * 2;
  const LowLatencyHandleData* hd = &h;
  const int64_t lane_pitch = plan.rec.row_bytes;
  plan.fill = [x, s0, s1, rows, row_bytes, hd, lane_pitch](int s, int64_t j0, int64_t j1, char* out_rows, int64_t pitch,
                                                           float*, int64_t, bool) {
    const auto& lanes = hd->lane_rows[size_t(s)];
    for (int64_t j = j0; j < j1; ++j)
      for (int m = 0; m < hd->lanes; ++m) {
        const int32_t flat = lanes[size_t(j * hd->lanes + m)];
        if (flat < 0) break;
        std::memcpy(out_rows + (j - j0) * pitch + m * lane_pitch, x + (flat / rows) * s0 + (flat % rows) * s1,
                    size_t(row_bytes));
      }
  };
  // This rank's own tokens: their rows are read where the experts wrote them.
  const int me = st_->group->rank();
  const auto& own_lanes = h.lane_rows[size_t(me)];
  op->self_rows.resize(own_lanes.size());
  for (size_t i = 0; i < own_lanes.size(); ++i)
    op->self_rows[i] =
        own_lanes[i] < 0
            ? nullptr
            : reinterpret_cast<const uint16_t*>(x + (own_lanes[i] / rows) * s0 + (own_lanes[i] % rows) * s1);
  plan.self_lane_rows = &op->self_rows;
  op->src.routing = &r;
  op->src.lane_weights = &op->w;
  op->seq = comm.begin(kCombine);
  combine_send(comm, op->seq, plan, op->src, op->cs);
  auto finish = [op, &comm] {
    combine_receive(comm, op->seq, op->plan, op->src, op->cs, op->out.combined_x.view, TensorView(), TensorView(),
                    TensorView());
    transport_finish(comm, op->seq);
  };
  return st_->pending.defer_result(finish, a.async || a.return_recv_hook, op->out);
}

}  // namespace tessera::ep
