#include "ep/transport/output_arena.h"

#include "ep/common/owned_tensor.h"
#include "ep/transport/asan_poison.h"

namespace tessera::ep::detail {

namespace {

constexpr int64_t kGranule = 64 << 10;

void give_back(ArenaState& a, int64_t offset, int64_t bytes) {
  asan_poison(a.segment.data() + offset, size_t(bytes));
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.free_ranges.emplace(offset, bytes).first;
  auto next = std::next(it);
  if (next != a.free_ranges.end() && it->first + it->second == next->first) {
    it->second += next->second;
    a.free_ranges.erase(next);
  }
  if (it != a.free_ranges.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      a.free_ranges.erase(it);
    }
  }
}

}  // namespace

ArenaState::~ArenaState() {
  // The shadow of an unmapped range would stay poisoned for whatever is mapped there next.
  if (segment.data()) asan_unpoison(segment.data(), segment.size());
}

std::shared_ptr<ArenaState> make_arena(ShmSegment segment) {
  auto a = std::make_shared<ArenaState>();
  const int64_t bytes = int64_t(segment.size()) / kGranule * kGranule;
  a->segment = std::move(segment);
  if (a->segment.data()) asan_poison(a->segment.data(), a->segment.size());
  if (bytes > 0) a->free_ranges.emplace(0, bytes);
  return a;
}

OwnedTensor arena_tensor(const std::shared_ptr<ArenaState>& arena, DType dtype, int64_t rows, int64_t cols,
                         int64_t* offset) {
  *offset = -1;
  if (!arena) return OwnedTensor{};
  const int64_t need =
      std::max<int64_t>(1, (rows * cols * dtype_storage_bytes(dtype) + kGranule - 1) / kGranule) * kGranule;
  int64_t at = -1;
  {
    std::lock_guard<std::mutex> lock(arena->mutex);
    for (auto it = arena->free_ranges.begin(); it != arena->free_ranges.end(); ++it) {
      if (it->second < need) continue;
      at = it->first;
      const int64_t left = it->second - need;
      arena->free_ranges.erase(it);
      if (left > 0) arena->free_ranges.emplace(at + need, left);
      break;
    }
  }
  if (at < 0) return OwnedTensor{};
  *offset = at;
  asan_unpoison(arena->segment.data() + at, size_t(rows * cols * dtype_storage_bytes(dtype)));
  std::shared_ptr<ArenaState> keep = arena;
  std::shared_ptr<void> slice(arena->segment.data() + at, [keep, at, need](void*) { give_back(*keep, at, need); });
  return owned_view(std::move(slice), dtype, {rows, cols}, {cols, 1});
}

OwnedTensor start_direct_receive(Comm& comm, uint64_t seq, DispatchPlan& plan, std::vector<char*>* x_at, DType dtype,
                                 int64_t hidden, bool sized, int64_t* rows) {
  const Topology& t = comm.topo();
  const int R = t.num_ranks, me = t.rank;
  const Routing& r = *plan.routing;
  for (int d = 0; d < R; ++d)
    if (d != me) comm.publish_early_count(t.local_of[size_t(d)], r.sent_tokens(d), seq);
  std::vector<int64_t> first_row(static_cast<size_t>(R));
  int64_t total = 0;
  for (int s = 0; s < R; ++s) {
    first_row[size_t(s)] = total;
    total += s == me ? r.sent_tokens(me) : comm.wait_early_count(s, seq);
  }
  if (!sized) *rows = total;
  int64_t offset = -1;
  OwnedTensor recv_x = arena_tensor(comm.arena(), dtype, *rows, hidden, &offset);
  comm.publish_output(offset, first_row, seq);
  x_at->assign(size_t(R), nullptr);
  for (int d = 0; d < R; ++d) {
    const int l = t.local_of[size_t(d)];
    int64_t row = first_row[size_t(me)];
    const int64_t at = d == me ? offset : comm.wait_output(l, seq, &row);
    if (at >= 0) (*x_at)[size_t(d)] = comm.arena_data(l) + at + row * plan.hidden_bytes;
  }
  plan.direct_x = x_at;
  plan.x_in_place = recv_x.defined();
  return recv_x;
}

}  // namespace tessera::ep::detail
