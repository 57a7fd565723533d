#include "tessera/core/memory.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera {

void AlignedFree::operator()(void* p) const {
  std::free(p);
}

void* aligned_alloc_bytes(size_t bytes) {
  const size_t align = bytes >= (1u << 20) ? 4096 : kCacheLine;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded ? rounded : align);
  if (!p) fail(ErrorCode::kRuntime, "out of memory allocating ", bytes, " bytes");
  return p;
}

void prefault(void* p, size_t bytes) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  volatile char* c = static_cast<volatile char*>(p);
  for (size_t off = 0; off < bytes; off += page) c[off] = c[off];
}

namespace {
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~Scratch() { std::free(ptr); }
};
thread_local Scratch t_scratch[kScratchSlots];
}  // namespace

void* thread_scratch(int slot, size_t bytes) {
  Scratch& s = t_scratch[slot];
  if (s.bytes < bytes) {
    std::free(s.ptr);
    s.ptr = nullptr;
    const size_t grown = bytes + bytes / 4;
    s.ptr = aligned_alloc_bytes(grown);
    s.bytes = grown;
  }
  return s.ptr;
}

}  // namespace tessera
