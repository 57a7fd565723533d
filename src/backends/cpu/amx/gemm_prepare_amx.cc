// The AMX GEMM set's a-side preparation (sources into tile order; see gemm_ukr_amx.cc for the
// layout) and the folding of power-of-two scales into the operands (GemmKernelSet::prepare_a_folded,
// fold_b_scales): a value times 2^e is the value with e added to its bf16 exponent field, done on the
// converted vectors before they are stored, so a folded preparation costs a few ops per 32 values.
#include "backends/cpu/amx/gemm_prepare_amx.h"

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/avx512bf16/f16_split.h"
#include "backends/cpu/avx512bf16/fp8_convert.h"

namespace tessera::cpu::amx {
namespace {

// Scales folded into a preparation: row r's values of K step s times scale[(s * 32 / group) * stride + r].
struct Fold {
  const float* scale = nullptr;
  int64_t stride = 0;
  int group = 0;
};

// bf16 exponent adds (e << 7 in every 16-bit lane) of a 2^e fp32 scale.
inline __m512i exponent_adds(float scale) {
  uint32_t u;
  std::memcpy(&u, &scale, 4);
  return _mm512_set1_epi16(short((int(u >> 23 & 0xFF) - 127) * 128));
}

// K step s (32 values) of a tile-order row at out + s * 512, the fold's scale applied.
inline void store_step(uint16_t* out, int s, __m512i v, const Fold* fold, int row) {
  if (fold)
    v = avx512bf16::bf16_times_powers_of_two(v,
                                             exponent_adds(fold->scale[(s * 32 / fold->group) * fold->stride + row]));
  _mm512_store_si512(out + s * 512, v);
}

// A thread's row-major staging buffer for sources the avx512bf16 set has to convert first.
struct Staging {
  void* data = nullptr;
  size_t bytes = 0;
  ~Staging() { std::free(data); }
  void* get(size_t want) {
    if (want > bytes) {
      std::free(data);
      bytes = (want + 4095) / 4096 * 4096;
      data = std::aligned_alloc(64, bytes);
    }
    return data;
  }
};

// Walks the 16-row groups of a tile-order block of `rows` rows (padded to whole groups) over kc
// values: fill(row, out) writes row `row`'s K steps at out + s * 512 (store_step); padding rows are
// zeroed here.
template <class Fill>
inline void for_each_tile_row(int rows, int kc, uint16_t* dst, const Fill& fill) {
  const int steps = kc / 32, groups = (rows + 15) / 16;
  for (int g = 0; g < groups; ++g)
    for (int r = 0; r < 16; ++r) {
      const int row = g * 16 + r;
      uint16_t* out = dst + int64_t(g) * 16 * kc + r * 32;
      if (row < rows) {
        fill(row, out);
      } else {
        for (int s = 0; s < steps; ++s) _mm512_store_si512(out + s * 512, _mm512_setzero_si512());
      }
    }
}

// Rows [0, rows) x K [0, kc) of a row-major bf16 block (row stride ld elements; K values at or beyond
// k_valid read as zero) into tile order at dst, zero-padded to whole 16-row groups.
void to_tile_order(const uint16_t* src, int64_t ld, int rows, int kc, int k_valid, uint16_t* dst, const Fold* fold) {
  const int steps = kc / 32;
  for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
    const uint16_t* in = src + row * ld;
    int s = 0;
    for (; s < steps && s * 32 + 32 <= k_valid; ++s) store_step(out, s, _mm512_loadu_si512(in + s * 32), fold, row);
    for (; s < steps; ++s) {
      const int left = k_valid - s * 32;
      const __mmask32 m = left <= 0 ? 0 : (left >= 32 ? ~0u : (1u << left) - 1);
      store_step(out, s, _mm512_maskz_loadu_epi16(m, in + s * 32), fold, row);
    }
  });
}

