// AVX-512 kernels of the bf16 top-k path (src/select/topk_bf16.cc): sample keys, the collect pass
// (packed candidates above a threshold), window keys of the candidates, counting, and the
// emit pass that writes the selection into the caller's outputs. Selections use vpcompressd into a
// register and plain stores (the memory form is microcoded and slow on AMD Zen 4/5). Must match
// select_bf16.cc in scalar/ entry for entry.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/avx512/key_range.h"
#include "backends/cpu/select_kernels.h"

namespace tessera::cpu {
namespace {

constexpr int kUnroll = 4;
// Elements ahead of the collect pass that it prefetches: the row comes from memory once, and the
// hardware prefetchers stop at page boundaries; 4096 was the best distance tried.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
constexpr int64_t kPrefetchAhead = 4096;

inline __m512i key16(__m512i h) {
  return _mm512_ternarylogic_epi32(h, _mm512_srai_epi16(h, 15), _mm512_set1_epi16(0x7FFF), 0x78);
}

inline __mmask32 live_mask32(int64_t left) {
  return left >= 32 ? ~__mmask32(0) : __mmask32((1u << left) - 1);
}
inline __mmask16 live_mask16(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

inline int16_t clamp16(int32_t v) {
  return int16_t(v < -32768 ? -32768 : v > 32767 ? 32767 : v);
}

void sample(const void* row, const int64_t* starts, int runs, int16_t* out) {
  const int16_t* r = static_cast<const int16_t*>(row);
  for (int j = 0; j < runs; ++j) _mm512_storeu_si512(out + 32 * j, key16(_mm512_loadu_si512(r + starts[j])));
}

// ---- collect pass ----

// A word order that makes unpacklo/unpackhi (which interleave within 128-bit lanes) yield elements
// 0-15 and 16-31 in order: word 8L + j holds element 4L + j, word 8L + 4 + j element 16 + 4L + j.
// One permute and two unpacks build the 32 packed candidates (about half the ops of widening each half).
inline __m512i unpack_order() {
  alignas(64) static const int16_t order[32] = {0, 1, 2,  3,  16, 17, 18, 19, 4,  5,  6,  7,  20, 21, 22, 23,
                                                8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
  return _mm512_load_si512(order);
}

// Appends the packed candidates of the lanes in m (32 keys k of elements at offset `at` from base).
// Sparse passes store only the first four lanes when no more passed: most of their compressions hold
// nothing or one, and a 64-byte store costs more than the compression.
template <bool kSparse>
inline int64_t append_packed(__mmask32 m, __m512i k, int32_t at, __m512i order, int32_t* packed, int64_t count) {
  const __m512i kp = _mm512_permutexvar_epi16(order, k);
  const __m512i ip = _mm512_add_epi16(order, _mm512_set1_epi16(int16_t(at)));
  for (int h = 0; h < 2; ++h) {
    const __mmask16 mh = __mmask16(m >> (16 * h));
    const __m512i p = h ? _mm512_unpackhi_epi16(ip, kp) : _mm512_unpacklo_epi16(ip, kp);
    const __m512i c = _mm512_maskz_compress_epi32(mh, p);
    const int n = __builtin_popcount(mh);
    if (kSparse && n <= 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + count), _mm512_castsi512_si128(c));
    } else {
      _mm512_storeu_si512(packed + count, c);
    }
    count += n;
  }
  return count;
}

#include "backends/cpu/select_streams.inc"

constexpr int64_t kCollectBlock = 32 * kUnroll;

// One block of kCollectBlock elements at pos: running min / max, its candidates appended to packed.
template <bool kSparse, bool kSkip>
inline int64_t collect_block(const int16_t* row, int64_t pos, int64_t base, __m512i lo1, __mmask32 enable,
                             __m512i order, __m512i* mn, __m512i* mx, int32_t* packed, int64_t count) {
  __m512i k[kUnroll];
  __mmask32 m[kUnroll];
#pragma GCC unroll 4
  for (int j = 0; j < kUnroll; ++j) {
    k[j] = key16(_mm512_loadu_si512(row + pos + 32 * j));
    m[j] = _mm512_cmpge_epi16_mask(k[j], lo1) & enable;
    *mn = _mm512_min_epi16(*mn, k[j]);
    *mx = _mm512_max_epi16(*mx, k[j]);
  }
  // Dense passes compress every vector (no branch to mispredict); sparse ones skip blocks without hits.
  if (!kSkip || (uint64_t(m[0]) | uint64_t(m[1]) | uint64_t(m[2]) | uint64_t(m[3])) != 0) {
#pragma GCC unroll 4
    for (int j = 0; j < kUnroll; ++j)
      count = append_packed<kSparse>(m[j], k[j], int32_t(pos + 32 * j - base), order, packed, count);
  }
  return count;
}

template <bool kSparse, bool kSkip>
void collect_impl(SelectCollectArgs* a) {
  const int16_t* row = static_cast<const int16_t*>(a->row);
  // key > lo  <=>  key >= lo + 1, which fits int16 unless nothing passes (lo == 32767).
  const __mmask32 enable = a->lo >= 32767 ? 0 : ~__mmask32(0);
  const __m512i lo1 = _mm512_set1_epi16(clamp16(a->lo + 1));
  const __m512i order = unpack_order();
  __m512i mn = _mm512_set1_epi16(clamp16(a->min_key)), mx = _mm512_set1_epi16(clamp16(a->max_key));
  const int64_t start = a->pos, end = a->end, base = a->base, cap = a->capacity;
  int32_t* packed = a->packed;

  // The whole blocks in several streams (select_streams.inc) when every candidate fits.
  const int64_t nblocks = (end - start) / kCollectBlock;
  const StreamRegions r = stream_regions(a->count, cap, kCollectBlock);
  if (streams_pay(nblocks * kCollectBlock * 2, a->expected_hits_per_1024 * (end - start) / 1024, r)) {
    __m512i smn = mn, smx = mx;
    int64_t counts[kSelectStreams];
    const bool done =
        scan_streams<kCollectBlock, 2>(row, start, nblocks, r.region, counts, [&](int s, int64_t pos, int64_t c) {
          return collect_block<kSparse, kSkip>(row, pos, base, lo1, enable, order, &smn, &smx, packed + r.start(s), c);
        });
    if (done) {
      a->count = join_regions(r, counts, [&](int64_t from, int64_t to, int64_t n) {
        memmove(packed + to, packed + from, size_t(n) * sizeof(int32_t));
      });
      a->pos = start + nblocks * kCollectBlock;
      mn = smn;
      mx = smx;
    }
  }
  int64_t pos = a->pos, count = a->count;

  NextRowPrefetch next_row(a->next, a->next_bytes, (end - pos) / kCollectBlock);
  while (pos + kCollectBlock <= end && count + kCollectBlock <= cap) {
    if (pos + kPrefetchAhead < end) {
#pragma GCC unroll 4
      for (int j = 0; j < kUnroll; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(row + pos + kPrefetchAhead + 32 * j), _MM_HINT_T0);
    }
    next_row.step();
    count = collect_block<kSparse, kSkip>(row, pos, base, lo1, enable, order, &mn, &mx, packed, count);
    pos += kCollectBlock;
  }
  next_row.rest();
  while (pos < end && count + 32 <= cap) {
    const __mmask32 live = live_mask32(end - pos);
    const __m512i k = key16(_mm512_maskz_loadu_epi16(live, row + pos));
    mn = _mm512_mask_min_epi16(mn, live, mn, k);
    mx = _mm512_mask_max_epi16(mx, live, mx, k);
    count = append_packed<false>(_mm512_mask_cmpge_epi16_mask(live, k, lo1) & enable, k, int32_t(pos - base), order,
                                 packed, count);
    pos += end - pos >= 32 ? 32 : end - pos;
  }
  a->pos = pos;
  a->count = count;
  if (pos == start) return;
  avx512::fold_key_range(mn, mx, &a->min_key, &a->max_key);
}

// Below about one hit per 128-element block, most blocks have none and skipping them pays; above it
// the skip branch mispredicts more often than it saves. Below one hit per 16 lanes, narrow stores pay.
void collect(SelectCollectArgs* a) {
  const int per_1024 = a->expected_hits_per_1024;
  if (per_1024 * 128 < 1024) {
    collect_impl<true, true>(a);
  } else if (per_1024 * 16 < 1024) {
    collect_impl<true, false>(a);
  } else {
    collect_impl<false, false>(a);
  }
}

// ---- window keys ----

int64_t window_keys(const int32_t* packed, int64_t n, int32_t lo, int32_t hi, int16_t* keys, int64_t* above) {
  const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  int64_t count = 0, up = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = live_mask16(n - i);
    const __m512i key = _mm512_srai_epi32(_mm512_maskz_loadu_epi32(live, packed + i), 16);
    const __mmask16 gt_hi = _mm512_mask_cmpgt_epi32_mask(live, key, vhi);
    const __mmask16 in = _kandn_mask16(gt_hi, _mm512_mask_cmpgt_epi32_mask(live, key, vlo));
    up += __builtin_popcount(gt_hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(keys + count),
                        _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(in, key)));
    count += __builtin_popcount(in);
  }
  *above = up;
  return count;
}

