// Decode GEMV over packed FP4 (e2m1) weights with per-32 UE8M0 scales for the avx2 and avx512 levels, on
// fp32 FMAs (GemvFp4Args in gemm_kernel_set.h). One input vector of packed bytes (a "piece": 64 values
// on AVX2, 128 on AVX-512) is widened in registers:
//  - each nibble looks up both bytes of its value as a bfloat16 (two byte shuffles per 32 codes), a
//    zip of the two makes 16-bit bf16 lanes, and each vector of them gives two fp32 vectors by a shift
//    (even lanes) and a mask (odd lanes). No vcvtph2ps or cross-block extract: on Zen 3 those take the
//    FMA pipes' issue slots one per cycle, where shuffles and shifts take them two per cycle;
//  - the zips work within 128-bit blocks, so every fp32 vector holds values of one 32-value scale block
//    per group of 4 lanes. The products of a piece are summed per lane, then multiplied lane-wise by
//    the blocks' powers of two (exact for exponents 1..254, as the contract asks) into a running total
//    per activation-scale group, which the activation scale multiplies once per group.
// The activations are put into the same lane order once per call. Every weight row is its own chain
// (one row at a time: two rows' sums and pieces spilled on AVX2's 16 registers), so its bits do not
// depend on the rows beside it, on how rows were split between threads, or on the K blocks below.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/gemv_fp4.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_prefetch.h"
#include "backends/cpu/gemv_row_count.h"
#include "backends/cpu/scalar_convert.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DU8 = hn::Repartition<uint8_t, DF>;
using DU16 = hn::Repartition<uint16_t, DF>;
using DU32 = hn::Repartition<uint32_t, DF>;
using V = hn::Vec<DF>;
using VU16 = hn::Vec<DU16>;

constexpr int64_t kL = int64_t(hn::MaxLanes(DF()));  // fp32 lanes per vector
constexpr int64_t kPiece = 8 * kL;                   // values per input vector (4 kL bytes)
constexpr int64_t kChunk = 128;                      // values per exponent word (4 blocks of 32)
constexpr int kPiecesPerChunk = int(kChunk / kPiece);

// The bfloat16 e2m1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated: upper and lower bytes.
alignas(16) constexpr uint8_t kBf16HighBytes[16] = {0x00, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40,
                                                    0x80, 0xBF, 0xBF, 0xBF, 0xC0, 0xC0, 0xC0, 0xC0};
alignas(16) constexpr uint8_t kBf16LowBytes[16] = {0x00, 0x00, 0x80, 0xC0, 0x00, 0x40, 0x80, 0xC0,
                                                   0x00, 0x00, 0x80, 0xC0, 0x00, 0x40, 0x80, 0xC0};

// A piece's four vectors of bf16 values: [2 t + z] = nibble t (0: low, even K) through zip z (0:
// lower). Their even and odd 16-bit lanes widen to fp32 vectors 4 h + 2 t + z (see lane_value).
HWY_INLINE void widen_bf16(const uint8_t* HWY_RESTRICT src, VU16* bf16) {
  const DU8 du8;
  const auto high = hn::LoadDup128(du8, kBf16HighBytes);
  const auto low = hn::LoadDup128(du8, kBf16LowBytes);
  const auto x = hn::LoadU(du8, src);
  const auto nib = hn::Set(du8, 0x0F);
  const auto lo = hn::And(x, nib);
  const auto hi = hn::And(hn::BitCast(du8, hn::ShiftRight<4>(hn::BitCast(DU16(), x))), nib);
  const auto lo_low = hn::TableLookupBytes(low, lo), lo_high = hn::TableLookupBytes(high, lo);
  const auto hi_low = hn::TableLookupBytes(low, hi), hi_high = hn::TableLookupBytes(high, hi);
  bf16[0] = hn::ZipLower(DU16(), lo_low, lo_high);
  bf16[1] = hn::ZipUpper(DU16(), lo_low, lo_high);
  bf16[2] = hn::ZipLower(DU16(), hi_low, hi_high);
  bf16[3] = hn::ZipUpper(DU16(), hi_low, hi_high);
}

// The fp32 values of the even (kOdd = 0) or odd 16-bit lanes of a vector of bf16 values.
template <int kOdd>
HWY_INLINE V widen(VU16 bf16) {
  const DU32 du32;
  const auto pairs = hn::BitCast(du32, bf16);
  return hn::BitCast(DF(), kOdd ? hn::And(pairs, hn::Set(du32, 0xFFFF0000u)) : hn::ShiftLeft<16>(pairs));
}

