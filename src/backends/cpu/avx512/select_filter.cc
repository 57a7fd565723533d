// The AVX-512 streaming filter and compaction of the top-k driver. Per 64-byte vector: one load, the ordered-key
// transform (shift + ternary logic), a compare against the threshold, running min/max; vectors with a
// hit append their passing lanes with vpcompressd into registers and plain stores (a compress straight
// to memory is microcoded and slow on AMD Zen 4/5). Four vectors per iteration share one branch, so
// the common no-hit case is a handful of ops per 256 bytes. Must match the scalar filter entry
// for entry (tests/cpp/select checks it).
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/avx512/key_range.h"
#include "backends/cpu/select_kernels.h"

namespace tessera::cpu {
namespace {

constexpr int kUnroll = 4;
// fp32 elements ahead of the scan that it prefetches (8 KiB): the hardware prefetchers stop at page
// boundaries (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md).
constexpr int64_t kPrefetchAhead = 2048;

// a ^ (b & c): the ordered key of value bits a with sign mask b and magnitude mask c.
inline __m512i key_f32(__m512i u, __m512i mag) {
  return _mm512_ternarylogic_epi32(u, _mm512_srai_epi32(u, 31), mag, 0x78);
}
inline __m512i key_bf16(__m512i h, __m512i mag) {
  return _mm512_ternarylogic_epi32(h, _mm512_srai_epi16(h, 15), mag, 0x78);
}

// A block with fewer hits than dense_hits() appends them one by one (tzcnt loop, key recomputed from
// the row in L1); denser blocks use vpcompressd on every vector. Measured on Zen 5: a 128-element bf16
// block costs ~32 cycles of compresses whatever its hit count, a scalar append ~3-4 cycles per hit
// (more when the branch on the hit count mispredicts, so the choice follows the expected density).
constexpr int kDenseHits = 12;

int dense_hits(const SelectFilterArgs* a, int block_elems) {
  const int expected = a->expected_hits_per_1024 * block_elems / 1024;
  return expected >= 6 ? 1 : expected <= 2 ? 64 : kDenseHits;
}

inline int64_t append_bits_f32(uint64_t bits, const int32_t* row, int64_t base, SelectFilterArgs* a, int64_t count) {
  int32_t* keys = a->keys;
  int32_t* index = a->index;
  while (bits) {
    const int64_t i = base + __builtin_ctzll(bits);
    const uint32_t u = uint32_t(row[i]);
    keys[count] = int32_t(u ^ (uint32_t(int32_t(u) >> 31) & 0x7FFFFFFFu));
    index[count] = int32_t(i);
    ++count;
    bits &= bits - 1;
  }
  return count;
}

inline int64_t append_bits_bf16(uint64_t bits, const int16_t* row, int64_t base, SelectFilterArgs* a, int64_t count) {
  int32_t* keys = a->keys;
  int32_t* index = a->index;
  while (bits) {
    const int64_t i = base + __builtin_ctzll(bits);
    const uint16_t h = uint16_t(row[i]);
    keys[count] = int32_t(int16_t(uint16_t(h ^ (uint16_t(int16_t(h) >> 15) & 0x7FFFu))));
    index[count] = int32_t(i);
    ++count;
    bits &= bits - 1;
  }
  return count;
}

inline void append16(__mmask16 m, __m512i keys, __m512i index, SelectFilterArgs* a, int64_t* count) {
  _mm512_storeu_si512(a->keys + *count, _mm512_maskz_compress_epi32(m, keys));
  _mm512_storeu_si512(a->index + *count, _mm512_maskz_compress_epi32(m, index));
  *count += __builtin_popcount(m);
}

#include "backends/cpu/select_streams.inc"

constexpr int64_t kBlockF32 = 16 * kUnroll;

// One block of kBlockF32 elements at pos: running min / max, and its hits appended to a's arrays.
inline int64_t f32_block(const int32_t* row, int64_t pos, __m512i thr, __m512i mag, int dense, __m512i* mn, __m512i* mx,
                         SelectFilterArgs* a, int64_t count) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i k[kUnroll];
  __mmask16 m[kUnroll];
#pragma GCC unroll 4
  for (int j = 0; j < kUnroll; ++j) {
    k[j] = key_f32(_mm512_loadu_si512(row + pos + 16 * j), mag);
    m[j] = _mm512_cmpgt_epi32_mask(k[j], thr);
    *mn = _mm512_min_epi32(*mn, k[j]);
    *mx = _mm512_max_epi32(*mx, k[j]);
  }
  const uint64_t hits = uint64_t(m[0]) | uint64_t(m[1]) << 16 | uint64_t(m[2]) << 32 | uint64_t(m[3]) << 48;
  if (hits) {
    if (__builtin_popcountll(hits) >= dense) {
#pragma GCC unroll 4
      for (int j = 0; j < kUnroll; ++j)
        append16(m[j], k[j], _mm512_add_epi32(iota, _mm512_set1_epi32(int32_t(pos + 16 * j))), a, &count);
    } else {
      count = append_bits_f32(hits, row, pos, a, count);
    }
  }
  return count;
}

void filter_f32(SelectFilterArgs* a) {
  const int32_t* row = static_cast<const int32_t*>(a->row);
  const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF), thr = _mm512_set1_epi32(a->threshold);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i mn = _mm512_set1_epi32(a->min_key), mx = _mm512_set1_epi32(a->max_key);
  const int dense = dense_hits(a, kBlockF32);
  __m512i smn = mn, smx = mx;  // kept only when the streamed scan completes
  if (filter_blocks_in_streams<kBlockF32, 4>(a, [&](int64_t pos, SelectFilterArgs* region, int64_t c) {
        return f32_block(row, pos, thr, mag, dense, &smn, &smx, region, c);
      })) {
    mn = smn;
    mx = smx;
  }
  int64_t pos = a->pos, count = a->count;
  const int64_t end = a->end, cap = a->capacity;

