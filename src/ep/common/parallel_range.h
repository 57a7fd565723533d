// Splits [0, n) over up to `threads` pool threads (inline when one suffices). Chunks are contiguous;
// ep results never depend on the split (each output row is produced by exactly one chunk).
#pragma once

#include <cstdint>
#include <functional>

namespace tessera::ep::detail {

void parallel_range(int threads, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tessera::ep::detail
