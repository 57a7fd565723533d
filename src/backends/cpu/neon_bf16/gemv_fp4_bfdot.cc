// Decode GEMV (M <= 8 activation rows) over packed FP4 (e2m1) weights with per-32 UE8M0 scales at the
// neon_bf16 level, on BFDOT (GemvFp4Args in gemm_kernel_set.h). A "piece" is 16 packed bytes of a weight
// row: 32 values, exactly one scale block.
//  - FP4 -> bf16 in registers: the low and high nibbles of the 16 bytes (even and odd values) each look
//    up the low and the high byte of their bf16 bits (four one-register TBLs), and zips pair the bytes
//    into four bf16 vectors: even values 0..14, 16..30, odd values 1..15, 17..31 (10 vector
//    instructions per 32 weights, 2 table registers). Every e2m1 value is a bf16 value: exact.
//  - The activations are made bf16 once per call, in the same order within each 32-value block.
//  - Each piece's four BFDOTs start a fresh fp32 chain per activation row; its block's power of two
//    (times the activation scale, when there is one) multiplies it into the running total (exact for
//    exponents 1..254, as the contract asks).
//  - Every weight row keeps its own chains, fixed by M alone: its bits do not depend on the other rows
//    of its block or on how rows were split between threads.
// BFDOT's sums (without FEAT_EBF16's FPCR.EBF) round to odd and flush denormals to zero, like
// gemv_bfdot.cc's.
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_row_count.h"
#include "backends/cpu/neon/f32_vec.h"
#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu {
namespace {

constexpr int64_t kChunk = 128;  // values per exponent word (4 blocks of 32)
constexpr int64_t kPiece = 32;   // values per piece (16 packed bytes, one scale block)
constexpr int64_t kPrefetchBytes = 8192;

// The low and high bytes of the bf16 bits of every e2m1 code (sign in bit 3; both zeros give +0).
struct Fp4Tables {
  uint8x16_t lo, hi;
};
Fp4Tables load_tables() {
  static const uint16_t kBits[8] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0};
  alignas(16) uint8_t lo[16], hi[16];
  for (int c = 0; c < 16; ++c) {
    const uint16_t mag = kBits[c & 7];
    const uint16_t bits = mag == 0 ? 0 : uint16_t(mag | ((c & 8) ? 0x8000 : 0));
    lo[c] = uint8_t(bits);
    hi[c] = uint8_t(bits >> 8);
  }
  return {vld1q_u8(lo), vld1q_u8(hi)};
}

// 16 packed bytes -> w[0]: values 0, 2, .., 14; w[1]: 16, .., 30; w[2]: 1, .., 15; w[3]: 17, .., 31.
inline void fp4x32_to_bf16(const Fp4Tables& t, const uint8_t* src, bfloat16x8_t w[4]) {
  const uint8x16_t x = vld1q_u8(src);
  const uint8x16_t even = vandq_u8(x, vdupq_n_u8(0x0F));
  const uint8x16_t odd = vshrq_n_u8(x, 4);
  const uint8x16_t even_lo = vqtbl1q_u8(t.lo, even), even_hi = vqtbl1q_u8(t.hi, even);
  const uint8x16_t odd_lo = vqtbl1q_u8(t.lo, odd), odd_hi = vqtbl1q_u8(t.hi, odd);
  w[0] = vreinterpretq_bf16_u8(vzip1q_u8(even_lo, even_hi));
  w[1] = vreinterpretq_bf16_u8(vzip2q_u8(even_lo, even_hi));
  w[2] = vreinterpretq_bf16_u8(vzip1q_u8(odd_lo, odd_hi));
  w[3] = vreinterpretq_bf16_u8(vzip2q_u8(odd_lo, odd_hi));
}

// The natural index (within a 32-value block) of position i of the converted order above.
constexpr int piece_value(int i) {
  return i < 16 ? 2 * i : 2 * (i - 16) + 1;
}

// Activation rows as bf16 in the weights' order, zero from K on: row m at dst + m * k_pad.
void prepare_activations(const GemvFp4Args& p, uint16_t* dst, int64_t k_pad) {
  const bool fp8 = p.a_type == GemmSrcType::kE4M3;
  for (int m = 0; m < p.m; ++m) {
    for (int64_t k = 0; k < k_pad; k += kPiece) {
      uint16_t* out = dst + m * k_pad + k;
      for (int i = 0; i < kPiece; ++i) {
        const int64_t kk = k + piece_value(i);
        uint16_t bits = 0;
        if (kk < p.k && fp8) {
          // e4m3 -> fp32 is exact and every e4m3 value is a bf16 value: the low 16 bits are zero.
          const float f = scalar_convert::e4m3_to_f32_scalar(static_cast<const uint8_t*>(p.a)[m * p.a_stride + kk]);
          uint32_t u;
          memcpy(&u, &f, 4);
          bits = uint16_t(u >> 16);
        } else if (kk < p.k) {
          bits = static_cast<const uint16_t*>(p.a)[m * p.a_stride + kk];
        }
        out[i] = bits;
      }
    }
  }
}

// A chunk's four exponent bytes (127, the factor 1, for blocks past K); sets *bad if one is 0 or 255.
inline uint32_t exponent_word(const GemvFp4Args& p, const uint8_t* exp_row, int64_t k, bool* bad) {
  const uint8_t* e = exp_row + (k / kChunk) * p.exp_word_bytes;
  uint32_t w;
  if (k + kChunk <= p.k) {
    memcpy(&w, e, 4);
  } else {
    const int64_t blocks = (p.k - k + 31) / 32;
    w = 0;
    for (int b = 0; b < 4; ++b) w |= uint32_t(b < blocks ? e[b] : 127) << (8 * b);
  }
  auto has_zero_byte = [](uint32_t x) { return ((x - 0x01010101u) & ~x & 0x80808080u) != 0; };
  *bad |= has_zero_byte(w) || has_zero_byte(~w);
  return w;
}

