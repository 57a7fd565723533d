// Packing for the avx512bf16 kernel set: a-panel blocks (rows of bf16 K-values) and b-panels (nr
// columns of bf16 K-pairs, nr a multiple of 16). fp8 sources are converted to bf16 here, exactly (every
// e4m3 value is a bf16 value), with the lookups of fp8_convert.h: in "lane order" when the driver asks
// for it (src.lane_order; both operands then use it), else in natural order. e5m2 converts exactly too,
// and fp16 reads as its hi/lo split, one bf16 K pair per fp16 value (f16_split.h).
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/avx512bf16/f16_split.h"
#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

using avx512bf16::byte_mask;
using avx512bf16::half_mask;
using avx512bf16::word_mask;

using avx512bf16::E4m3Tables;

// Lookup tables for fp8/fp4 conversion. Functions copy them into locals once (by value): a reference
// would be re-read after every store (stores may alias any memory), adding 4+ loads per 64 values.
struct Luts {
  E4m3Tables e4m3;
  avx512bf16::E2m1Tables e2m1;
};
Luts luts() {
  static const Luts l = {avx512bf16::make_e4m3_tables(), avx512bf16::make_e2m1_tables()};
  return l;
}

bool is_fp8(const GemmSrc& s) {
  return s.type == GemmSrcType::kE4M3;
}
bool is_fp4(const GemmSrc& s) {
  return s.type == GemmSrcType::kE2M1;
}
bool is_f16(const GemmSrc& s) {
  return s.type == GemmSrcType::kF16;
}
// Bytes per unit of the row and K strides.
int stride_bytes(const GemmSrc& s) {
  return s.type == GemmSrcType::kBF16 || is_f16(s) ? 2 : 1;
}
// Byte offset of K value k in a K-contiguous row (fp4 packs two values per byte; k is even there; an
// fp16 value is a K pair of its split, k is even there too).
int64_t k_bytes(const GemmSrc& s, int64_t k) {
  return s.type == GemmSrcType::kBF16 ? 2 * k : is_fp4(s) ? k / 2 : k;
}
bool permuted(const GemmSrc& s) {
  return is_fp8(s) && s.lane_order;
}

// Natural K index of packed position k (k counted from a 64-aligned origin when permuted).
int64_t natural_k(const GemmSrc& s, int64_t k) {
  return permuted(s) ? (k & ~int64_t(63)) + avx512bf16::lane_order_to_natural(int(k & 63)) : k;
}

uint16_t scalar_to_bf16(const GemmSrc& s, int64_t r, int64_t k) {
  if (is_fp4(s)) {
    const uint8_t byte = s.fp4_along_r ? static_cast<const uint8_t*>(s.data)[(r / 2) * s.stride_r + k * s.stride_k]
                                       : static_cast<const uint8_t*>(s.data)[r * s.stride_r + (k / 2) * s.stride_k];
    const int code = (s.fp4_along_r ? (r & 1) : (k & 1)) ? byte >> 4 : byte & 0xF;
    static const uint16_t kBits[8] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0};
    return uint16_t(kBits[code & 7] | ((code & 8) ? 0x8000 : 0));
  }
  if (is_f16(s))
    return avx512bf16::f16_split_part(static_cast<const uint16_t*>(s.data)[r * s.stride_r + k / 2 * s.stride_k],
                                      s.f16_split, k);
  const int64_t off = r * s.stride_r + k * s.stride_k;
  if (s.type == GemmSrcType::kBF16) return static_cast<const uint16_t*>(s.data)[off];
  const uint8_t b = static_cast<const uint8_t*>(s.data)[off];
  if (s.type == GemmSrcType::kE5M2) return avx512bf16::e5m2_to_bf16_bits(b);
  return uint16_t(avx512bf16::e4m3_magnitude_to_bf16_bits(b & 0x7F) | ((b & 0x80) << 8));
}

