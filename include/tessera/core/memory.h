// tessera/core/memory.h - aligned, pre-faulted buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tessera {

constexpr size_t kCacheLine = 64;

struct AlignedFree {
  void operator()(void* p) const;
};
template <class T>
using AlignedPtr = std::unique_ptr<T[], AlignedFree>;

// 64-byte aligned (4 KiB for large sizes) allocation; throws Error(kRuntime) on failure.
void* aligned_alloc_bytes(size_t bytes);
template <class T>
AlignedPtr<T> aligned_array(size_t n) {
  return AlignedPtr<T>(static_cast<T*>(aligned_alloc_bytes(n * sizeof(T) + (n == 0))));
}
// Touches every page so first use in a timed or latency-critical path does not fault.
void prefault(void* p, size_t bytes);

// A per-thread scratch arena that grows and is reused across calls (packing buffers, workspaces).
// get() returns at least `bytes`, 64-byte aligned; the pointer is valid until the next get() on the
// same slot of the same thread.
void* thread_scratch(int slot, size_t bytes);
constexpr int kScratchSlots = 8;

}  // namespace tessera