template <int M, int NB, bool kScaled>
bool row_block(const GemvFp4Args& p, const Fp4Tables& t, const uint16_t* a, int64_t k_pad, int64_t n) {
  // Pieces from k_full on would read past K: they come from zero-padded copies of the rows' tails.
  const int64_t k_full = p.k / kPiece * kPiece;
  const uint8_t* w[NB];
  const uint8_t* exps[NB];
  alignas(16) uint8_t tail[NB][kChunk / 2];
  for (int j = 0; j < NB; ++j) {
    w[j] = p.w + (n + j) * p.ldw;
    exps[j] = p.w_exp + (p.w_row0 + n + j) * p.exp_row_bytes;
    if (k_full < k_pad) {
      memset(tail[j], 0, sizeof tail[j]);
      memcpy(tail[j], w[j] + k_full / 2, size_t((p.k - k_full) / 2));
    }
  }
  // The same K offset of the block of rows at least kPrefetchBytes on is fetched while this block is
  // read (rows of a few KiB are too short for the hardware prefetcher to ramp up).
  const int64_t block_bytes = NB * (p.k / 2) > 0 ? NB * (p.k / 2) : 1;
  const int64_t ahead = (kPrefetchBytes + block_bytes - 1) / block_bytes * NB;
  const int64_t next = n + ahead + NB <= p.n1 ? ahead * p.ldw : 0;
  const int64_t a_group = kScaled ? p.a_group : k_pad;  // a multiple of 128: whole chunks
  bool bad = false;

  float32x4_t tot[M][NB];
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) tot[m][j] = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < k_pad; k += kChunk) {
    // 2^(e - 127) of each block: the exponent byte moved into the fp32 exponent field.
    float scale[NB][4];
    for (int j = 0; j < NB; ++j) {
      const uint32_t word = exponent_word(p, exps[j], k, &bad);
      for (int b = 0; b < 4; ++b) {
        const uint32_t bits = ((word >> (8 * b)) & 0xFF) << 23;
        memcpy(&scale[j][b], &bits, 4);
      }
    }
    float sa[M];
    for (int m = 0; m < M; ++m) sa[m] = kScaled ? p.a_scale[(k / a_group) * p.a_scale_stride + m] : 1.0f;
    for (int b = 0; b < 4; ++b) {
      const int64_t kp = k + b * kPiece;
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        if (next && ((kp / 2) & 63) == 0) __builtin_prefetch(w[j] + next + kp / 2, 0, 3);
        bfloat16x8_t wv[4];
        fp4x32_to_bf16(t, kp < k_full ? w[j] + kp / 2 : tail[j] + (kp - k_full) / 2, wv);
#pragma GCC unroll 8
        for (int m = 0; m < M; ++m) {
          const uint16_t* am = a + m * k_pad + kp;
          float32x4_t part = vdupq_n_f32(0.0f);
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) part = vbfdotq_f32(part, vreinterpretq_bf16_u16(vld1q_u16(am + 8 * q)), wv[q]);
          // The block scale is a power of two: part * (2^e * a_scale) rounds once, like
          // (part * 2^e) * a_scale would.
          const float s = kScaled ? scale[j][b] * sa[m] : scale[j][b];
          tot[m][j] = vfmaq_n_f32(tot[m][j], part, s);
        }
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) {
      p.out[m * p.ldo + n + j] = NeonF32::reduce_add(tot[m][j]);  // lanes summed in order 0..3
    }
  return !bad;
}

template <int M, bool kScaled>
bool rows(const GemvFp4Args& p, const uint16_t* a, int64_t k_pad) {
  // Weight rows per block: independent streams sharing each activation load, as many as 32 registers
  // hold: totals M * NB, 4 * NB weight vectors, 2 tables, a mask and the chains in flight.
  constexpr int kNb = M == 1 ? 4 : M <= 4 ? 2 : 1;
  const Fp4Tables t = load_tables();
  bool ok = true;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) ok &= row_block<M, kNb, kScaled>(p, t, a, k_pad, n);
  for (; n < p.n1; ++n) ok &= row_block<M, 1, kScaled>(p, t, a, k_pad, n);
  return ok;
}

template <bool kScaled>
bool dispatch(const GemvFp4Args& p, const uint16_t* a, int64_t k_pad) {
  return with_gemv_row_count(p.m, [&](auto rows_c) { return rows<decltype(rows_c)::value, kScaled>(p, a, k_pad); });
}

bool gemv_fp4(const GemvFp4Args& p) {
  if (p.n1 <= p.n0 || p.m <= 0) return true;
  const int64_t k_pad = (p.k + kChunk - 1) / kChunk * kChunk;
  uint16_t* a = static_cast<uint16_t*>(p.scratch);  // 8 * k_pad * 2 bytes of the 32 * k_pad given
  prepare_activations(p, a, k_pad);
  return p.a_scale ? dispatch<true>(p, a, k_pad) : dispatch<false>(p, a, k_pad);
}

}  // namespace

GemvFp4Fn gemv_fp4_kernel_neon_bf16() {
  return gemv_fp4;
}

}  // namespace tessera::cpu
