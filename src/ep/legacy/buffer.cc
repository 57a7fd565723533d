// Buffer (v1): construction, the dispatch layout, barrier and destroy. Normal dispatch/combine live
// in dispatch_combine.cc, the low-latency pair in low_latency.cc.
#include <algorithm>

#include "ep/common/record_layout.h"
#include "ep/legacy/state.h"
#include "tessera/core/error.h"

namespace tessera::ep {
namespace detail {

Comm& LegacyState::start(const char* fn) {
  if (destroyed) fail(ErrorCode::kInvalidArgument, fn, ": the buffer was destroyed");
  pending.complete();
  return *comm;
}

}  // namespace detail

namespace {
constexpr int kHintTopk = 9;
}

int64_t Buffer::get_low_latency_rdma_size_hint(int num_max, int hidden, int num_ranks, int num_experts) {
  const char* fn = "Buffer.get_low_latency_rdma_size_hint";
  TESSERA_CHECK(num_max > 0 && hidden > 0 && num_ranks > 0 && num_experts > 0, fn,
                ": arguments must be > 0, got num_max_dispatch_tokens_per_rank=", num_max, ", hidden=", hidden,
                ", num_ranks=", num_ranks, ", num_experts=", num_experts);
  const int lanes = std::max(1, std::min(kHintTopk, num_experts / num_ranks));
  const detail::DispatchRecord d = detail::DispatchRecord::make(int64_t(hidden) * 2, (hidden + 127) / 128, kHintTopk);
  const detail::CombineRecord c = detail::CombineRecord::make(hidden, lanes, 0);
  const int64_t per_group = std::max(d.bytes(num_max), c.bytes(num_max));
  const int64_t align = 2 << 20;
  return (per_group * num_ranks + align - 1) / align * align;
}

Buffer::Buffer(std::shared_ptr<Group> group, const BufferConfig& config)
    : st_(std::make_unique<detail::LegacyState>()) {
  const char* fn = "Buffer";
  TESSERA_CHECK(group != nullptr, fn, ": argument 'group' must not be None");
  TESSERA_CHECK(
      config.num_nvl_bytes >= 0 && config.num_rdma_bytes >= 0 && config.num_nvl_bytes + config.num_rdma_bytes > 0, fn,
      ": num_nvl_bytes + num_rdma_bytes must be > 0 (the receive region), got ", config.num_nvl_bytes, " and ",
      config.num_rdma_bytes);
  if (config.enable_shrink)
    TESSERA_NOT_IMPLEMENTED("Buffer(enable_shrink=True): masking ranks (low_latency_update_mask_buffer) is not ",
                            "implemented on CPUs; a failed rank raises an error on every survivor instead");
  st_->group = group;
  st_->config = config;
  const int64_t total = config.num_nvl_bytes + config.num_rdma_bytes;
  // The output arena for direct receive in normal dispatch, sized from the normal-mode region only
  // (low-latency calls never use it) and capped: DeepEP's v1 buffers are often sized generously
  // (num_nvl_bytes = 1e9), and the arena is shared memory reserved and faulted in up front (1 GiB region
  // on 2 ranks: 0.8 s to create the buffer, 4-5 s with an uncapped 2 GiB arena). Outputs that do not fit
  // take the slot path.
  constexpr int64_t kArenaCap = int64_t(256) << 20;
  const int64_t arena = detail::output_arena_bytes(group->topology(), config.num_nvl_bytes, kArenaCap);
  st_->comm = std::make_unique<detail::Comm>(group, total / group->size(), config.num_cpu_timeout_secs, fn, arena);
  group->barrier(config.num_cpu_timeout_secs);
}

Buffer::~Buffer() {
  // A pending asynchronous operation must still release the peers waiting on this rank.
  try {
    st_->pending.complete();
  } catch (const Error&) {
    // Already reported to the peers through the failure record; nothing else to do while destroying.
  }
}

DispatchLayout Buffer::get_dispatch_layout(const TensorView& topk_idx, int num_experts) {
  const char* fn = "Buffer.get_dispatch_layout";
  if (st_->destroyed) fail(ErrorCode::kInvalidArgument, fn, ": the buffer was destroyed");
  const Topology& t = st_->group->topology();
  const detail::Routing r = detail::route_topk(fn, topk_idx, num_experts, t.num_ranks);
  DispatchLayout out;
  out.num_tokens_per_rank = allocate_tensor(DType::kI32, {int64_t(t.num_ranks)});
  out.num_tokens_per_expert = allocate_tensor(DType::kI32, {int64_t(num_experts)});
  out.is_token_in_rank = allocate_tensor(DType::kBool, {r.num_tokens, int64_t(t.num_ranks)});
  int32_t* per_rank = out.num_tokens_per_rank.view.ptr<int32_t>();
  int32_t* per_expert = out.num_tokens_per_expert.view.ptr<int32_t>();
  uint8_t* in_rank = out.is_token_in_rank.view.ptr<uint8_t>();
  std::fill_n(per_expert, num_experts, 0);
  std::fill_n(in_rank, r.num_tokens * t.num_ranks, 0);
  for (int d = 0; d < t.num_ranks; ++d) {
    per_rank[d] = int32_t(r.sent_tokens(d));
    for (int32_t tok : r.send_list[size_t(d)]) in_rank[int64_t(tok) * t.num_ranks + d] = 1;
  }
  for (int64_t e : r.idx)
    if (e >= 0) ++per_expert[e];
  if (t.num_nodes > 1) {
    out.num_tokens_per_rdma_rank = allocate_tensor(DType::kI32, {int64_t(t.num_nodes)});
    int32_t* per_node = out.num_tokens_per_rdma_rank.view.ptr<int32_t>();
    for (int n = 0; n < t.num_nodes; ++n) {
      per_node[n] = 0;
      for (int64_t tok = 0; tok < r.num_tokens; ++tok) {
        bool hit = false;
        for (int d : t.node_ranks[size_t(n)]) hit |= in_rank[tok * t.num_ranks + d] != 0;
        per_node[n] += hit;
      }
    }
  }
  return out;
}

void Buffer::barrier() {
  st_->start("Buffer.barrier");
  st_->group->barrier(st_->config.num_cpu_timeout_secs);
}

void Buffer::destroy() {
  TESSERA_CHECK(st_->config.explicitly_destroy, "Buffer.destroy: `explicitly_destroy` flag must be set");
  if (st_->destroyed) return;
  st_->pending.complete();
  st_->comm.reset();
  st_->destroyed = true;
}

const Group& Buffer::group() const {
  return *st_->group;
}
int Buffer::rank() const {
  return st_->group->rank();
}
int Buffer::group_size() const {
  return st_->group->size();
}
int Buffer::num_rdma_ranks() const {
  return st_->group->topology().num_nodes;
}
int Buffer::num_nvl_ranks() const {
  return st_->group->topology().num_local_ranks;
}
bool Buffer::low_latency_mode() const {
  return st_->config.low_latency_mode;
}
bool Buffer::explicitly_destroy() const {
  return st_->config.explicitly_destroy;
}

}  // namespace tessera::ep