// The value (0 .. kPiece-1 within the piece) lane l of fp32 vector 4 h + 2 t + z holds: the zips take
// bytes 8 z .. 8 z + 7 of each 16-byte block into 16-bit lanes, lane l takes 16-bit lane 2 l + h.
int64_t lane_value(int vec, int64_t l) {
  const int h = vec / 4, t = (vec / 2) % 2, z = vec % 2;
  const int64_t word = 2 * l + h;
  const int64_t byte = 16 * (word / 8) + 8 * z + word % 8;
  return 2 * byte + t;
}

// The 32-value block (0..3 of the chunk) lane l of every vector of piece `piece` comes from: lane l
// holds 16-bit lane 2 l + h of its 128-bit block (h = 0 or 1, see lane_value), and the 16 bytes of a
// 128-bit block are one block, so both halves h agree.
constexpr int64_t lane_block(int piece, int64_t l) {
  return piece * (kPiece / 32) + (2 * l) / 8;
}

// Per piece of a chunk: the bit offset of each lane's exponent byte in the chunk's exponent word.
struct ExponentShifts {
  alignas(64) uint32_t bits[kPiecesPerChunk][kL];
};
constexpr ExponentShifts make_exponent_shifts() {
  ExponentShifts t{};
  for (int pc = 0; pc < kPiecesPerChunk; ++pc)
    for (int64_t l = 0; l < kL; ++l) t.bits[pc][l] = uint32_t(8 * lane_block(pc, l));
  return t;
}
constexpr ExponentShifts kExponentShifts = make_exponent_shifts();

// Activation rows as fp32 in the weights' lane order, zero from K on: row m at dst + m * k_pad.
void prepare_activations(const GemvFp4Args& p, float* HWY_RESTRICT dst, int64_t k_pad) {
  int64_t order[kPiece];
  for (int v = 0; v < 8; ++v)
    for (int64_t l = 0; l < kL; ++l) order[v * kL + l] = lane_value(v, l);
  const bool fp8 = p.a_type == GemmSrcType::kE4M3;
  float natural[kPiece];
  for (int m = 0; m < p.m; ++m) {
    for (int64_t k = 0; k < k_pad; k += kPiece) {
      for (int64_t i = 0; i < kPiece; ++i) {
        const int64_t kk = k + i;
        if (kk >= p.k) {
          natural[i] = 0.0f;
        } else if (fp8) {
          natural[i] = scalar_convert::e4m3_to_f32_scalar(static_cast<const uint8_t*>(p.a)[m * p.a_stride + kk]);
        } else {
          const uint32_t bits = uint32_t(static_cast<const uint16_t*>(p.a)[m * p.a_stride + kk]) << 16;
          memcpy(&natural[i], &bits, 4);
        }
      }
      float* out = dst + m * k_pad + k;
      for (int64_t i = 0; i < kPiece; ++i) out[i] = natural[order[i]];
    }
  }
}

// A chunk's four exponent bytes, 127 (the factor 1) for blocks past K.
HWY_INLINE uint32_t exponent_word(const GemvFp4Args& p, const uint8_t* exp_row, int64_t k) {
  const uint8_t* e = exp_row + (k / kChunk) * p.exp_word_bytes;
  uint32_t w;
  if (k + kChunk <= p.k) {
    memcpy(&w, e, 4);
  } else {
    const int64_t blocks = (p.k - k + 31) / 32;
    w = 0;
    for (int b = 0; b < 4; ++b) w |= uint32_t(b < blocks ? e[b] : 127) << (8 * b);
  }
  return w;
}

// Bit 7 of byte i is set where byte i of x is 0 (and possibly where a lower byte is): a word check
// that costs a few integer operations per chunk, beside the vector work.
HWY_INLINE uint32_t zero_byte_bits(uint32_t x) {
  return (x - 0x01010101u) & ~x & 0x80808080u;
}

// The sums of one weight row between K blocks: per activation row, the open activation-scale
// group's sum (weight scales applied) and the total over the closed groups.
template <int M>
struct RowSums {
  alignas(64) float grp[M][kL];  // plain floats: a struct of vectors gets a constructor without the
  alignas(64) float tot[M][kL];  // target's attributes (NEON builds refuse to inline into it)
};

