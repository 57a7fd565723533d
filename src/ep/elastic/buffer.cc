// ElasticBuffer: construction, sizing, topology accessors, barrier and destroy. dispatch and combine
// live in dispatch.cc and combine.cc.
#include <algorithm>
#include <cstdlib>

#include "core/env.h"
#include "ep/common/record_layout.h"
#include "ep/elastic/state.h"
#include "tessera/core/error.h"
#include "tessera/ep/elastic_buffer.h"

namespace tessera::ep {
namespace detail {

Comm& ElasticState::start(const char* fn) {
  if (destroyed) fail(ErrorCode::kInvalidArgument, fn, ": the buffer was destroyed");
  pending.complete();
  return *comm;
}

namespace {

constexpr int64_t kAlign = 2 << 20;

int64_t align_up(int64_t v, int64_t to) {
  return (v + to - 1) / to * to;
}

// Bytes per source-rank slot area for these MoE settings: the larger of a dispatch record group and a
// combine group (rows_per_token = topk when the expanded combine is not reduced on the sending rank).
int64_t group_bytes_for(int num_max, int hidden, int num_topk, bool fp8, bool multiple_reduction) {
  const int64_t hidden_bytes = int64_t(hidden) * (fp8 ? 1 : 2);
  const DispatchRecord d = DispatchRecord::make(hidden_bytes, fp8 ? (hidden + 127) / 128 : 0, num_topk);
  const CombineRecord c = CombineRecord::make(hidden, multiple_reduction ? 1 : std::max(1, num_topk), num_topk);
  return std::max(d.bytes(num_max), c.bytes(num_max));
}

}  // namespace

// Direct receive needs every source on this node; the arena holds two worst-case outputs by default
// (each at most the receive region's size), at most default_cap. TESSERA_EP_OUTPUT_ARENA_MB overrides
// both; 0 turns it off.
int64_t output_arena_bytes(const Topology& t, int64_t region_bytes, int64_t default_cap) {
  if (t.num_nodes != 1) return 0;
  if (const int64_t mb = env::integer("TESSERA_EP_OUTPUT_ARENA_MB", -1, 0, 1 << 30); mb >= 0) return mb << 20;
  return std::min(2 * region_bytes, default_cap);
}

}  // namespace detail

using detail::ElasticState;

int64_t ElasticBuffer::get_buffer_size_hint(const Group& group, int num_max_tokens_per_rank, int hidden, int num_topk,
                                            bool use_fp8_dispatch, bool allow_hybrid_mode,
                                            bool allow_multiple_reduction) {
  const char* fn = "ElasticBuffer.get_buffer_size_hint";
  TESSERA_CHECK(num_max_tokens_per_rank > 0, fn, ": argument 'num_max_tokens_per_rank' must be > 0, got ",
                num_max_tokens_per_rank);
  TESSERA_CHECK(hidden > 0, fn, ": argument 'hidden' must be > 0, got ", hidden);
  TESSERA_CHECK(num_topk >= 0 && num_topk <= 32, fn, ": argument 'num_topk' must be in [0, 32], got ", num_topk);
  (void)allow_hybrid_mode;  // hybrid staging is private memory, outside the shared region
  const int64_t per_group = detail::group_bytes_for(num_max_tokens_per_rank, hidden, std::max(num_topk, 1),
                                                    use_fp8_dispatch, allow_multiple_reduction);
  return detail::align_up(per_group * group.size(), detail::kAlign);
}

ElasticBuffer::ElasticBuffer(std::shared_ptr<Group> group, const ElasticBufferConfig& config)
    : st_(std::make_unique<ElasticState>()) {
  const char* fn = "ElasticBuffer";
  TESSERA_CHECK(group != nullptr, fn, ": argument 'group' must not be None");
  st_->group = group;
  st_->config = config;
  const Topology& t = group->topology();
  int64_t bytes = 0;
  if (config.num_bytes) {
    bytes = *config.num_bytes;
    TESSERA_CHECK(bytes > 0 && bytes % detail::kAlign == 0, fn, ": argument 'num_bytes' must be a positive multiple ",
                  "of 2 MiB (2097152), got ", bytes);
  } else {
    TESSERA_CHECK(config.num_max_tokens_per_rank > 0 && config.hidden > 0, fn,
                  ": give either 'num_bytes' or the MoE settings 'num_max_tokens_per_rank' and 'hidden' (both > 0)");
    bytes = get_buffer_size_hint(*group, config.num_max_tokens_per_rank, config.hidden, config.num_topk,
                                 config.use_fp8_dispatch, config.allow_hybrid_mode, config.allow_multiple_reduction);
  }
  TESSERA_CHECK(config.num_cpu_timeout_secs > 0, fn, ": argument 'num_cpu_timeout_secs' must be > 0, got ",
                config.num_cpu_timeout_secs);
  st_->num_bytes = bytes;
  st_->mode = config.allow_hybrid_mode && config.allow_multiple_reduction && t.num_nodes > 1 && t.uniform_nodes()
                  ? detail::Mode::kHybrid
                  : detail::Mode::kDirect;
  st_->comm = std::make_unique<detail::Comm>(group, bytes / t.num_ranks, config.num_cpu_timeout_secs, fn,
                                             detail::output_arena_bytes(t, bytes));
  group->barrier(config.num_cpu_timeout_secs);
}

ElasticBuffer::~ElasticBuffer() {
  // A pending asynchronous operation must still release the peers waiting on this rank.
  try {
    st_->pending.complete();
  } catch (const Error&) {
    // Already reported to the peers through the failure record; nothing else to do while destroying.
  }
}

void ElasticBuffer::barrier() {
  st_->start("ElasticBuffer.barrier");
  st_->group->barrier(st_->config.num_cpu_timeout_secs);
}

void ElasticBuffer::destroy() {
  TESSERA_CHECK(st_->config.explicitly_destroy, "ElasticBuffer.destroy: the buffer was created with ",
                "explicitly_destroy=False; it is released when the object is deleted");
  if (st_->destroyed) return;
  st_->pending.complete();
  st_->pp.reset();
  st_->agrs.reset();
  st_->engram.reset();
  st_->comm.reset();
  st_->spare_routing.reset();
  st_->spare_handle.reset();
  st_->destroyed = true;
}

const Group& ElasticBuffer::group() const {
  return *st_->group;
}
int ElasticBuffer::rank_idx() const {
  return st_->group->rank();
}
int ElasticBuffer::num_ranks() const {
  return st_->group->size();
}
int64_t ElasticBuffer::num_bytes() const {
  return st_->num_bytes;
}
int ElasticBuffer::num_max_tokens_per_rank() const {
  return st_->config.num_max_tokens_per_rank;
}
int ElasticBuffer::num_scaleout_ranks() const {
  return st_->group->topology().num_nodes;
}
int ElasticBuffer::num_scaleup_ranks() const {
  return st_->group->topology().num_local_ranks;
}
int ElasticBuffer::scaleout_rank_idx() const {
  return st_->group->topology().node;
}
int ElasticBuffer::scaleup_rank_idx() const {
  return st_->group->topology().local_rank;
}
bool ElasticBuffer::hybrid_mode() const {
  return st_->mode == detail::Mode::kHybrid;
}
bool ElasticBuffer::explicitly_destroy() const {
  return st_->config.explicitly_destroy;
}

int ElasticBuffer::get_theoretical_num_sms(int num_experts, int num_topk) const {
  TESSERA_CHECK(num_experts > 0 && num_topk > 0, "ElasticBuffer.get_theoretical_num_sms: arguments 'num_experts' and ",
                "'num_topk' must be > 0, got ", num_experts, " and ", num_topk);
  return st_->comm ? st_->comm->threads() : 1;
}

}  // namespace tessera::ep
