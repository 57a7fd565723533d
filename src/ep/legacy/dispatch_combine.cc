// Buffer (v1) normal dispatch and combine: routing from is_token_in_rank, direct mode, rows grouped by
// source rank then source token, combine summed in ascending rank order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/common/active_kernels.h"
#include "ep/common/input_checks.h"
#include "ep/common/unpack.h"
#include "ep/legacy/state.h"
#include "ep/transport/group_state.h"
#include "ep/transport/output_arena.h"
#include "tessera/core/error.h"

namespace tessera::ep {
namespace {

using namespace detail;

constexpr const char* kDispatch = "Buffer.dispatch";
constexpr const char* kCombine = "Buffer.combine";

// Slot capacity of a group for records of `per_token` bytes (the same on every rank).
int64_t capacity_for(const Comm& comm, const char* fn, int64_t per_token, int64_t needed) {
  const int64_t cap = comm.group_bytes() / per_token;
  if (needed > cap)
    fail(ErrorCode::kInvalidArgument, fn, ": the buffer is too small: ", needed, " tokens of ", per_token,
         " bytes need ", needed * per_token, " bytes per source rank, it has ", comm.group_bytes(),
         "; create the Buffer with num_nvl_bytes >= ", needed * per_token * comm.topo().num_ranks);
  return cap;
}

void check_layout(const LegacyDispatchArgs& a, const Routing& r, int R) {
  check_dtype(kDispatch, "num_tokens_per_rank", a.num_tokens_per_rank, {DType::kI32});
  check_ndim(kDispatch, "num_tokens_per_rank", a.num_tokens_per_rank, {1});
  TESSERA_CHECK(a.num_tokens_per_rank.shape[0] == R, kDispatch, ": argument 'num_tokens_per_rank' must have ", R,
                " entries, got ", a.num_tokens_per_rank.shape_str());
  for (int d = 0; d < R; ++d) {
    const int32_t n = a.num_tokens_per_rank.ptr<int32_t>()[d * a.num_tokens_per_rank.strides[0]];
    TESSERA_CHECK(n == r.sent_tokens(d), kDispatch, ": num_tokens_per_rank[", d, "] = ", n,
                  " but is_token_in_rank sends ", r.sent_tokens(d), " tokens there");
  }
  // With topk_idx the per-expert counts (which size every receiver's expert lists) must be its own.
  if (r.idx.empty()) return;
  const TensorView& per_expert = a.num_tokens_per_expert;
  std::vector<int64_t> counted(size_t(per_expert.shape[0]), 0);
  for (int64_t e : r.idx)
    if (e >= 0 && e < int64_t(counted.size())) ++counted[size_t(e)];
  for (size_t e = 0; e < counted.size(); ++e) {
    const int32_t n = per_expert.ptr<int32_t>()[int64_t(e) * per_expert.strides[0]];
    TESSERA_CHECK(n == counted[e], kDispatch, ": num_tokens_per_expert[", e, "] = ", n, " but topk_idx routes ",
                  counted[e], " tokens to expert ", e, " (get_dispatch_layout computes it)");
  }
}

// Every rank's num_tokens_per_rank and num_tokens_per_expert, gathered once per fresh dispatch: they
// give DeepEP's rank prefix matrix (the handle's first element) and this rank's per-expert receive
// counts, which a dispatch without topk_idx cannot count from the records (they carry no experts) and
// an asynchronous one would only know once its event was waited on.
struct GatheredLayout {
  std::vector<int32_t> rank_prefix;  // [R * R]: tokens ranks 0..i send to rank j, at i * R + j
  std::vector<int> expert_counts;    // per local expert, aligned up to expert_alignment
};

GatheredLayout gather_layout(const Comm& comm, const LegacyDispatchArgs& a, int R, int me) {
  const TensorView& per_expert = a.num_tokens_per_expert;
  const int E = int(per_expert.shape[0]);
  TESSERA_CHECK(E % R == 0, kDispatch, ": argument 'num_tokens_per_expert' must have a multiple of the ", R,
                " ranks entries (experts), got ", per_expert.shape_str());
  const size_t row = size_t(R + E);
  std::vector<int32_t> mine(row), all(row * size_t(R));
  for (int d = 0; d < R; ++d)
    mine[size_t(d)] = a.num_tokens_per_rank.ptr<int32_t>()[d * a.num_tokens_per_rank.strides[0]];
  for (int e = 0; e < E; ++e) mine[size_t(R + e)] = per_expert.ptr<int32_t>()[e * per_expert.strides[0]];
  comm.group().state().net->allgather(mine.data(), all.data(), row * sizeof(int32_t), comm.timeout_s(),
                                      "Buffer.dispatch: layout gather");
  GatheredLayout g;
  g.rank_prefix.assign(size_t(R) * size_t(R), 0);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < R; ++j)
      g.rank_prefix[size_t(i * R + j)] =
          (i ? g.rank_prefix[size_t((i - 1) * R + j)] : 0) + all[size_t(i) * row + size_t(j)];
  const int per_rank = E / R, align = a.expert_alignment;
  for (int e = 0; e < per_rank; ++e) {
    int64_t n = 0;
    for (int s = 0; s < R; ++s) n += all[size_t(s) * row + size_t(R + me * per_rank + e)];
    g.expert_counts.push_back(int((n + align - 1) / align * align));
  }
  return g;
}

}  // namespace

