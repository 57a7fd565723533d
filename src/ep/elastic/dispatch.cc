// ElasticBuffer::dispatch: validate, route, send (dispatch_send), then receive and unpack into the
// non-expanded or expanded layout, now or when the event is waited on.
#include <algorithm>
#include <cstring>

#include "ep/common/handle_internal.h"
#include "ep/common/input_checks.h"
#include "ep/common/unpack.h"
#include "ep/elastic/state.h"
#include "ep/transport/output_arena.h"
#include "tessera/core/error.h"

namespace tessera::ep {
namespace {

using namespace detail;

constexpr const char* kFn = "ElasticBuffer.dispatch";

struct Resolved {
  bool cached = false, fp8 = false, cpu_sync = true;
  int num_experts = 0, num_max = 0, alignment = 1, num_topk = 0;
  int64_t num_tokens = 0, hidden = 0, hidden_bytes = 0, packs = 0;
};

Resolved resolve(const DispatchArgs& a, const ElasticState& st) {
  Resolved r;
  r.cached = a.handle != nullptr;
  const TokenInput in = check_tokens(kFn, a.x, a.sf);
  r.fp8 = in.fp8;
  r.num_tokens = in.tokens;
  r.hidden = in.hidden;
  r.hidden_bytes = in.hidden_bytes;
  r.packs = in.packs;
  if (r.cached) {
    const EpHandle& h = *a.handle;
    TESSERA_CHECK(h.internal && h.internal->owner == &st, kFn, ": argument 'handle' was made by another buffer");
    TESSERA_CHECK(!a.topk_idx.data && a.topk_idx.ndim == 0, kFn, ": argument 'topk_idx' must be None with a cached ",
                  "handle (the handle's experts are reused)");
    TESSERA_CHECK(!a.do_cpu_sync.value_or(false), kFn, ": do_cpu_sync=True is not allowed with a cached handle");
    TESSERA_CHECK(a.do_expand == h.do_expand, kFn, ": argument 'do_expand' (", a.do_expand,
                  ") must match the cached handle's (", h.do_expand, ")");
    TESSERA_CHECK(a.num_experts == 0 || a.num_experts == h.num_experts, kFn, ": argument 'num_experts' (",
                  a.num_experts, ") differs from the handle's (", h.num_experts, ")");
    TESSERA_CHECK(a.expert_alignment == 0 || a.expert_alignment == h.expert_alignment, kFn,
                  ": argument 'expert_alignment' (", a.expert_alignment, ") differs from the handle's (",
                  h.expert_alignment, ")");
    TESSERA_CHECK(a.num_max_tokens_per_rank == 0 || a.num_max_tokens_per_rank == h.num_max_tokens_per_rank, kFn,
                  ": argument 'num_max_tokens_per_rank' (", a.num_max_tokens_per_rank, ") differs from the handle's (",
                  h.num_max_tokens_per_rank, ")");
    TESSERA_CHECK(r.num_tokens == h.num_tokens, kFn, ": argument 'x' has ", r.num_tokens,
                  " tokens but the cached handle routed ", h.num_tokens);
    TESSERA_CHECK(a.x.dtype == h.internal->x_dtype && r.hidden == h.internal->hidden && r.packs == h.internal->sf_packs,
                  kFn, ": argument 'x' (", dtype_name(a.x.dtype), " ", a.x.shape_str(),
                  ") must have the dtype, hidden size and scale packs of the cached dispatch");
    r.num_experts = h.num_experts;
    r.alignment = h.expert_alignment;
    r.num_max = h.num_max_tokens_per_rank;
    r.num_topk = h.num_topk;
    r.cpu_sync = false;
  } else {
    r.num_experts = a.num_experts;
    r.alignment = a.expert_alignment ? a.expert_alignment : 1;
    r.num_max = a.num_max_tokens_per_rank ? a.num_max_tokens_per_rank : st.config.num_max_tokens_per_rank;
    r.cpu_sync = a.do_cpu_sync.value_or(true);
    TESSERA_CHECK(r.num_experts > 0, kFn, ": argument 'num_experts' must be given (> 0) without a cached handle");
    check_ndim(kFn, "topk_idx", a.topk_idx, {2});
    r.num_topk = int(a.topk_idx.shape[1]);
    TESSERA_CHECK(a.topk_idx.shape[0] == r.num_tokens, kFn, ": arguments 'x' ", a.x.shape_str(), " and 'topk_idx' ",
                  a.topk_idx.shape_str(), " must have the same number of tokens");
  }
  TESSERA_CHECK(r.num_max > 0, kFn, ": num_max_tokens_per_rank must be > 0 (give it here or to the buffer)");
  TESSERA_CHECK(r.alignment > 0, kFn, ": argument 'expert_alignment' must be >= 1, got ", a.expert_alignment);
  TESSERA_CHECK(r.num_tokens <= r.num_max, kFn, ": argument 'x' has ", r.num_tokens,
                " tokens, more than num_max_tokens_per_rank=", r.num_max);
  TESSERA_CHECK(!a.do_zero_padding || a.do_expand, kFn, ": do_zero_padding needs do_expand=True");
  const int R = st.group->size();
  if (a.cumulative_local_expert_recv_stats.data || a.cumulative_local_expert_recv_stats.ndim) {
    const TensorView& s = a.cumulative_local_expert_recv_stats;
    check_dtype(kFn, "cumulative_local_expert_recv_stats", s, {DType::kI32});
    check_ndim(kFn, "cumulative_local_expert_recv_stats", s, {1});
    TESSERA_CHECK(r.num_experts % R == 0 && s.shape[0] == r.num_experts / R, kFn,
                  ": argument 'cumulative_local_expert_recv_stats' must have one entry per local expert (",
                  r.num_experts / std::max(R, 1), "), got ", s.shape_str());
  }
  return r;
}

// Everything an in-flight dispatch needs until its receive side ran.
struct DispatchOp {
  Resolved r;
  std::shared_ptr<const Routing> routing;
  std::vector<char> sf;  // [T][packs*4] packs made contiguous (when the input was not)
  std::vector<float> w;  // [T][K] made contiguous (when the input was not)
  DispatchPlan plan;
  DispatchState ds;
  uint64_t seq = 0;
  DispatchResult out;
  int64_t out_rows = 0;
  TensorView stats;
  std::vector<int32_t> meta;
  bool expand = false, with_weights = false;
  bool received = false;        // dispatch_receive already ran (CPU sync sizes the outputs exactly)
  std::vector<char*> direct_x;  // direct receive: where this rank's rows go at each destination
};

void normalize_inputs(const DispatchArgs& a, DispatchOp& op) {
  const Resolved& r = op.r;
  // Contiguous inputs are read in place (they must stay unchanged until the operation completed).
  TokenRows& own = op.plan.own;
  own.sf = r.fp8 ? packs_rows(a.sf, r.num_tokens, r.packs, &op.sf) : nullptr;
  own.w = op.with_weights ? f32_rows(kFn, "topk_weights", a.topk_weights, r.num_tokens, r.num_topk, &op.w) : nullptr;
  own.count = r.num_tokens;
  own.x = static_cast<const char*>(a.x.data);
  own.x_stride = a.x.strides[0] * dtype_storage_bytes(a.x.dtype);
  own.sf_stride = r.packs * 4;
  own.idx = op.routing->idx.data();
  own.idx_stride = r.num_topk;
  own.meta_stride = r.num_topk;
}

void allocate_outputs(const DispatchArgs& a, DispatchOp& op, int64_t rows) {
  const Resolved& r = op.r;
  const int64_t lead = (rows + 3) / 4 * 4;
  if (!op.out.recv_x.defined()) op.out.recv_x = allocate_tensor(a.x.dtype, {rows, r.hidden});
  if (r.fp8)
    op.out.recv_sf = a.use_tma_aligned_col_major_sf ? allocate_tensor(a.sf.dtype, {rows, r.packs}, {1, lead})
                                                    : allocate_tensor(a.sf.dtype, {rows, r.packs});
  if (!op.expand && !r.cached) op.out.recv_topk_idx = allocate_tensor(DType::kI64, {rows, int64_t(r.num_topk)});
  if (op.with_weights)
    op.out.recv_topk_weights =
        op.expand ? allocate_tensor(DType::kF32, {rows}) : allocate_tensor(DType::kF32, {rows, int64_t(r.num_topk)});
}

// Rows past the valid ones (worst-case sized outputs): zero data, -1 experts.
void clear_tail(DispatchOp& op, int64_t valid) {
  const int64_t rows = op.out_rows;
  if (valid >= rows) return;
  const TensorView& x = op.out.recv_x.view;
  std::memset(static_cast<char*>(x.data) + valid * op.r.hidden_bytes, 0, size_t((rows - valid) * op.r.hidden_bytes));
  if (op.out.recv_sf.defined()) {
    const TensorView& s = op.out.recv_sf.view;
    for (int64_t i = valid; i < rows; ++i)
      for (int64_t p = 0; p < op.r.packs; ++p)
        std::memset(static_cast<char*>(s.data) + (i * s.strides[0] + p * s.strides[1]) * 4, 0, 4);
  }
  if (op.out.recv_topk_idx.defined())
    std::fill_n(op.out.recv_topk_idx.view.ptr<int64_t>() + valid * op.r.num_topk, (rows - valid) * op.r.num_topk, -1);
  if (op.out.recv_topk_weights.defined()) {
    const int64_t per = op.expand ? 1 : op.r.num_topk;
    std::fill_n(op.out.recv_topk_weights.view.ptr<float>() + valid * per, (rows - valid) * per, 0.0f);
  }
}

void fill_handle(EpHandle& h, DispatchOp& op, const RecvLayout& layout, const ExpertCounts& counts,
                 const ElasticState& st) {
  const Resolved& r = op.r;
  h.num_recv_tokens = layout.total;
  h.num_expanded_tokens = op.expand ? counts.expanded : layout.total;
  h.num_recv_tokens_per_expert_list.assign(counts.aligned.begin(), counts.aligned.end());
  h.num_unaligned_recv_tokens_per_expert = counts.unaligned;
  h.psum_num_recv_tokens_per_expert.clear();
  int64_t sum = 0;
  for (size_t e = 0; e < counts.aligned.size(); ++e) {
    sum += counts.aligned[e];
    h.psum_num_recv_tokens_per_expert.push_back(int32_t(op.expand ? counts.start[e] + counts.unaligned[e] : sum));
  }
  h.psum_num_recv_tokens_per_scaleup_rank.clear();
  int64_t rows = 0;
  for (int64_t c : layout.count) h.psum_num_recv_tokens_per_scaleup_rank.push_back(int32_t(rows += c));
  h.recv_src_metadata = std::move(op.meta);
  auto internal = std::make_shared<HandleInternal>();
  internal->owner = &st;
  internal->routing = op.routing;
  internal->fwd = std::move(op.ds.fwd);
  internal->recv_count = layout.count;
  internal->recv_base = layout.base;
  internal->mode = op.plan.mode;
  internal->x_dtype = r.fp8 ? DType::kF8E4M3 : DType::kBF16;
  internal->hidden = r.hidden;
  internal->sf_packs = r.packs;
  h.internal = internal;
}

// The receive side: wait for every source, unpack, fill the handle, release the region.
void finish(Comm& comm, DispatchOp& op, const ElasticState& st) {
  if (!op.received) dispatch_receive(comm, op.seq, op.plan, op.ds);
  const Resolved& r = op.r;
  const int me = st.group->rank();
  const int epr = op.routing->experts_per_rank;
  const RecvLayout layout = layout_of(op.ds.groups);
  const ExpertCounts counts = count_local_experts(op.ds.groups, r.num_topk, me, epr, r.alignment);
  if (r.cached) {
    const HandleInternal& hi = *op.out.handle->internal;
    for (size_t s = 0; s < layout.count.size(); ++s)
      if (layout.count[s] != hi.recv_count[s])
        fail(ErrorCode::kRuntime, kFn, ": cached dispatch received ", layout.count[s], " tokens from rank ", s,
             ", the handle recorded ", hi.recv_count[s], ": the ranks passed handles of different dispatches");
  }
  const int64_t valid = op.expand ? counts.expanded : layout.total;
  TESSERA_CHECK(valid <= op.out_rows, kFn, ": internal error: ", valid, " rows for ", op.out_rows, " allocated");
  UnpackOut out;
  out.x = static_cast<char*>(op.out.recv_x.view.data);
  out.x_pitch = out.hidden_bytes = r.hidden_bytes;
  if (op.out.recv_sf.defined()) {
    out.sf = static_cast<char*>(op.out.recv_sf.view.data);
    out.sf_row = op.out.recv_sf.view.strides[0] * 4;
    out.sf_col = op.out.recv_sf.view.strides[1] * 4;
    out.packs = r.packs;
  }
  out.topk = op.out.recv_topk_idx.defined() ? op.out.recv_topk_idx.view.ptr<int64_t>() : nullptr;
  out.w = op.out.recv_topk_weights.defined() ? op.out.recv_topk_weights.view.ptr<float>() : nullptr;
  op.meta.assign(size_t(layout.total * (r.num_topk + 2)), -1);
  out.meta = op.meta.data();
  const UnpackContext ctx{me, r.num_topk, epr, r.num_max, comm.threads()};
  if (op.expand) {
    unpack_expand(ctx, op.ds.groups, layout, counts, out);
  } else {
    unpack_non_expand(ctx, op.ds.groups, layout, out);
  }
  clear_tail(op, valid);
  if (op.stats.data) {
    int32_t* s = op.stats.ptr<int32_t>();
    for (int e = 0; e < epr; ++e) s[e * op.stats.strides[0]] += counts.unaligned[size_t(e)];
  }
  if (!r.cached) fill_handle(*op.out.handle, op, layout, counts, st);
  transport_finish(comm, op.seq);
}

// A fresh dispatch's routing and handle, refilling the previous dispatch's when nothing but the buffer
// holds them any more (their vectors keep their capacity): new ones, ~1 MB for 4096 tokens of top-8,
// came from heap memory glibc had returned to the system and were faulted in page by page on every
// call (~250 faults, 15% of a 4096-token FP8 dispatch on 2 ranks).
void recycle(ElasticState& st, DispatchOp& op, const char* fn, const TensorView& topk_idx, int num_experts, int R) {
  auto handle = std::make_shared<EpHandle>();
  if (st.spare_handle.use_count() == 1) {
    EpHandle& old = *st.spare_handle;
    handle->topk_idx = std::move(old.topk_idx);
    handle->dst_buffer_slot_idx = std::move(old.dst_buffer_slot_idx);
    op.meta = std::move(old.recv_src_metadata);  // finish() fills it and moves it into the handle
  }
  st.spare_handle = handle;  // (drops the old handle, and with it its reference to the old routing)
  if (st.spare_routing.use_count() != 1) st.spare_routing = std::make_shared<Routing>();
  route_topk_into(fn, topk_idx, num_experts, R, *st.spare_routing);
  op.routing = st.spare_routing;
  op.out.handle = std::move(handle);
}

}  // namespace

DispatchResult ElasticBuffer::dispatch(const DispatchArgs& a) {
  Comm& comm = st_->start(kFn);
  auto op = std::make_shared<DispatchOp>();
  op->r = resolve(a, *st_);
  const Resolved& r = op->r;
  const int R = st_->group->size();
  op->expand = a.do_expand;
  op->with_weights = a.topk_weights.data != nullptr || a.topk_weights.ndim != 0;
  op->stats = a.cumulative_local_expert_recv_stats;
  if (r.cached) {
    op->routing = a.handle->internal->routing;
  } else {
    recycle(*st_, *op, kFn, a.topk_idx, r.num_experts, R);
  }
  normalize_inputs(a, *op);
  DispatchPlan& plan = op->plan;
  plan.routing = op->routing.get();
  plan.rec = DispatchRecord::make(r.hidden_bytes, r.packs, r.num_topk);
  plan.hidden_bytes = r.hidden_bytes;
  plan.sf_bytes = r.packs * 4;
  plan.num_max = r.num_max;
  plan.mode = r.cached ? a.handle->internal->mode : st_->mode;
  comm.set_threads(a.num_sms);

  const int epr = op->routing->experts_per_rank;
  if (r.cached) {
    op->out.handle = std::const_pointer_cast<EpHandle>(a.handle);
    op->out_rows = op->expand ? a.handle->num_expanded_tokens : a.handle->num_recv_tokens;
  } else {
    EpHandle& h = *op->out.handle;
    h.do_expand = op->expand;
    h.num_experts = r.num_experts;
    h.expert_alignment = r.alignment;
    h.num_max_tokens_per_rank = r.num_max;
    h.num_topk = r.num_topk;
    h.num_sms = comm.threads();
    h.num_tokens = r.num_tokens;
    h.topk_idx = op->routing->idx;
    h.dst_buffer_slot_idx = op->routing->slot;
    if (!r.cpu_sync) {
      const int64_t worst_rows = int64_t(R) * r.num_max;
      op->out_rows =
          op->expand ? worst_rows * std::min(r.num_topk, epr) + int64_t(epr) * (r.alignment - 1) : worst_rows;
    }
  }
  op->seq = comm.begin(kFn);
  ElasticState* st = st_.get();
  const bool direct = comm.has_arena() && !op->expand && st->group->topology().num_nodes == 1;
  if (direct) {
    // Direct receive: counts first, then every sender writes x rows straight into the receivers' outputs.
    op->out.recv_x =
        start_direct_receive(comm, op->seq, plan, &op->direct_x, a.x.dtype, r.hidden, !r.cpu_sync, &op->out_rows);
  }
  dispatch_send(comm, op->seq, plan, op->ds);
  if (r.cpu_sync && !direct) {
    // CPU sync: exact output sizes need the counts, and the counts arrive with the data.
    dispatch_receive(comm, op->seq, plan, op->ds);
    op->received = true;
    op->out_rows = op->expand
                       ? count_local_experts(op->ds.groups, r.num_topk, st->group->rank(), epr, r.alignment).expanded
                       : layout_of(op->ds.groups).total;
  }
  allocate_outputs(a, *op, op->out_rows);
  return st_->pending.defer_result([op, st, &comm] { finish(comm, *op, *st); }, a.async, op->out);
}

}  // namespace tessera::ep