// Rows [0, rows) of an e4m3 source along K, K [k0, k0 + kc) (kc a multiple of 64), converted straight
// into tile order: each 64 values give K steps 2c and 2c + 1 of the row (lane order when the source asks
// for it, the same conversion the avx512bf16 set's staging copy does). K values at or beyond k_valid
// read as code 0 (+0.0), so a chunk that ends past K needs no staging copy. Against that staging copy
// followed by to_tile_order (fp8, 2 threads, separate processes, 6 rounds): M=128 N=7168 K=2048 x1.06,
// N=2112 K=7168 x1.09, N=24576 K=1536 x1.08; M=1024 x1.01-1.02.
void e4m3_to_tile_order(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int k_valid, uint16_t* dst,
                        const Fold* fold) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  const int steps = kc / 32;
  for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
    const char* in = static_cast<const char*>(src.data) + (r0 + row) * src.stride_r + k0;
    auto convert = [&](int s, __m512i codes) __attribute__((always_inline)) {
      __m512i lo, hi;
      avx512bf16::e4m3x64_to_bf16_in(t, src.lane_order, codes, &lo, &hi);
      store_step(out, s, lo, fold, row);
      store_step(out, s + 1, hi, fold, row);
    };
    int s = 0;
    for (; s < steps && s * 32 + 64 <= k_valid; s += 2) convert(s, _mm512_loadu_si512(in + s * 32));
    for (; s < steps; s += 2) {  // the chunk's end past K: masked loads, zero codes
      const int left = k_valid - s * 32;
      convert(s, _mm512_maskz_loadu_epi8(left <= 0 ? 0 : ~0ull >> (64 - left), in + s * 32));
    }
  });
}

// Rows [0, rows) of an e5m2 source along K (kc a multiple of 64) or of an fp16 one read as its [hi lo]
// split (GemmSrc::f16_split; k0, kc, k_valid count bf16 values, two per fp16 value), converted straight
// into tile order like e4m3_to_tile_order. Against the staging copy and to_tile_order (the bench's
// 1024^3 program, 2 threads, alternated): docs/notes/2026-12-05-tl-fp16-gemm.md.
void narrow_to_tile_order(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int k_valid, uint16_t* dst,
                          const Fold* fold) {
  const int steps = kc / 32;
  if (src.type == GemmSrcType::kE5M2) {
    for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
      const char* in = static_cast<const char*>(src.data) + (r0 + row) * src.stride_r + k0;
      for (int s = 0; s < steps; s += 2) {
        const int left = k_valid - s * 32;
        const __m512i codes = left >= 64 ? _mm512_loadu_si512(in + s * 32)
                                         : _mm512_maskz_loadu_epi8(left <= 0 ? 0 : ~0ull >> (64 - left), in + s * 32);
        __m512i lo, hi;
        avx512bf16::e5m2x64_to_bf16(codes, &lo, &hi);
        store_step(out, s, lo, fold, row);
        store_step(out, s + 1, hi, fold, row);
      }
    });
    return;
  }
  for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
    const uint16_t* in = static_cast<const uint16_t*>(src.data) + (r0 + row) * src.stride_r + k0 / 2;
    for (int s = 0; s < steps; ++s) {  // 16 fp16 values per K step
      const int left = (k_valid - s * 32 + 1) / 2;
      const __m256i halves = left >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + s * 16))
                                        : _mm256_maskz_loadu_epi16(left <= 0 ? 0 : (1u << left) - 1, in + s * 16);
      store_step(out, s, avx512bf16::f16x16_split_pairs(halves, src.f16_split), fold, row);
    }
  });
}

// Rows [0, rows) of an FP4 (e2m1) source packed along K, K [k0, k0 + kc) (kc a multiple of 64),
// converted straight into tile order: 32 bytes give K steps 2c and 2c + 1 of the row. Values at or
// beyond k_valid (even: two values a byte) read as zero. Against the avx512bf16 set's row-major conversion followed by
// to_tile_order: docs/notes/2026-12-06-folded-scales.md.
void e2m1_to_tile_order(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int k_valid, uint16_t* dst,
                        const Fold* fold) {
  static const avx512bf16::E2m1Tables t = avx512bf16::make_e2m1_tables();
  const int steps = kc / 32;
  for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
    const char* in = static_cast<const char*>(src.data) + (r0 + row) * src.stride_r + k0 / 2;
    for (int s = 0; s < steps; s += 2) {
      const int left = k_valid - s * 32;
      const __m512i bytes =
          left >= 64 ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + s * 16)))
                     : _mm512_zextsi256_si512(_mm256_maskz_loadu_epi8(
                           left <= 0 ? 0 : __mmask32(~0u >> (32 - (left + 1) / 2)), in + s * 16));
      __m512i lo, hi;
      avx512bf16::e2m1x64_to_bf16(t, bytes, &lo, &hi);
      store_step(out, s, lo, fold, row);
      store_step(out, s + 1, hi, fold, row);
    }
  });
}