LegacyDispatchResult Buffer::dispatch(const LegacyDispatchArgs& a) {
  Comm& comm = st_->start(kDispatch);
  const Topology& topo = st_->group->topology();
  const int R = topo.num_ranks, me = topo.rank;
  const TokenInput in = check_tokens(kDispatch, a.x, a.sf);
  TESSERA_CHECK(a.expert_alignment >= 1, kDispatch, ": argument 'expert_alignment' must be >= 1, got ",
                a.expert_alignment);
  TESSERA_CHECK(a.num_worst_tokens >= 0, kDispatch, ": argument 'num_worst_tokens' must be >= 0");
  struct Op {
    std::shared_ptr<const Routing> routing;
    std::vector<char> sf;  // scale packs / weights made contiguous (when the inputs were not)
    std::vector<float> w;
    DispatchPlan plan;
    DispatchState ds;
    uint64_t seq = 0;
    bool received = false;
    LegacyDispatchResult out;
    int64_t rows = 0;
    std::vector<char*> direct_x;  // direct receive: where this rank's rows go at each destination
  };
  auto op = std::make_shared<Op>();
  const bool cached = a.handle != nullptr;
  const float* own_w = nullptr;  // this rank's topk_weights rows, when given
  if (cached) {
    const LegacyHandleData& h = *a.handle->data;
    TESSERA_CHECK(h.owner == st_.get(), kDispatch, ": argument 'handle' was made by another buffer");
    TESSERA_CHECK(!given(a.topk_idx) && !given(a.topk_weights), kDispatch,
                  ": topk_idx and topk_weights must be None with a cached handle");
    // The handle fixes the routing only: as in DeepEP, a cached dispatch may send another dtype or
    // hidden size (FP8 first, then BF16 with the same layout); every rank passes the same x.
    TESSERA_CHECK(in.tokens == h.routing->num_tokens, kDispatch, ": argument 'x' ", a.x.shape_str(),
                  " must have the cached dispatch's ", h.routing->num_tokens, " tokens");
    op->routing = h.routing;
    op->out.handle = std::const_pointer_cast<LegacyHandle>(a.handle);
    op->rows = a.handle->num_recv_tokens;
  } else {
    TESSERA_CHECK(given(a.num_tokens_per_rank) && given(a.is_token_in_rank) && given(a.num_tokens_per_expert),
                  kDispatch, ": num_tokens_per_rank, is_token_in_rank and num_tokens_per_expert are required ",
                  "without a cached handle (get_dispatch_layout computes them)");
    check_dtype(kDispatch, "num_tokens_per_expert", a.num_tokens_per_expert, {DType::kI32});
    check_ndim(kDispatch, "num_tokens_per_expert", a.num_tokens_per_expert, {1});
    const int num_experts = int(a.num_tokens_per_expert.shape[0]);
    TESSERA_CHECK(a.is_token_in_rank.ndim == 2 && a.is_token_in_rank.shape[0] == in.tokens, kDispatch,
                  ": argument 'is_token_in_rank' must be [", in.tokens, ", ", R, "], got ",
                  a.is_token_in_rank.shape_str());
    op->routing = std::make_shared<Routing>(route_mask(kDispatch, a.is_token_in_rank, a.topk_idx, num_experts, R));
    check_layout(a, *op->routing, R);
    if (given(a.topk_weights)) {
      TESSERA_CHECK(given(a.topk_idx), kDispatch, ": topk_weights needs topk_idx");
      own_w = f32_rows(kDispatch, "topk_weights", a.topk_weights, in.tokens, op->routing->num_topk, &op->w);
    }
    op->out.handle = std::make_shared<LegacyHandle>();
    GatheredLayout gathered = gather_layout(comm, a, R, me);
    op->out.handle->rank_prefix_matrix = std::move(gathered.rank_prefix);
    // DeepEP returns no counts with num_worst_tokens (the outputs are sized without a CPU sync).
    if (a.num_worst_tokens == 0) op->out.num_recv_tokens_per_expert_list = std::move(gathered.expert_counts);
  }
  const Routing& r = *op->routing;
  // Contiguous scale packs and weights are read in place (copied only when strided: a copy of 0.9 MB of
  // packs for 4096 FP8 tokens per call).
  const char* own_sf = in.fp8 ? packs_rows(a.sf, in.tokens, in.packs, &op->sf) : nullptr;
  DispatchPlan& plan = op->plan;
  plan.routing = &r;
  plan.rec = DispatchRecord::make(in.hidden_bytes, in.packs, r.num_topk);
  plan.hidden_bytes = in.hidden_bytes;
  plan.sf_bytes = in.packs * 4;
  plan.num_max = capacity_for(comm, kDispatch, plan.rec.per_token(), in.tokens);
  plan.mode = Mode::kDirect;
  plan.own.count = in.tokens;
  plan.own.x = static_cast<const char*>(a.x.data);
  plan.own.x_stride = a.x.strides[0] * dtype_storage_bytes(a.x.dtype);
  plan.own.sf = own_sf;
  plan.own.sf_stride = in.packs * 4;
  plan.own.idx = r.idx.empty() ? nullptr : r.idx.data();
  plan.own.idx_stride = r.num_topk;
  plan.own.w = own_w;
  plan.own.meta_stride = r.num_topk;

  op->seq = comm.begin(kDispatch);
  if (a.num_worst_tokens > 0) op->rows = a.num_worst_tokens;
  // Direct receive (as ElasticBuffer.dispatch): with every rank on this node and an output arena, the
  // counts go first and every sender writes its x rows straight into the receivers' recv_x, instead of
  // into the receive region and then a second time into recv_x.
  // (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
  const bool direct = comm.has_arena() && topo.num_nodes == 1;
  if (direct)
    op->out.recv_x = start_direct_receive(comm, op->seq, plan, &op->direct_x, a.x.dtype, in.hidden,
                                          cached || a.num_worst_tokens > 0, &op->rows);
  dispatch_send(comm, op->seq, plan, op->ds);
  if (!cached && a.num_worst_tokens == 0 && !direct) {
    dispatch_receive(comm, op->seq, plan, op->ds);
    op->received = true;
    op->rows = layout_of(op->ds.groups).total;
  }
  const bool with_topk = !cached && r.num_topk > 0;
  if (!op->out.recv_x.defined()) op->out.recv_x = allocate_tensor(a.x.dtype, {op->rows, in.hidden});
  if (in.fp8) op->out.recv_sf = allocate_tensor(a.sf.dtype, {op->rows, in.packs});
  if (with_topk) op->out.recv_topk_idx = allocate_tensor(DType::kI64, {op->rows, int64_t(r.num_topk)});
  if (with_topk && given(a.topk_weights))
    op->out.recv_topk_weights = allocate_tensor(DType::kF32, {op->rows, int64_t(r.num_topk)});

  const LegacyState* st = st_.get();
  auto finish = [op, st, &comm, in, me, cached] {
    if (!op->received) dispatch_receive(comm, op->seq, op->plan, op->ds);
    const Routing& rr = *op->routing;
    const RecvLayout layout = layout_of(op->ds.groups);
    if (layout.total > op->rows)
      fail(ErrorCode::kInvalidArgument, kDispatch, ": ", layout.total, " tokens arrived but the outputs have ",
           op->rows, " rows (num_worst_tokens too small, or a handle from another dispatch)");
    UnpackOut out;
    out.x = static_cast<char*>(op->out.recv_x.view.data);
    out.x_pitch = out.hidden_bytes = in.hidden_bytes;
    if (op->out.recv_sf.defined()) {
      out.sf = static_cast<char*>(op->out.recv_sf.view.data);
      out.sf_row = in.packs * 4;
      out.sf_col = 4;
      out.packs = in.packs;
    }
    out.topk = op->out.recv_topk_idx.defined() ? op->out.recv_topk_idx.view.ptr<int64_t>() : nullptr;
    out.w = op->out.recv_topk_weights.defined() ? op->out.recv_topk_weights.view.ptr<float>() : nullptr;
    out.zero_nonlocal_weights = true;
    const UnpackContext ctx{me, rr.num_topk, rr.experts_per_rank, op->plan.num_max, comm.threads()};
    unpack_non_expand(ctx, op->ds.groups, layout, out);
    // Rows past the valid ones (num_worst_tokens): zero data, -1 experts, 0 weights.
    const int64_t tail = op->rows - layout.total;
    std::memset(out.x + layout.total * in.hidden_bytes, 0, size_t(tail * in.hidden_bytes));
    if (out.sf) std::memset(out.sf + layout.total * out.sf_row, 0, size_t(tail * out.sf_row));
    if (out.topk) std::fill_n(out.topk + layout.total * rr.num_topk, tail * rr.num_topk, -1);
    if (out.w) std::fill_n(out.w + layout.total * rr.num_topk, tail * rr.num_topk, 0.0f);
    if (cached) {
      const LegacyHandleData& h = *op->out.handle->data;
      for (size_t s = 0; s < layout.count.size(); ++s)
        if (layout.count[s] != h.recv_count[s])
          fail(ErrorCode::kRuntime, kDispatch, ": cached dispatch received ", layout.count[s], " tokens from rank ", s,
               ", the handle recorded ", h.recv_count[s]);
    } else {
      auto data = std::make_shared<LegacyHandleData>();
      data->owner = st;
      data->routing = op->routing;
      data->recv_count = layout.count;
      data->recv_base = layout.base;
      data->x_dtype = in.fp8 ? DType::kF8E4M3 : DType::kBF16;
      data->hidden = in.hidden;
      data->sf_packs = in.packs;
      op->out.handle->data = data;
      op->out.handle->num_recv_tokens = layout.total;
    }
    transport_finish(comm, op->seq);
  };
  return st_->pending.defer_result(finish, a.async, op->out);
}