  while (pos + kBlockF32 <= end && count + kBlockF32 <= cap) {
    if (pos + kPrefetchAhead < end) {
#pragma GCC unroll 4
      for (int j = 0; j < kUnroll; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(row + pos + kPrefetchAhead + 16 * j), _MM_HINT_T0);
    }
    count = f32_block(row, pos, thr, mag, dense, &mn, &mx, a, count);
    pos += kBlockF32;
  }
  while (pos < end && count + 16 <= cap) {
    const __mmask16 live = end - pos >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (end - pos)) - 1);
    const __m512i k = key_f32(_mm512_maskz_loadu_epi32(live, row + pos), mag);
    mn = _mm512_mask_min_epi32(mn, live, mn, k);
    mx = _mm512_mask_max_epi32(mx, live, mx, k);
    const __mmask16 m = _mm512_mask_cmpgt_epi32_mask(live, k, thr);
    if (m) append16(m, k, _mm512_add_epi32(iota, _mm512_set1_epi32(int32_t(pos))), a, &count);
    pos += end - pos >= 16 ? 16 : end - pos;
  }
  a->pos = pos;
  a->count = count;
  a->min_key = _mm512_reduce_min_epi32(mn);
  a->max_key = _mm512_reduce_max_epi32(mx);
}

// Appends the passing lanes of 32 bf16 keys (two halves of 16, low half first).
inline void append32(__mmask32 m, __m512i k16, int64_t pos, __m512i iota, SelectFilterArgs* a, int64_t* count) {
  append16(__mmask16(m), _mm512_cvtepi16_epi32(_mm512_castsi512_si256(k16)),
           _mm512_add_epi32(iota, _mm512_set1_epi32(int32_t(pos))), a, count);
  append16(__mmask16(m >> 16), _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(k16, 1)),
           _mm512_add_epi32(iota, _mm512_set1_epi32(int32_t(pos + 16))), a, count);
}

