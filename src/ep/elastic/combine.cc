// ElasticBuffer::combine: every rank returns one contribution per received token (in expand mode the
// sum of the token's local expert rows, reduced in ascending top-k order and rounded to bf16, unless
// allow_multiple_reduction is off: then each expert row travels and the source sums all lanes once).
#include <algorithm>
#include <cstring>

#include "ep/common/active_kernels.h"
#include "ep/common/handle_internal.h"
#include "ep/common/input_checks.h"
#include "ep/elastic/state.h"
#include "ep/transport/output_arena.h"
#include "tessera/core/error.h"

namespace tessera::ep {
namespace {

using namespace detail;

constexpr const char* kFn = "ElasticBuffer.combine";

struct CombineOp {
  CombinePlan plan;
  CombineSource src;
  CombineState cs;
  std::vector<float> w;  // [rows, K] (non-expand) or [rows] (expand), contiguous copy of topk_weights
  std::shared_ptr<const HandleInternal> internal;
  uint64_t seq = 0;
  CombineResult out;
  TensorView bias0, bias1;
};

void check_bias(const char* arg, const TensorView& b, int64_t tokens, int64_t hidden) {
  check_dtype(kFn, arg, b, {DType::kBF16});
  check_ndim(kFn, arg, b, {2});
  TESSERA_CHECK(b.shape[0] == tokens && b.shape[1] == hidden, kFn, ": argument '", arg, "' must be [", tokens, ", ",
                hidden, "], got ", b.shape_str());
  TESSERA_CHECK(hidden == 0 || b.strides[1] == 1, kFn, ": argument '", arg, "' must have contiguous rows");
}

}  // namespace

CombineResult ElasticBuffer::combine(const CombineArgs& a, const EpHandle& h) {
  Comm& comm = st_->start(kFn);
  TESSERA_CHECK(h.internal && h.internal->owner == st_.get(), kFn, ": argument 'handle' was made by another buffer");
  auto op = std::make_shared<CombineOp>();
  op->internal = h.internal;
  const HandleInternal& hi = *h.internal;
  const int K = h.num_topk;
  const int64_t T = h.num_tokens;
  const bool expand = h.do_expand;
  const int64_t rows_needed = expand ? h.num_expanded_tokens : h.num_recv_tokens;

  check_defined(kFn, "x", a.x);
  check_dtype(kFn, "x", a.x, {DType::kBF16});
  check_ndim(kFn, "x", a.x, {2});
  const int64_t hidden = a.x.shape[1];
  TESSERA_CHECK(hidden > 0 && (hidden * 2) % 16 == 0, kFn, ": argument 'x' must have a hidden size that is a ",
                "positive multiple of 8, got ", a.x.shape_str());
  TESSERA_CHECK(a.x.strides[1] == 1, kFn, ": argument 'x' must have contiguous rows, got strides ", a.x.strides_str());
  TESSERA_CHECK(a.x.shape[0] >= rows_needed, kFn, ": argument 'x' has ", a.x.shape[0], " rows, the ",
                expand ? "expanded" : "dispatched", " layout of the handle has ", rows_needed);
  const bool with_w = given(a.topk_weights);
  if (with_w) {
    check_dtype(kFn, "topk_weights", a.topk_weights, {DType::kF32});
    if (expand) {
      check_ndim(kFn, "topk_weights", a.topk_weights, {1});
      TESSERA_CHECK(a.topk_weights.shape[0] >= rows_needed, kFn, ": argument 'topk_weights' must have one weight ",
                    "per expanded row (", rows_needed, "), got ", a.topk_weights.shape_str());
    } else {
      check_ndim(kFn, "topk_weights", a.topk_weights, {2});
      TESSERA_CHECK(a.topk_weights.shape[0] >= rows_needed && a.topk_weights.shape[1] == K, kFn,
                    ": argument 'topk_weights' must be [", rows_needed, ", ", K, "], got ", a.topk_weights.shape_str());
    }
    const TensorView& tw = a.topk_weights;
    const int per = expand ? 1 : K;
    op->w.resize(size_t(rows_needed * per));
    for (int64_t i = 0; i < rows_needed; ++i)
      for (int k = 0; k < per; ++k)
        op->w[size_t(i * per + k)] = tw.ptr<float>()[i * tw.strides[0] + (expand ? 0 : k * tw.strides[1])];
  }
  if (given(a.bias0)) check_bias("bias0", a.bias0, T, hidden);
  if (given(a.bias1)) check_bias("bias1", a.bias1, T, hidden);
  op->bias0 = a.bias0;
  op->bias1 = a.bias1;

  const int epr = hi.routing->experts_per_rank;
  const bool multi = st_->config.allow_multiple_reduction || !expand;
  CombinePlan& plan = op->plan;
  plan.rec = CombineRecord::make(hidden, multi ? 1 : std::min(K, epr), with_w ? K : 0);
  plan.hidden = hidden;
  plan.num_max = h.num_max_tokens_per_rank;
  plan.num_topk = K;
  plan.mode = hi.mode;
  plan.order = multi ? CombineOrder::kLastLane : CombineOrder::kPerLane;
  plan.counts = hi.recv_count;
  const char* x = static_cast<const char*>(a.x.data);
  const int64_t x_stride = a.x.strides[0] * 2;
  const int64_t row_bytes = hidden * 2;
  const std::vector<int64_t> base = hi.recv_base;
  const int32_t* meta = h.recv_src_metadata.data();
  const float* w = op->w.data();
  const cpu::EpKernels* kern = &kernels();
  if (!expand) {
    plan.fill = [=](int s, int64_t j0, int64_t j1, char* rows, int64_t pitch, float* wout, int64_t wpitch,
                    bool streaming) {
      const char* from = x + (base[size_t(s)] + j0) * x_stride;
      if (!rows) {
        // in place: the source reads the rows from this rank's arena
      } else if (x_stride == pitch && pitch == row_bytes) {
        kern->copy(rows, from, size_t((j1 - j0) * row_bytes), streaming);
      } else {
        for (int64_t j = j0; j < j1; ++j)
          kern->copy(rows + (j - j0) * pitch, from + (j - j0) * x_stride, size_t(row_bytes), streaming);
      }
      if (wout)
        for (int64_t j = j0; j < j1; ++j)
          std::memcpy(wout + (j - j0) * wpitch, w + (base[size_t(s)] + j) * K, size_t(K) * 4);
    };
    const int me = st_->group->rank();
    plan.self_rows = x + base[size_t(me)] * x_stride;
    plan.self_stride = x_stride;
    plan.self_w = with_w ? w + base[size_t(me)] * K : nullptr;
    plan.self_w_stride = K;
    // x in this buffer's shared arena (recv_x itself, or get_combine_input): the sources on this
    // node read their rows where they are instead of receiving a copy.
    const int64_t at =
        hi.mode == Mode::kDirect ? comm.own_arena_offset(x, (rows_needed - 1) * x_stride + row_bytes) : -1;
    if (at >= 0 && rows_needed > 0) {
      for (int64_t b : base) plan.in_place_offset.push_back(at + b * x_stride);
      plan.in_place_pitch = x_stride;
    }
  } else {
    const int64_t row_pitch = plan.rec.row_bytes;
    plan.fill = [=](int s, int64_t j0, int64_t j1, char* rows, int64_t pitch, float* wout, int64_t wpitch, bool) {
      const uint16_t* lane_rows[32];
      for (int64_t j = j0; j < j1; ++j) {
        const int32_t* m = meta + (base[size_t(s)] + j) * (K + 2);
        char* dst = rows + (j - j0) * pitch;
        int n = 0;
        for (int k = 0; k < K; ++k) {
          const int32_t erow = m[2 + k];
          if (wout) wout[(j - j0) * wpitch + k] = erow >= 0 ? w[erow] : 0.0f;
          if (erow < 0) continue;
          const char* src_row = x + erow * x_stride;
          if (multi) {
            lane_rows[n++] = reinterpret_cast<const uint16_t*>(src_row);
          } else {
            std::memcpy(dst + (n++) * row_pitch, src_row, size_t(row_bytes));
          }
        }
        if (multi) kern->reduce_bf16(reinterpret_cast<uint16_t*>(dst), lane_rows, n, nullptr, nullptr, hidden, 0);
      }
    };
  }
  op->src.routing = hi.routing.get();
  op->src.fwd = &hi.fwd;
  op->out.combined_x = allocate_tensor(DType::kBF16, {T, hidden});
  if (with_w) op->out.combined_topk_weights = allocate_tensor(DType::kF32, {T, int64_t(K)});
  comm.set_threads(a.num_sms);

  return start_combine(comm, st_->pending, op, kFn, a.async);
}

OwnedTensor ElasticBuffer::get_combine_input(const EpHandle& h, int64_t hidden) {
  constexpr const char* fn = "ElasticBuffer.get_combine_input";
  if (st_->destroyed) fail(ErrorCode::kInvalidArgument, fn, ": the buffer was destroyed");
  TESSERA_CHECK(h.internal && h.internal->owner == st_.get(), fn, ": argument 'handle' was made by another buffer");
  if (hidden == 0) hidden = h.internal->hidden;
  TESSERA_CHECK(hidden > 0 && hidden % 8 == 0, fn, ": argument 'hidden' must be a positive multiple of 8, got ",
                hidden);
  const int64_t rows = h.do_expand ? h.num_expanded_tokens : h.num_recv_tokens;
  int64_t offset = -1;
  if (!h.do_expand && h.internal->mode == Mode::kDirect) {
    OwnedTensor t = arena_tensor(st_->comm->arena(), DType::kBF16, rows, hidden, &offset);
    if (t.defined()) return t;
  }
  return allocate_tensor(DType::kBF16, {rows, hidden});
}

}  // namespace tessera::ep