// ---- counting ----

// The sums stay in general registers (popcounts of the masks): a count is short, and a reduction of
// vector counters would add its latency to every bisection step.
void count2(const int16_t* keys, int64_t n, const int32_t t[2], int64_t counts[2]) {
  const __m512i t0 = _mm512_set1_epi16(int16_t(t[0])), t1 = _mm512_set1_epi16(int16_t(t[1]));
  int64_t a = 0, b = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i k0 = _mm512_loadu_si512(keys + i), k1 = _mm512_loadu_si512(keys + i + 32);
    a += __builtin_popcountll(uint64_t(_mm512_cmpgt_epi16_mask(k0, t0)) | uint64_t(_mm512_cmpgt_epi16_mask(k1, t0))
                                                                              << 32);
    b += __builtin_popcountll(uint64_t(_mm512_cmpgt_epi16_mask(k0, t1)) | uint64_t(_mm512_cmpgt_epi16_mask(k1, t1))
                                                                              << 32);
  }
  for (; i < n; i += 32) {
    const __mmask32 live = live_mask32(n - i);
    const __m512i k = _mm512_maskz_loadu_epi16(live, keys + i);
    a += __builtin_popcount(_mm512_mask_cmpgt_epi16_mask(live, k, t0));
    b += __builtin_popcount(_mm512_mask_cmpgt_epi16_mask(live, k, t1));
  }
  counts[0] = a;
  counts[1] = b;
}

