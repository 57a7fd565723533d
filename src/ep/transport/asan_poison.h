// AddressSanitizer cannot see allocations made inside memory we map ourselves (the output arenas in
// shared memory): these mark such bytes unusable or usable again, so an access outside a live
// allocation is reported like a heap overflow or a use after free. No-ops in other builds.
#pragma once

#include <cstddef>

#include "core/asan.h"

#ifdef TESSERA_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tessera::ep::detail {

#ifdef TESSERA_ASAN
constexpr bool kAsanPoisons = true;
inline void asan_poison(const void* p, size_t bytes) {
  ASAN_POISON_MEMORY_REGION(p, bytes);
}
inline void asan_unpoison(const void* p, size_t bytes) {
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
}
#else
constexpr bool kAsanPoisons = false;
inline void asan_poison(const void*, size_t) {}
inline void asan_unpoison(const void*, size_t) {}
#endif

}  // namespace tessera::ep::detail