const void* prepare(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                    int64_t* lda, const Fold* fold) {
  uint16_t* out = static_cast<uint16_t*>(buf);
  *lda = kc;
  if (src.type == GemmSrcType::kBF16 && src.stride_k == 1) {
    const int64_t left = k_total - k0;
    const int k_valid = left < kc ? int(left) : kc;
    to_tile_order(static_cast<const uint16_t*>(src.data) + r0 * src.stride_r + k0, src.stride_r, rows, kc, k_valid, out,
                  fold);
    return out;
  }
  if (src.type == GemmSrcType::kE4M3 && src.stride_k == 1 && kc % 64 == 0) {
    const int64_t left = k_total - k0;
    e4m3_to_tile_order(src, r0, rows, k0, kc, left < kc ? int(left) : kc, out, fold);
    return out;
  }
  if (src.type == GemmSrcType::kE2M1 && src.stride_k == 1 && !src.fp4_along_r && kc % 64 == 0) {
    const int64_t left = k_total - k0;
    e2m1_to_tile_order(src, r0, rows, k0, kc, left < kc ? int(left) : kc, out, fold);
    return out;
  }
  if (src.stride_k == 1 && ((src.type == GemmSrcType::kE5M2 && kc % 64 == 0) || src.type == GemmSrcType::kF16)) {
    const int64_t left = k_total - k0;
    narrow_to_tile_order(src, r0, rows, k0, kc, left < kc ? int(left) : kc, out, fold);
    return out;
  }
  // Other converted (fp4, e4m3 chunks of 32 mod 64) or strided sources: the avx512bf16 set's
  // conversion, then tile order, one 16-row group at a time so the row-major staging copy stays in L1.
  static thread_local Staging staging;
  void* rowmajor = staging.get(size_t(16) * kc * 2);
  const GemmKernelSet& base = *gemm_kernels_avx512bf16();
  for (int g = 0; g < rows; g += 16) {
    const int group_rows = rows - g < 16 ? rows - g : 16;
    int64_t ld = 0;
    const uint16_t* block =
        static_cast<const uint16_t*>(base.prepare_a(src, r0 + g, group_rows, k0, kc, k_total, rowmajor, &ld));
    const Fold rows_from_g = fold ? Fold{fold->scale + g, fold->stride, fold->group} : Fold{};
    to_tile_order(block, ld, group_rows, kc, kc, out + int64_t(g) * kc, fold ? &rows_from_g : nullptr);
  }
  return out;
}

}  // namespace

const void* prepare_a(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                      int64_t* lda) {
  return prepare(src, r0, rows, k0, kc, k_total, buf, lda, nullptr);
}

const void* prepare_a_folded(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                             int64_t* lda, const float* scale, int64_t scale_stride, int group) {
  const Fold fold{scale, scale_stride, group};
  return prepare(src, r0, rows, k0, kc, k_total, buf, lda, &fold);
}

// Packed b-panels (element (k, n) of panel p at [p * kc * nr + (k/2) * nr * 2 + n * 2 + k % 2]): per
// 16 columns and K group, one vector of exponent adds (column c's in both halves of dword c), added to
// the group's pair rows.
void fold_b_scales(void* panels, int cols, int nr, int kc, int group, const float* scale, int64_t scale_stride) {
  uint16_t* base = static_cast<uint16_t*>(panels);
  const __m512i exponent_field = _mm512_set1_epi32(0xFF);
  for (int c0 = 0; c0 < cols; c0 += 16) {
    uint16_t* block = base + int64_t(c0 / nr) * kc * nr + (c0 % nr) * 2;
    const __mmask16 valid = cols - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c0)) - 1);
    for (int g = 0; g * group < kc; ++g) {
      const __m512i bits = _mm512_maskz_loadu_epi32(valid, scale + g * scale_stride + c0);
      const __m512i e =
          _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 23), exponent_field), _mm512_set1_epi32(127));
      const __m512i low = _mm512_and_si512(_mm512_slli_epi32(e, 7), _mm512_set1_epi32(0xFFFF));
      const __m512i adds = _mm512_maskz_or_epi32(valid, low, _mm512_slli_epi32(low, 16));
      const int pair_end = (g + 1) * group < kc ? (g + 1) * group / 2 : kc / 2;
      for (int i = g * group / 2; i < pair_end; ++i) {
        uint16_t* row = block + int64_t(i) * nr * 2;
        _mm512_storeu_si512(row, avx512bf16::bf16_times_powers_of_two(_mm512_loadu_si512(row), adds));
      }
    }
  }
}

}  // namespace tessera::cpu::amx
