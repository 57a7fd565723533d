// Streaming read and copy loops on 256-bit registers, used to measure cache and DRAM bandwidth.
// read_sum: 32 ymm loads per 1 KiB block into 8 independent vaddps chains, one block from each of
// four quarters of the range in turn (see the avx512 file for why). copy: 32 ymm loads and
// stores per block; non-temporal stores skip the read-for-ownership of the destination.
#include <immintrin.h>

#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

inline void add_block(__m256* acc, const float* p) {
#pragma GCC unroll 32
  for (int j = 0; j < 32; ++j) acc[j % 8] = _mm256_add_ps(acc[j % 8], _mm256_loadu_ps(p + 8 * j));
}

float read_sum(const float* src, int64_t n) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  const int64_t quarter = n / kStreamBlockFloats / kReadStreams * kStreamBlockFloats;
  for (int64_t i = 0; i < quarter; i += kStreamBlockFloats)
    for (int s = 0; s < kReadStreams; ++s) add_block(acc, src + s * quarter + i);
  for (int64_t i = kReadStreams * quarter; i < n; i += kStreamBlockFloats) add_block(acc, src + i);
  for (int j = 1; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

// Non-temporal stores need 32-byte aligned destinations; the caller's buffers are 64-byte aligned.
void copy(float* dst, const float* src, int64_t n, int streaming) {
  if (streaming) {
    for (int64_t i = 0; i < n; i += kStreamBlockFloats) {
#pragma GCC unroll 32
      for (int j = 0; j < 32; ++j) _mm256_stream_ps(dst + i + 8 * j, _mm256_loadu_ps(src + i + 8 * j));
    }
    _mm_sfence();
  } else {
    for (int64_t i = 0; i < n; i += kStreamBlockFloats) {
#pragma GCC unroll 32
      for (int j = 0; j < 32; ++j) _mm256_storeu_ps(dst + i + 8 * j, _mm256_loadu_ps(src + i + 8 * j));
    }
  }
}

constexpr StreamKernels kKernels{"avx2", read_sum, copy};

}  // namespace

const StreamKernels* stream_kernels_avx2() {
  return &kKernels;
}

}  // namespace tessera::cpu
