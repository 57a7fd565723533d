// Streaming read and copy loops on 512-bit registers, used to measure cache and DRAM bandwidth.
// read_sum: 16 zmm loads per 1 KiB block into 8 independent vaddps chains (the adds never limit a
// load-bound loop), one block from each of four quarters of the range in turn: one sequential stream
// per core left DRAM bandwidth unused here (2 threads: 40-44 GB/s with one stream each, 48-50 GB/s
// with two or four, measured in one run), and the library's GEMV kernels read several rows at once. copy: 16 zmm loads and 16 stores per block; non-temporal stores skip the
// read-for-ownership of the destination, which is how large memcpy implementations copy.
#include <immintrin.h>

#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

inline void add_block(__m512* acc, const float* p) {
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j % 8] = _mm512_add_ps(acc[j % 8], _mm512_loadu_ps(p + 16 * j));
}

float read_sum(const float* src, int64_t n) {
  __m512 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm512_setzero_ps();
  const int64_t quarter = n / kStreamBlockFloats / kReadStreams * kStreamBlockFloats;
  for (int64_t i = 0; i < quarter; i += kStreamBlockFloats)
    for (int s = 0; s < kReadStreams; ++s) add_block(acc, src + s * quarter + i);
  for (int64_t i = kReadStreams * quarter; i < n; i += kStreamBlockFloats) add_block(acc, src + i);
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_reduce_add_ps(acc[0]);
}

// Non-temporal stores need 64-byte aligned destinations; the caller passes 64-byte aligned buffers.
void copy(float* dst, const float* src, int64_t n, int streaming) {
  if (streaming) {
    for (int64_t i = 0; i < n; i += kStreamBlockFloats) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) _mm512_stream_ps(dst + i + 16 * j, _mm512_loadu_ps(src + i + 16 * j));
    }
    _mm_sfence();
  } else {
    for (int64_t i = 0; i < n; i += kStreamBlockFloats) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) _mm512_storeu_ps(dst + i + 16 * j, _mm512_loadu_ps(src + i + 16 * j));
    }
  }
}

constexpr StreamKernels kKernels{"avx512", read_sum, copy};

}  // namespace

const StreamKernels* stream_kernels_avx512() {
  return &kKernels;
}

}  // namespace tessera::cpu
