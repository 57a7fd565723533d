// How much of P and dS flash_attn_varlen_bwd's row pass may keep for its key pass (mla_prefill_dense_bwd.cc):
// groups (request, KV head) whose stored P and dS would take more are recomputed by the key pass instead.
#pragma once

#include <cstddef>

namespace tessera::flash_mla {

// The limit in bytes per group (default 32 MiB).
size_t bwd_store_limit();
// Sets it (0: always recompute) and returns the previous one; for tests of the recomputing path.
size_t set_bwd_store_limit(size_t bytes);

}  // namespace tessera::flash_mla
