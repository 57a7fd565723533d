// The Mega MoE symmetric buffer: its layout, and one region per rank that every rank of the node maps
// (POSIX shared memory through the ep component's node segments).
#include <sys/mman.h>

#include <atomic>
#include <vector>

#include "ep/transport/node_segments.h"
#include "tessera/core/error.h"
#include "tessera/ep/group.h"
#include "tessera/mega_moe.h"

namespace tessera::mega_moe {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHeaderBytes = 64;

size_t align_up(size_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

MmaType parse_mma_type(const char* fn, const std::string& mma_type) {
  if (mma_type == "fp8xfp4") return MmaType::kFp8xFp4;
  if (mma_type == "bf16xbf16") return MmaType::kBf16xBf16;
  fail(ErrorCode::kInvalidArgument, fn, ": argument 'mma_type' must be 'fp8xfp4' or 'bf16xbf16', got '", mma_type, "'");
}

BufferLayout buffer_layout(const char* fn, const BufferShape& s) {
  TESSERA_CHECK(s.num_ranks >= 1, fn, ": the group must have at least one rank, got ", s.num_ranks);
  TESSERA_CHECK(s.num_experts > 0 && s.num_experts % s.num_ranks == 0, fn,
                ": argument 'num_experts' must be a positive multiple of the group size ", s.num_ranks, ", got ",
                s.num_experts);
  TESSERA_CHECK(s.num_max_tokens_per_rank >= 0, fn, ": argument 'num_max_tokens_per_rank' must be >= 0, got ",
                s.num_max_tokens_per_rank);
  TESSERA_CHECK(s.num_topk >= 1 && s.num_topk <= s.num_experts, fn,
                ": argument 'num_topk' must be in [1, num_experts = ", s.num_experts, "], got ", s.num_topk);
  TESSERA_CHECK(s.hidden > 0 && s.intermediate_hidden > 0, fn,
                ": arguments 'hidden' and 'intermediate_hidden' must be > 0, got ", s.hidden, " and ",
                s.intermediate_hidden);
  const bool fp8 = s.mma_type == MmaType::kFp8xFp4;
  if (fp8) {
    TESSERA_CHECK(s.hidden % 128 == 0, fn, ": argument 'hidden' must be a multiple of 128 for fp8xfp4, got ", s.hidden);
    TESSERA_CHECK(s.intermediate_hidden % 128 == 0, fn,
                  ": argument 'intermediate_hidden' must be a multiple of 128 for fp8xfp4, got ",
                  s.intermediate_hidden);
  }
  const size_t t = size_t(s.num_max_tokens_per_rank), h = size_t(s.hidden), k = size_t(s.num_topk);
  BufferLayout l;
  size_t at = 0;
  auto region = [&](size_t bytes) {
    const size_t begin = at;
    at = align_up(at + bytes);
    return begin;
  };
  l.header = region(kHeaderBytes);
  l.x = region(t * h * (fp8 ? 1 : 2));
  l.x_sf = region(fp8 ? t * (h / 128) * 4 : 0);
  l.topk_idx = region(t * k * 8);
  l.topk_weights = region(t * k * 4);
  l.combine = region(t * k * h * 2);
  l.total = at;
  return l;
}

struct SymmBuffer::Impl {
  std::vector<ep::detail::ShmSegment> segments;  // by local rank, when the group has several ranks
  std::vector<int> local_of;                     // group rank -> index into segments
  // One rank: anonymous pages, zero-filled on first touch (a large buffer costs nothing until used).
  char* private_memory = nullptr;
  size_t private_bytes = 0;
  ~Impl() {
    if (private_memory) munmap(private_memory, private_bytes);
  }
};

SymmBuffer::SymmBuffer(std::shared_ptr<ep::Group> group, BufferShape shape, BufferLayout layout)
    : group_(std::move(group)), shape_(shape), layout_(layout), impl_(std::make_unique<Impl>()) {}

SymmBuffer::~SymmBuffer() = default;

std::shared_ptr<SymmBuffer> SymmBuffer::create(std::shared_ptr<ep::Group> group, BufferShape shape) {
  const char* fn = "get_symm_buffer_for_mega_moe";
  shape.num_ranks = group ? group->size() : 1;
  const BufferLayout layout = buffer_layout(fn, shape);
  std::shared_ptr<SymmBuffer> buf(new SymmBuffer(group, shape, layout));
  buf->rank_ = group ? group->rank() : 0;
  if (shape.num_ranks == 1) {
    void* p = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail(ErrorCode::kRuntime, fn, ": could not map ", layout.total, " bytes");
    buf->impl_->private_memory = static_cast<char*>(p);
    buf->impl_->private_bytes = layout.total;
    return buf;
  }
  const ep::Topology& topo = group->topology();
  if (topo.num_nodes > 1)
    TESSERA_NOT_IMPLEMENTED(fn, ": argument 'group' spans ", topo.num_nodes,
                            " nodes; Mega MoE reads peers through shared memory, so all ranks must share one node (",
                            topo.describe(), ")");
  buf->impl_->segments = ep::detail::map_node_segments(*group, "mm", layout.total, "Mega MoE buffer");
  buf->impl_->local_of = topo.local_of;
  return buf;
}

char* SymmBuffer::rank_data(int rank) const {
  if (impl_->private_memory) return impl_->private_memory;
  return impl_->segments[size_t(impl_->local_of[size_t(rank)])].data();
}

void SymmBuffer::barrier() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (group_ && shape_.num_ranks > 1) group_->barrier();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace tessera::mega_moe