LegacyCombineResult Buffer::combine(const LegacyCombineArgs& a, const LegacyHandle& handle) {
  Comm& comm = st_->start(kCombine);
  TESSERA_CHECK(handle.data && handle.data->owner == st_.get(), kCombine,
                ": argument 'handle' was made by another buffer (or is empty)");
  const LegacyHandleData& h = *handle.data;
  const Routing& r = *h.routing;
  const int64_t N = handle.num_recv_tokens, T = r.num_tokens;
  const int K = r.num_topk;
  check_defined(kCombine, "x", a.x);
  check_dtype(kCombine, "x", a.x, {DType::kBF16});
  check_ndim(kCombine, "x", a.x, {2});
  const int64_t hidden = a.x.shape[1];
  TESSERA_CHECK(hidden > 0 && hidden % 8 == 0 && a.x.strides[1] == 1 && a.x.shape[0] >= N, kCombine,
                ": argument 'x' must be [>= ", N, ", hidden] with contiguous rows and hidden a multiple of 8, got ",
                a.x.shape_str(), " strides ", a.x.strides_str());
  struct Op {
    CombinePlan plan;
    CombineSource src;
    CombineState cs;
    std::vector<float> w;
    std::shared_ptr<const LegacyHandleData> data;
    uint64_t seq = 0;
    LegacyCombineResult out;
    TensorView bias0, bias1;
  };
  auto op = std::make_shared<Op>();
  op->data = handle.data;
  if (given(a.topk_weights)) {
    TESSERA_CHECK(K > 0, kCombine, ": topk_weights needs a dispatch that carried topk_idx");
    TESSERA_CHECK(a.topk_weights.ndim == 2 && a.topk_weights.shape[0] >= N, kCombine, ": argument 'topk_weights' ",
                  "must have at least ", N, " rows, got ", a.topk_weights.shape_str());
    TensorView head = a.topk_weights;
    head.shape[0] = N;
    op->w = contiguous_f32(kCombine, "topk_weights", head, N, K);
  }
  for (const auto& [name, b] : {std::pair<const char*, TensorView>{"bias0", a.bias0}, {"bias1", a.bias1}}) {
    if (!given(b)) continue;
    check_dtype(kCombine, name, b, {DType::kBF16});
    check_ndim(kCombine, name, b, {2});
    TESSERA_CHECK(b.shape[0] == T && b.shape[1] == hidden && b.strides[1] == 1, kCombine, ": argument '", name,
                  "' must be [", T, ", ", hidden, "] with contiguous rows, got ", b.shape_str());
  }
  op->bias0 = a.bias0;
  op->bias1 = a.bias1;
  CombinePlan& plan = op->plan;
  const bool with_w = !op->w.empty();
  plan.rec = CombineRecord::make(hidden, 1, with_w ? K : 0);
  plan.hidden = hidden;
  plan.num_topk = K;
  plan.mode = Mode::kDirect;
  plan.order = CombineOrder::kRanks;
  plan.counts = h.recv_count;
  int64_t most = 0;
  for (int64_t c : h.recv_count) most = std::max(most, c);
  plan.num_max = capacity_for(comm, kCombine, plan.rec.per_token(), std::max(most, T));
  const char* x = static_cast<const char*>(a.x.data);
  const int64_t x_stride = a.x.strides[0] * 2, row_bytes = hidden * 2;
  const std::vector<int64_t> base = h.recv_base;
  const float* w = op->w.data();
  const cpu::EpKernels* kern = &kernels();
  plan.fill = [=](int s, int64_t j0, int64_t j1, char* rows, int64_t pitch, float* wout, int64_t wpitch,
                  bool streaming) {
    for (int64_t j = j0; j < j1; ++j) {
      kern->copy(rows + (j - j0) * pitch, x + (base[size_t(s)] + j) * x_stride, size_t(row_bytes), streaming);
      if (wout) std::memcpy(wout + (j - j0) * wpitch, w + (base[size_t(s)] + j) * K, size_t(K) * 4);
    }
  };
  const int me = st_->group->rank();
  plan.self_rows = x + base[size_t(me)] * x_stride;
  plan.self_stride = x_stride;
  plan.self_w = with_w ? w + base[size_t(me)] * K : nullptr;
  plan.self_w_stride = K;
  op->src.routing = &r;
  op->out.combined_x = allocate_tensor(DType::kBF16, {T, hidden});
  if (with_w) op->out.combined_topk_weights = allocate_tensor(DType::kF32, {T, int64_t(K)});
  // Never in place (no in_place_offset), so start_combine's release step returns at once.
  return start_combine(comm, st_->pending, op, kCombine, a.async);
}

}  // namespace tessera::ep
