// Lane masks for the avx512bf16 kernel files: the first `valid` lanes set, clamped to the register.
// Static (folder-private, see backends/cpu/README.md rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>

namespace tessera::cpu::avx512bf16 {

static inline __mmask64 byte_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 64) return ~__mmask64(0);
  return (__mmask64(1) << valid) - 1;
}
static inline __mmask32 word_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 32) return 0xFFFFFFFFu;
  return (__mmask32(1) << valid) - 1;
}
static inline __mmask16 half_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 16) return 0xFFFF;
  return __mmask16((1u << valid) - 1);
}

}  // namespace tessera::cpu::avx512bf16