// Adds values [k0, k1) of weight row n (k0, k1 multiples of kChunk) to its sums, and writes its
// outputs when k1 is the end. `pf` (or null) is fetched at the offset of each chunk. Returns false
// where a block exponent in the span is 0 or 255.
template <int M, bool kScaled>
bool row_span(const GemvFp4Args& p, const float* HWY_RESTRICT a, int64_t k_pad, int64_t n, int64_t k0, int64_t k1,
              const uint8_t* pf, RowSums<M>* sums) {
  const DF df;
  const DU32 du32;
  const int64_t row_bytes_full = p.k / kPiece * kPiece / 2;  // pieces before it are read in place
  const uint8_t* w = p.w + n * p.ldw;
  const uint8_t* exps = p.w_exp + (p.w_row0 + n) * p.exp_row_bytes;
  alignas(64) uint8_t tail[kChunk / 2];  // the K tail's pieces, zero past K
  if (row_bytes_full * 2 < p.k && k1 * 2 > row_bytes_full * 4) {
    memset(tail, 0, sizeof tail);
    memcpy(tail, w + row_bytes_full, size_t(p.k / 2 - row_bytes_full));
  }
  const int64_t a_group = kScaled ? p.a_group : k_pad;                             // a multiple of 128: whole chunks
  int64_t group_end = k0 == 0 ? a_group : (k0 + a_group - 1) / a_group * a_group;  // the next group to close
  uint32_t bad_bytes = 0;
  V grp[M], tot[M];
  for (int m = 0; m < M; ++m) {
    grp[m] = hn::Load(df, sums->grp[m]);
    tot[m] = hn::Load(df, sums->tot[m]);
  }
  auto close_group = [&](int64_t group) {
    for (int m = 0; m < M; ++m) {
      tot[m] = kScaled ? hn::MulAdd(grp[m], hn::Set(df, p.a_scale[group * p.a_scale_stride + m]), tot[m])
                       : hn::Add(tot[m], grp[m]);
      grp[m] = hn::Zero(df);
    }
  };
  for (int64_t k = k0; k < k1; k += kChunk) {
    if (k == group_end) {
      close_group(k / a_group - 1);
      group_end += a_group;
    }
    if (pf) prefetch_weights_l2(pf + (k - k0) / 2);  // a chunk is one 64-byte line
    const uint32_t exp_word = exponent_word(p, exps, k);
    bad_bytes |= zero_byte_bits(exp_word) | zero_byte_bits(~exp_word);  // an exponent of 0 or 255
    const auto word = hn::Set(du32, exp_word);
#pragma GCC unroll 2
    for (int pc = 0; pc < kPiecesPerChunk; ++pc) {
      const int64_t kp = k + pc * kPiece;
      VU16 bf16[4];
      widen_bf16(2 * row_bytes_full > kp ? w + kp / 2 : tail + (kp / 2 - row_bytes_full), bf16);
      // 2^(e - 127) per lane: the lane's exponent byte moved into the fp32 exponent field.
      const V scale = hn::BitCast(
          df, hn::ShiftLeft<23>(hn::And(hn::Shr(word, hn::Load(du32, kExponentShifts.bits[pc])), hn::Set(du32, 0xFF))));
      const float* ak = a + kp;
      if constexpr (M <= 2) {
        // Two chains of four products (vectors 0-3 and 4-7) per row, added, then scaled into the group.
        V wv[8];
        for (int q = 0; q < 4; ++q) {
          wv[q] = widen<0>(bf16[q]);
          wv[4 + q] = widen<1>(bf16[q]);
        }
        for (int m = 0; m < M; ++m) {
          const float* am = ak + m * k_pad;
          V part0 = hn::Mul(hn::LoadU(df, am), wv[0]);
          V part1 = hn::Mul(hn::LoadU(df, am + 4 * kL), wv[4]);
          for (int q = 1; q < 4; ++q) {
            part0 = hn::MulAdd(hn::LoadU(df, am + q * kL), wv[q], part0);
            part1 = hn::MulAdd(hn::LoadU(df, am + (4 + q) * kL), wv[4 + q], part1);
          }
          grp[m] = hn::MulAdd(hn::Add(part0, part1), scale, grp[m]);
        }
      } else {
        // One half of the piece at a time (four widened vectors live, not eight: the rows' sums need
        // the registers), each half's chain of four scaled into the group.
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          V wv[4];
          for (int q = 0; q < 4; ++q) wv[q] = h ? widen<1>(bf16[q]) : widen<0>(bf16[q]);
#pragma GCC unroll 8
          for (int m = 0; m < M; ++m) {
            const float* am = ak + m * k_pad + 4 * h * kL;
            V part = hn::Mul(hn::LoadU(df, am), wv[0]);
            for (int q = 1; q < 4; ++q) part = hn::MulAdd(hn::LoadU(df, am + q * kL), wv[q], part);
            grp[m] = hn::MulAdd(part, scale, grp[m]);
          }
        }
      }
    }
  }
  if (k1 == k_pad) {
    close_group((k_pad - 1) / a_group);
    for (int m = 0; m < M; ++m) p.out[m * p.ldo + n] = hn::GetLane(hn::SumOfLanes(df, tot[m]));
  }
  for (int m = 0; m < M; ++m) {
    hn::Store(grp[m], df, sums->grp[m]);
    hn::Store(tot[m], df, sums->tot[m]);
  }
  return bad_bytes == 0;
}