void filter_bf16(SelectFilterArgs* a) {
  const int16_t* row = static_cast<const int16_t*>(a->row);
  // key > threshold  <=>  key >= threshold + 1, which fits int16 unless nothing or everything passes.
  const int64_t lo = int64_t(a->threshold) + 1;
  const __mmask32 enable = lo > 32767 ? 0 : ~__mmask32(0);
  const __m512i thr = _mm512_set1_epi16(int16_t(lo < -32768 ? -32768 : lo > 32767 ? 32767 : lo));
  const __m512i mag = _mm512_set1_epi16(0x7FFF);
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int16_t mn0 = int16_t(a->min_key < -32768 ? -32768 : a->min_key > 32767 ? 32767 : a->min_key);
  const int16_t mx0 = int16_t(a->max_key < -32768 ? -32768 : a->max_key > 32767 ? 32767 : a->max_key);
  __m512i mn = _mm512_set1_epi16(mn0), mx = _mm512_set1_epi16(mx0);
  const int64_t start = a->pos;
  int64_t pos = start, count = a->count;
  const int64_t end = a->end, cap = a->capacity;
  const int dense = dense_hits(a, 32 * kUnroll);

  while (pos + 32 * kUnroll <= end && count + 32 * kUnroll <= cap) {
    __m512i k[kUnroll];
    __mmask32 m[kUnroll];
#pragma GCC unroll 4
    for (int j = 0; j < kUnroll; ++j) {
      k[j] = key_bf16(_mm512_loadu_si512(row + pos + 32 * j), mag);
      m[j] = _mm512_cmpge_epi16_mask(k[j], thr) & enable;
      mn = _mm512_min_epi16(mn, k[j]);
      mx = _mm512_max_epi16(mx, k[j]);
    }
    const uint64_t lo_hits = uint64_t(m[0]) | uint64_t(m[1]) << 32, hi_hits = uint64_t(m[2]) | uint64_t(m[3]) << 32;
    if (lo_hits | hi_hits) {
      if (__builtin_popcountll(lo_hits) + __builtin_popcountll(hi_hits) >= dense) {
#pragma GCC unroll 4
        for (int j = 0; j < kUnroll; ++j) append32(m[j], k[j], pos + 32 * j, iota, a, &count);
      } else {
        count = append_bits_bf16(lo_hits, row, pos, a, count);
        count = append_bits_bf16(hi_hits, row, pos + 64, a, count);
      }
    }
    pos += 32 * kUnroll;
  }
  while (pos < end && count + 32 <= cap) {
    const int64_t left = end - pos;
    const __mmask32 live = left >= 32 ? ~__mmask32(0) : __mmask32((1u << left) - 1);
    const __m512i k = key_bf16(_mm512_maskz_loadu_epi16(live, row + pos), mag);
    mn = _mm512_mask_min_epi16(mn, live, mn, k);
    mx = _mm512_mask_max_epi16(mx, live, mx, k);
    const __mmask32 m = _mm512_mask_cmpge_epi16_mask(live, k, thr) & enable;
    if (m) append32(m, k, pos, iota, a, &count);
    pos += left >= 32 ? 32 : left;
  }
  a->pos = pos;
  a->count = count;
  if (pos == start) return;
  avx512::fold_key_range(mn, mx, &a->min_key, &a->max_key);
}

void filter(SelectFilterArgs* a) {
  if (a->elem_bytes == 2) {
    filter_bf16(a);
  } else {
    filter_f32(a);
  }
}

// 16 entries per step: keep = key > kth, or key == kth among the first take_equal such entries (when a
// vector holds more equal keys than are left, the lowest lanes win). Stores go to out <= i, behind the
// loads, so the compaction works in place.
int64_t compact(int32_t* keys, int32_t* index, int64_t n, int32_t kth, int64_t take_equal) {
  const __m512i t = _mm512_set1_epi32(kth);
  int64_t out = 0, equal_left = take_equal;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512i k = _mm512_maskz_loadu_epi32(live, keys + i), x = _mm512_maskz_loadu_epi32(live, index + i);
    __mmask16 eq = _mm512_mask_cmpeq_epi32_mask(live, k, t);
    int equal = __builtin_popcount(eq);
    while (equal > equal_left) {  // drop the highest equal lanes beyond the quota
      eq = __mmask16(eq & ~(0x8000u >> __builtin_clz(uint32_t(eq) << 16)));
      --equal;
    }
    equal_left -= equal;
    const __mmask16 keep = __mmask16(_mm512_mask_cmpgt_epi32_mask(live, k, t) | eq);
    _mm512_storeu_si512(keys + out, _mm512_maskz_compress_epi32(keep, k));
    _mm512_storeu_si512(index + out, _mm512_maskz_compress_epi32(keep, x));
    out += __builtin_popcount(keep);
  }
  return out;
}

}  // namespace

const SelectKernelTable* select_kernels_avx512() {
  static const SelectKernelTable table = {filter, compact, select_bf16_kernels_avx512()};
  return &table;
}

}  // namespace tessera::cpu