// Loads 64 K-values of one K-contiguous row (`valid` of them, zeros beyond) as two bf16 vectors:
// v0 = packed positions 0..31, v1 = 32..63.
inline void load_k64(const GemmSrc& s, const Luts& L, const char* p, int64_t valid, __m512i* v0, __m512i* v1) {
  if (s.type == GemmSrcType::kBF16) {
    *v0 = _mm512_maskz_loadu_epi16(word_mask(valid), p);
    *v1 = _mm512_maskz_loadu_epi16(word_mask(valid - 32), p + 64);
    return;
  }
  if (is_fp4(s)) {
    const int64_t valid_bytes = valid <= 0 ? 0 : (valid + 1) / 2;
    const __m512i bytes = _mm512_zextsi256_si512(_mm256_maskz_loadu_epi8(__mmask32(byte_mask(valid_bytes)), p));
    avx512bf16::e2m1x64_to_bf16(L.e2m1, bytes, v0, v1);
    if (valid < 64 && (valid & 1)) {  // an odd K: the last byte's high nibble is beyond K
      const __mmask32 m0 = word_mask(valid), m1 = word_mask(valid - 32);
      *v0 = _mm512_maskz_mov_epi16(m0, *v0);
      *v1 = _mm512_maskz_mov_epi16(m1, *v1);
    }
    return;
  }
  if (is_f16(s)) {  // 32 fp16 values; K (even here) ends on a whole value
    const __m512i halves = _mm512_maskz_loadu_epi16(word_mask((valid + 1) / 2), p);
    *v0 = avx512bf16::f16x16_split_pairs(_mm512_castsi512_si256(halves), s.f16_split);
    *v1 = avx512bf16::f16x16_split_pairs(_mm512_extracti64x4_epi64(halves, 1), s.f16_split);
    return;
  }
  const __m512i bytes = valid >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(byte_mask(valid), p);
  if (s.type == GemmSrcType::kE5M2) return avx512bf16::e5m2x64_to_bf16(bytes, v0, v1);
  avx512bf16::e4m3x64_to_bf16_in(L.e4m3, s.lane_order, bytes, v0, v1);
}

// In-register transpose of a 16 x 16 matrix of dwords (here: bf16 K-pairs).
inline void transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // u[4i+j] lane L holds column 4L+j of row block i; gather lanes into r[4L+j].
  for (int j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i s1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i s2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i s3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[0 + j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
  }
}

// b-panels from a K-contiguous source: 16 rows x 64 K at a time, transposed into 32 pair-rows.
void pack_b_kcontig(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, uint16_t* dst) {
  const Luts L = luts();
  const int es = stride_bytes(s);
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    uint16_t* panel = dst + int64_t(p) * kc * nr;
    for (int grp = 0; grp < nr / 16; ++grp) {
      const int64_t rbase = r0 + p * nr + grp * 16;
      for (int kk = 0; kk < kc; kk += 64) {
        __m512i lo[16], hi[16];
        for (int i = 0; i < 16; ++i) {
          const int64_t row = rbase + i;
          if (row < r0 + rows && row < r_total) {
            const char* src = static_cast<const char*>(s.data) + row * s.stride_r * es + k_bytes(s, k0 + kk);
            load_k64(s, L, src, k_total - (k0 + kk), &lo[i], &hi[i]);
          } else {
            lo[i] = hi[i] = _mm512_setzero_si512();
          }
        }
        transpose16x16(lo);
        transpose16x16(hi);
        const int pairs = (kc - kk) / 2;
        for (int j = 0; j < 16 && j < pairs; ++j)
          _mm512_storeu_si512(panel + (kk / 2 + j) * (2 * nr) + grp * 32, lo[j]);
        for (int j = 0; j < 16 && j + 16 < pairs; ++j)
          _mm512_storeu_si512(panel + (kk / 2 + 16 + j) * (2 * nr) + grp * 32, hi[j]);
      }
    }
  }
}

// From a row-contiguous (MN-major) source: the K pair (k, k+1) of 16 consecutive rows starting at
// rbase as one vector of 16 dwords (row i's pair in dword i); rows at or beyond r_end and K at or
// beyond k_total read as zero.
inline __m512i zip_pair_rows(const GemmSrc& s, const Luts& L, int64_t rbase, int64_t r_end, int64_t k,
                             int64_t k_total) {
  alignas(64) static const uint16_t kZip[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const int es = stride_bytes(s);
  const __mmask16 rm = half_mask(r_end - rbase);
  if (is_f16(s)) {  // k even: the pair (k, k + 1) is one fp16 value's split
    const __m256i halves = _mm256_maskz_loadu_epi16(
        k < k_total ? rm : 0, static_cast<const char*>(s.data) + (rbase + k / 2 * s.stride_k) * 2);
    return avx512bf16::f16x16_split_pairs(halves, s.f16_split);
  }
  const __mmask16 m0 = k < k_total ? rm : 0, m1 = k + 1 < k_total ? rm : 0;
  const char* p0 = static_cast<const char*>(s.data) + (rbase + k * s.stride_k) * es;
  const char* p1 = p0 + s.stride_k * es;
  __m512i x;
  if (is_fp4(s)) {  // packed along rows (stride_r == 1 byte per two rows; rbase is even)
    const char* b0 = static_cast<const char*>(s.data) + rbase / 2 + k * s.stride_k;
    const __mmask16 bytes0 = k < k_total ? half_mask((r_end - rbase + 1) / 2) & 0xFF : 0;
    const __mmask16 bytes1 = k + 1 < k_total ? bytes0 : 0;
    const __m128i lo = _mm_maskz_loadu_epi8(bytes0, b0), hi = _mm_maskz_loadu_epi8(bytes1, b0 + s.stride_k);
    __m512i unused;
    avx512bf16::e2m1x64_to_bf16(L.e2m1, _mm512_zextsi128_si512(_mm_unpacklo_epi64(lo, hi)), &x, &unused);
    x = _mm512_maskz_mov_epi16(__mmask32(m0) | (__mmask32(m1) << 16), x);  // rows beyond r_end are zero
  } else if (s.type == GemmSrcType::kBF16) {
    x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi16(m0, p0)), _mm256_maskz_loadu_epi16(m1, p1),
                           1);
  } else if (s.type == GemmSrcType::kE5M2) {
    const __m128i b0 = _mm_maskz_loadu_epi8(m0, p0), b1 = _mm_maskz_loadu_epi8(m1, p1);
    x = _mm512_inserti64x4(_mm512_castsi256_si512(avx512bf16::e5m2x16_to_bf16(b0)), avx512bf16::e5m2x16_to_bf16(b1), 1);
  } else {
    const __m128i b0 = _mm_maskz_loadu_epi8(m0, p0), b1 = _mm_maskz_loadu_epi8(m1, p1);
    const __m512i bytes = _mm512_zextsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(b0), b1, 1));
    __m512i unused;
    avx512bf16::e4m3x64_to_bf16(L.e4m3, bytes, &x, &unused);
  }
  return _mm512_permutexvar_epi16(_mm512_load_si512(kZip), x);
}