// Rows [n0, n1) in tiles of kTile rows, each tile over K in blocks whose activations (M rows of
// fp32) stay within half of L1 when they do not fit the whole L1. Every weight row re-reads all M
// activation rows; from L2 those reads bound M >= 2 (64 KiB per weight row at M = 4, K = 4096), where
// one row's (M = 1) do not, and there whole rows read faster from DRAM (M = 1, K = 16384: 28.5
// against 25.5 G weights/s in blocks).
template <int M, bool kScaled>
bool rows(const GemvFp4Args& p, const float* a, int64_t k_pad) {
  constexpr int64_t kTile = 16;
  constexpr int64_t kActivationBytes = 16384;
  const bool whole_rows = M == 1 || 4 * M * k_pad <= 2 * kActivationBytes;  // within L1 anyway
  const int64_t k_block = whole_rows ? k_pad : HWY_MAX(kChunk, kActivationBytes / (4 * M) / kChunk * kChunk);
  RowSums<M> sums[kTile];
  bool ok = true;
  for (int64_t n = p.n0; n < p.n1; n += kTile) {
    const int64_t tile = HWY_MIN(kTile, p.n1 - n);
    for (int64_t r = 0; r < tile; ++r) memset(&sums[r], 0, sizeof sums[r]);
    for (int64_t k0 = 0; k0 < k_pad; k0 += k_block) {
      const int64_t k1 = HWY_MIN(k_pad, k0 + k_block);
      // Software pipeline: the span read about kGemvPrefetchBytes later in this order (rows of a tile,
      // then the tile's next K block, then the next tile) is fetched while this one is read.
      const int64_t span_bytes = (k1 - k0) / 2;
      const int64_t ahead = (kGemvPrefetchBytes + span_bytes - 1) / span_bytes;
      for (int64_t r = 0; r < tile; ++r) {
        const uint8_t* pf = nullptr;
        if (r + ahead < tile) {
          pf = p.w + (n + r + ahead) * p.ldw + k0 / 2;
        } else if (k1 < k_pad && r + ahead - tile < tile) {
          pf = p.w + (n + r + ahead - tile) * p.ldw + k1 / 2;
        } else if (n + r + ahead < p.n1) {
          pf = p.w + (n + r + ahead) * p.ldw;
        }
        ok &= row_span<M, kScaled>(p, a, k_pad, n + r, k0, k1, pf, &sums[r]);
      }
    }
  }
  return ok;
}

template <bool kScaled>
bool dispatch(const GemvFp4Args& p, const float* a, int64_t k_pad) {
  return with_gemv_row_count(p.m, [&](auto rows_c) { return rows<decltype(rows_c)::value, kScaled>(p, a, k_pad); });
}

bool gemv_fp4(const GemvFp4Args& p) {
  const int64_t k_pad = (p.k + kChunk - 1) / kChunk * kChunk;
  float* a = static_cast<float*>(p.scratch);
  prepare_activations(p, a, k_pad);
  return p.a_scale ? dispatch<true>(p, a, k_pad) : dispatch<false>(p, a, k_pad);
}

}  // namespace

GemvFp4Fn gemv_fp4_fn() {
  return gemv_fp4;
}
#endif
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
GemvFp4Fn gemv_fp4_kernel_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, gemv_fp4_fn);
}
}  // namespace tessera::cpu
#endif
