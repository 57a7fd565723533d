// Which (source rank, token, top-k slot) triples each local expert of this rank receives, read from
// every rank's topk_idx in its buffer. The order - source rank, then token, then slot - fixes how
// tokens are blocked, so results never depend on timing or thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/mega_moe.h"

namespace tessera::mega_moe::detail {

struct Slot {
  int32_t rank, token, k;
};

// Token count this rank published for the current call (stored in its buffer's header).
int64_t& published_num_tokens(char* rank_buffer, const BufferLayout& layout);

// Throws naming `fn` and 'sym_buffer.topk_idx' if an entry of this rank's first num_tokens rows is
// outside [-1, num_experts).
void check_topk_idx(const char* fn, const SymmBuffer& buffer, int64_t num_tokens);

// result[e] lists the slots routed to local expert e (global expert rank * E_local + e).
std::vector<std::vector<Slot>> route_local_experts(const SymmBuffer& buffer);

}  // namespace tessera::mega_moe::detail
