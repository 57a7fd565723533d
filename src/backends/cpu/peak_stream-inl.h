// Streaming read and copy loops behind peak_kernels.h's StreamKernels, written once over the vector
// width V (a folder's traits, f32_vec.h), used to measure cache and DRAM bandwidth. A 1 KiB block is
// kStreamBlockFloats / V::kLanes vector loads (16 zmm, 32 ymm). Internal linkage throughout (README.md,
// "Width templates").
//  read_sum: one block's loads into 8 independent vaddps chains (the adds never limit a load-bound
//    loop), one block from each of kReadStreams quarters of the range in turn: one sequential stream
//    per core left DRAM bandwidth unused here, and the library's GEMV kernels read several rows at
//    once (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md).
//  copy: a block's loads and stores; non-temporal stores skip the read-for-ownership of the
//    destination, which is how large memcpy implementations copy.
#pragma once

#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

template <class V>
inline void add_block(typename V::Vec* acc, const float* p) {
  constexpr int kVecs = int(kStreamBlockFloats) / V::kLanes;
#pragma GCC unroll 32
  for (int j = 0; j < kVecs; ++j) acc[j % 8] = V::add(acc[j % 8], V::load(p + V::kLanes * j));
}

template <class V>
float read_sum(const float* src, int64_t n) {
  typename V::Vec acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = V::zero();
  const int64_t quarter = n / kStreamBlockFloats / kReadStreams * kStreamBlockFloats;
  for (int64_t i = 0; i < quarter; i += kStreamBlockFloats)
    for (int s = 0; s < kReadStreams; ++s) add_block<V>(acc, src + s * quarter + i);
  for (int64_t i = kReadStreams * quarter; i < n; i += kStreamBlockFloats) add_block<V>(acc, src + i);
  for (int j = 1; j < 8; ++j) acc[0] = V::add(acc[0], acc[j]);
  return V::reduce_add(acc[0]);
}

// Non-temporal stores need destinations aligned to the vector size; the caller's buffers are 64-byte
// aligned.
template <class V>
void copy(float* dst, const float* src, int64_t n, int streaming) {
  constexpr int kVecs = int(kStreamBlockFloats) / V::kLanes;
  if (streaming) {
    for (int64_t i = 0; i < n; i += kStreamBlockFloats) {
#pragma GCC unroll 32
      for (int j = 0; j < kVecs; ++j) V::stream(dst + i + V::kLanes * j, V::load(src + i + V::kLanes * j));
    }
    _mm_sfence();
  } else {
    for (int64_t i = 0; i < n; i += kStreamBlockFloats) {
#pragma GCC unroll 32
      for (int j = 0; j < kVecs; ++j) V::store(dst + i + V::kLanes * j, V::load(src + i + V::kLanes * j));
    }
  }
}

}  // namespace
}  // namespace tessera::cpu
