#include "moe/mega_moe_routing.h"

#include "tessera/core/error.h"

namespace tessera::mega_moe::detail {

int64_t& published_num_tokens(char* rank_buffer, const BufferLayout& layout) {
  return *reinterpret_cast<int64_t*>(rank_buffer + layout.header);
}

void check_topk_idx(const char* fn, const SymmBuffer& buffer, int64_t num_tokens) {
  const BufferShape& s = buffer.shape();
  const auto* idx = reinterpret_cast<const int64_t*>(buffer.data() + buffer.layout().topk_idx);
  for (int64_t i = 0; i < num_tokens * s.num_topk; ++i) {
    TESSERA_CHECK(idx[i] >= -1 && idx[i] < s.num_experts, fn,
                  ": argument 'sym_buffer.topk_idx' must hold experts in [-1, ", s.num_experts, "), got ", idx[i],
                  " at token ", i / s.num_topk, " slot ", i % s.num_topk);
  }
}

std::vector<std::vector<Slot>> route_local_experts(const SymmBuffer& buffer) {
  const BufferShape& s = buffer.shape();
  const BufferLayout& l = buffer.layout();
  const int experts_per_rank = s.num_experts / s.num_ranks;
  const int64_t first = int64_t(buffer.rank()) * experts_per_rank;
  std::vector<std::vector<Slot>> routes(static_cast<size_t>(experts_per_rank));
  for (int r = 0; r < s.num_ranks; ++r) {
    char* base = buffer.rank_data(r);
    const int64_t tokens = published_num_tokens(base, l);
    const auto* idx = reinterpret_cast<const int64_t*>(base + l.topk_idx);
    for (int64_t t = 0; t < tokens; ++t)
      for (int k = 0; k < s.num_topk; ++k) {
        const int64_t e = idx[t * s.num_topk + k] - first;
        if (e >= 0 && e < experts_per_rank) routes[size_t(e)].push_back({r, int32_t(t), k});
      }
  }
  return routes;
}

}  // namespace tessera::mega_moe::detail