// ---- emit ----

// Stores that never reach entry `selected`: whole vectors while there is room, masked near the end.
inline void store32x16(int32_t* out, int64_t at, int64_t selected, __m512i v) {
  const int64_t room = selected - at;
  if (room >= 16) {
    _mm512_storeu_si512(out + at, v);
  } else if (room > 0) {
    _mm512_mask_storeu_epi32(out + at, __mmask16((1u << room) - 1), v);
  }
}
inline void store64x8(int64_t* out, int64_t at, int64_t selected, __m512i v) {
  const int64_t room = selected - at;
  if (room >= 8) {
    _mm512_storeu_si512(out + at, v);
  } else if (room > 0) {
    _mm512_mask_storeu_epi64(out + at, __mmask8((1u << room) - 1), v);
  }
}
inline void store16x16(uint16_t* out, int64_t at, int64_t selected, __m256i v) {
  const int64_t room = selected - at;
  if (room >= 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + at), v);
  } else if (room > 0) {
    _mm256_mask_storeu_epi16(out + at, __mmask16((1u << room) - 1), v);
  }
}

// Keeps the lowest `n` set bits of m (n < popcount(m)).
inline __mmask16 lowest_bits(__mmask16 m, int64_t n) {
  uint32_t kept = 0, bits = m;
  for (int64_t j = 0; j < n; ++j) {
    kept |= bits & (0u - bits);
    bits &= bits - 1;
  }
  return __mmask16(kept);
}

template <bool kIdx64, bool kValues, bool kKeys>
void emit_impl(SelectEmitArgs* a) {
  int32_t* const index32 = a->index32;
  int64_t* const index64 = a->index64;
  uint16_t* const values = a->values;
  int32_t* const keys = a->keys;
  const int64_t n = a->n, selected = a->selected;
  const __m512i kth = _mm512_set1_epi32(a->kth), low16 = _mm512_set1_epi32(0xFFFF);
  // int32 indices carry the offset from the start (the sum wraps like the int32 store it becomes).
  const __m512i base32 = _mm512_set1_epi32(int32_t(uint32_t(a->base) + uint32_t(kIdx64 ? 0 : a->offset)));
  const __m512i base64 = _mm512_set1_epi64(a->base + a->offset);
  int64_t equal_left = a->equal_left, count = a->count;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = live_mask16(n - i);
    const __m512i p = _mm512_maskz_loadu_epi32(live, a->packed + i);
    const __m512i key = _mm512_srai_epi32(p, 16);
    __mmask16 keep = _mm512_mask_cmpgt_epi32_mask(live, key, kth);
    __mmask16 eq = _mm512_mask_cmpeq_epi32_mask(live, key, kth);
    if (eq) {
      if (__builtin_popcount(eq) > equal_left) eq = lowest_bits(eq, equal_left);  // the lowest indices win ties
      equal_left -= __builtin_popcount(eq);
      keep |= eq;
    }
    const __m512i local = _mm512_maskz_compress_epi32(keep, _mm512_and_si512(p, low16));
    if (kIdx64) {
      store64x8(index64, count, selected,
                _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(local)), base64));
      store64x8(index64, count + 8, selected,
                _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(local, 1)), base64));
    } else {
      store32x16(index32, count, selected, _mm512_add_epi32(local, base32));
    }
    if (kValues || kKeys) {
      const __m512i ck = _mm512_maskz_compress_epi32(keep, key);
      // The key map is its own inverse: bits = key ^ ((key >> 15) & 0x7FFF) on the low 16 bits.
      if (kValues)
        store16x16(values, count, selected,
                   _mm512_cvtepi32_epi16(
                       _mm512_ternarylogic_epi32(ck, _mm512_srai_epi32(ck, 15), _mm512_set1_epi32(0x7FFF), 0x78)));
      if (kKeys) store32x16(keys, count, selected, ck);
    }
    count += __builtin_popcount(keep);
  }
  a->equal_left = equal_left;
  a->count = count;
}

void emit(SelectEmitArgs* a) {
  if (a->keys) {
    if (a->index64) {
      a->values ? emit_impl<true, true, true>(a) : emit_impl<true, false, true>(a);
    } else {
      a->values ? emit_impl<false, true, true>(a) : emit_impl<false, false, true>(a);
    }
  } else if (a->index64) {
    a->values ? emit_impl<true, true, false>(a) : emit_impl<true, false, false>(a);
  } else {
    a->values ? emit_impl<false, true, false>(a) : emit_impl<false, false, false>(a);
  }
}

}  // namespace

SelectBf16Kernels select_bf16_kernels_avx512() {
  return {sample, collect, window_keys, count2, emit};
}

}  // namespace tessera::cpu