// b-panels from a row-contiguous (MN-major) source: one zipped pair-row per 16 columns.
void pack_b_rcontig(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, uint16_t* dst) {
  const Luts L = luts();
  const int64_t r_end = r0 + rows < r_total ? r0 + rows : r_total;
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    uint16_t* panel = dst + int64_t(p) * kc * nr;
    for (int grp = 0; grp < nr / 16; ++grp) {
      const int64_t rbase = r0 + p * nr + grp * 16;
      for (int kp = 0; kp < kc / 2; ++kp)
        _mm512_storeu_si512(panel + kp * (2 * nr) + grp * 32,
                            zip_pair_rows(s, L, rbase, r_end, k0 + natural_k(s, 2 * kp), k_total));
    }
  }
}

void pack_b_generic(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, uint16_t* dst) {
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p)
    for (int kp = 0; kp < kc / 2; ++kp)
      for (int c = 0; c < nr; ++c)
        for (int h = 0; h < 2; ++h) {
          const int64_t r = r0 + p * nr + c, k = k0 + natural_k(s, 2 * kp + h);
          const bool valid = r < r0 + rows && r < r_total && k < k_total;
          dst[int64_t(p) * kc * nr + kp * 2 * nr + 2 * c + h] = valid ? scalar_to_bf16(s, r, k) : 0;
        }
}

void pack_b(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
            void* dst) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (s.stride_k == 1 && !s.fp4_along_r) return pack_b_kcontig(s, r0, rows, r_total, k0, kc, k_total, nr, d);
  if (s.stride_r == 1) return pack_b_rcontig(s, r0, rows, r_total, k0, kc, k_total, nr, d);
  pack_b_generic(s, r0, rows, r_total, k0, kc, k_total, nr, d);
}

// Copies/converts rows x kc K-values into buf (row stride kc), zero beyond k_total: 64 values per step.
// fp8 rows whose chunk lies entirely inside K: unmasked loads and stores, conversion chosen once (the
// general path is dominated by per-chunk branching).
template <bool kLane>
void copy_fp8_rows_full(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, uint16_t* buf) {
  const E4m3Tables t = luts().e4m3;
  for (int r = 0; r < rows; ++r) {
    const char* src = static_cast<const char*>(s.data) + (r0 + r) * s.stride_r + k0;
    uint16_t* out = buf + int64_t(r) * kc;
    for (int kk = 0; kk < kc; kk += 64) {
      __m512i lo, hi;
      avx512bf16::e4m3x64_to_bf16_in(t, kLane, _mm512_loadu_si512(src + kk), &lo, &hi);
      _mm512_storeu_si512(out + kk, lo);
      _mm512_storeu_si512(out + kk + 32, hi);
    }
  }
}

void copy_a_kcontig(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, uint16_t* buf) {
  const Luts L = luts();
  if (is_fp8(s) && kc % 64 == 0 && k0 + kc <= k_total) {
    return s.lane_order ? copy_fp8_rows_full<true>(s, r0, rows, k0, kc, buf)
                        : copy_fp8_rows_full<false>(s, r0, rows, k0, kc, buf);
  }
  const int es = stride_bytes(s);
  for (int r = 0; r < rows; ++r) {
    const char* src = static_cast<const char*>(s.data) + (r0 + r) * s.stride_r * es;
    uint16_t* out = buf + int64_t(r) * kc;
    for (int kk = 0; kk < kc; kk += 64) {
      __m512i lo, hi;
      load_k64(s, L, src + k_bytes(s, k0 + kk), k_total - (k0 + kk), &lo, &hi);
      _mm512_mask_storeu_epi16(out + kk, word_mask(kc - kk), lo);
      _mm512_mask_storeu_epi16(out + kk + 32, word_mask(kc - kk - 32), hi);
    }
  }
}

