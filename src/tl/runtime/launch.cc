// The TlRuntime of this process: blocks of a grid on tessera's thread pool, and the tile GEMM.
//
// Blocks are handed out in small runs from an atomic counter, so grids whose blocks differ in cost
// (causal attention) stay balanced; a block's result never depends on which thread ran it. Each pool
// thread gets one arena (its shared/fragment buffers) per launch, reused across the blocks it runs.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/spin_hints.h"
#include "tessera/core/cpu.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tl/runtime/library.h"
#include "tl/runtime/tile_gemm.h"

namespace tessera::tl {
namespace {

// Per-thread arena; grows, never shrinks.
void* arena(int64_t bytes) {
  thread_local AlignedPtr<char> buf;
  thread_local int64_t size = 0;
  if (bytes > size) {
    buf = aligned_array<char>(size_t(bytes));
    size = bytes;
  }
  return buf.get();
}

void launch(int64_t num_blocks, int64_t arena_bytes, TlBlockFn fn, void* ctx) {
  if (num_blocks <= 0) return;
  const int threads = int(num_blocks < num_threads() ? num_blocks : num_threads());
  if (threads <= 1) {
    // Inline, but as a parallel region: its AMX tile configuration is then checked once per launch,
    // not read back (sttilecfg, which waits for the tile products in flight) at every micro-kernel call.
    parallel_shares(
        [&](int, int) {
          void* a = arena(arena_bytes);
          for (int64_t b = 0; b < num_blocks; ++b) fn(ctx, b, a);
          store_fence();  // kernels may have written with non-temporal stores
        },
        1);
    return;
  }
  // Blocks are taken in runs of `chunk` consecutive ones: neighbouring blocks (usually neighbouring
  // memory) stay on one thread, and the last 1/16 of the grid still balances uneven block costs.
  const int64_t chunk = std::max<int64_t>(1, num_blocks / (int64_t(threads) * 16));
  std::atomic<int64_t> next{0};
  parallel_shares(
      [&](int, int) {
        void* a = arena(arena_bytes);
        for (int64_t b0; (b0 = next.fetch_add(chunk, std::memory_order_relaxed)) < num_blocks;)
          for (int64_t b = b0; b < b0 + chunk && b < num_blocks; ++b) fn(ctx, b, a);
        store_fence();
      },
      threads);
}

// Outputs larger than half the last-level cache are streamed (TESSERA_TL_STREAM_BYTES overrides; 0 = never).
// The cache counted is at most 32 MiB per logical CPU: no x86 part has more than about 12 MiB of L3 per
// core, so a larger share is a host's whole L3 seen from a VM that gets a fraction of it.
int64_t stream_bytes() {
  if (const int64_t n = env::integer("TESSERA_TL_STREAM_BYTES", -1, 0); n >= 0) return n > 0 ? n : INT64_MAX;
  const CpuFeatures& f = cpu_features();
  const int64_t cache = std::min<int64_t>(f.l3_bytes, int64_t(std::max(f.logical_cpus, 1)) << 25);
  return cache / 2;  // the inputs want the other half
}

void gemm(const TlGemmArgs* args) {
  tile_gemm(*args);
}

int32_t threads() {
  return int32_t(num_threads());
}

TlRuntime& runtime() {
  static TlRuntime rt = {TESSERA_TL_ABI_VERSION, launch, gemm, stream_bytes(), threads};
  return rt;
}

}  // namespace

const TlRuntime* host_runtime() {
  return &runtime();
}

void set_stream_bytes(int64_t bytes) {
  runtime().stream_bytes = bytes >= 0 ? bytes : stream_bytes();
}

}  // namespace tessera::tl