// MN-major source (stride_r == 1): 16 pairs of 16 rows are zipped, then a 16 x 16 dword transpose turns
// them into 16 rows of 16 pairs (~0.2 ops per value instead of a scalar gather).
void copy_a_rcontig(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, uint16_t* buf) {
  const Luts L = luts();
  for (int rb = 0; rb < rows; rb += 16)
    for (int kpb = 0; kpb < kc / 2; kpb += 16) {
      __m512i z[16];
      for (int j = 0; j < 16; ++j)
        z[j] = kpb + j < kc / 2 ? zip_pair_rows(s, L, r0 + rb, r0 + rows, k0 + natural_k(s, 2 * (kpb + j)), k_total)
                                : _mm512_setzero_si512();
      transpose16x16(z);
      const __mmask32 m = word_mask(kc - 2 * kpb);
      for (int i = 0; i < 16 && rb + i < rows; ++i)
        _mm512_mask_storeu_epi16(buf + int64_t(rb + i) * kc + 2 * kpb, m, z[i]);
    }
}

// Generic strides: element (r, k) at r*stride_r + k*stride_k.
void copy_a_strided(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, uint16_t* buf) {
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < kc; ++k) {
      const int64_t kk = k0 + natural_k(s, k);
      buf[int64_t(r) * kc + k] = kk < k_total ? scalar_to_bf16(s, r0 + r, kk) : 0;
    }
}

const void* prepare_a(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                      int64_t* lda) {
  if (s.type == GemmSrcType::kBF16 && s.stride_k == 1 && k0 + kc <= k_total) {
    *lda = s.stride_r;
    return static_cast<const uint16_t*>(s.data) + r0 * s.stride_r + k0;
  }
  uint16_t* b = static_cast<uint16_t*>(buf);
  *lda = kc;
  if (s.stride_k == 1 && !s.fp4_along_r) {
    copy_a_kcontig(s, r0, rows, k0, kc, k_total, b);
  } else if (s.stride_r == 1) {
    copy_a_rcontig(s, r0, rows, k0, kc, k_total, b);
  } else {
    copy_a_strided(s, r0, rows, k0, kc, k_total, b);
  }
  return b;
}

// kF16 as its split (GemmSrc::f16_split): the caller counts K in bf16 values, two per fp16 value.
bool accepts(GemmSrcType t) {
  return t == GemmSrcType::kBF16 || t == GemmSrcType::kE4M3 || t == GemmSrcType::kE2M1 || t == GemmSrcType::kE5M2 ||
         t == GemmSrcType::kF16;
}

}  // namespace

void gemm_ukr_avx512bf16_8x48(const UkrArgs& p);
void gemm_ukr_avx512bf16_14x32(const UkrArgs& p);
TailDotFn gemm_tail_dot_avx512bf16();

const GemmKernelSet* gemm_kernels_avx512bf16() {
  static const GemmKernelSet set = {
      "avx512bf16",
      /*k_align=*/2,
      /*elem_bytes=*/2,
      // K blocks of 1024, not an L1-sized 256: a quarter of the passes over the fp32 tile and longer
      // in-place a-panel rows; the b-panel (64 KiB) streams from L2. Measured (2 threads, bf16 and
      // fp8, M 128-2048): +2-6% per shape over 256, +1-4% over 512.
      // 14 x 32 on whole panels: 1.5% (K=7168) to 8% (K=2048, M=1033) below 8 x 48 (bf16, 2 threads).
      /*kc=*/1024,
      {{8, 48, gemm_ukr_avx512bf16_8x48, 1.0f}, {14, 32, gemm_ukr_avx512bf16_14x32, 0.96f}},
      /*num_tiles=*/2,
      accepts,
      prepare_a,
      pack_b,
      /*n_step=*/16,  // gemm_ukr_bf16.cc skips the empty vectors of a tail panel
      // Tails of up to 8 columns by dot products (gemm_tail_dot_bf16.cc): cheaper than a 16-column tail
      // panel; wider tails gained nothing.
      gemm_tail_dot_avx512bf16(),
      /*tail_dot_cols=*/8,
      /*fuses_e4m3_convert=*/true,  // gemm_ukr_bf16.cc
  };
  return &set;
}

}  // namespace tessera::cpu
