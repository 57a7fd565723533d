// The MLA kernel set of the neon_bf16 level (MlaKernelSet in mla_kernel_set.h): bf16 K rows and
// queries, fp32 accumulation with BFDOT, p rounded to bf16 for p.v, the numerics of the x86 bf16 sets.
// One attend_tile = scores -> online softmax -> p.v with the rescale folded in:
//  - scores s[t][c] = k_t . q_c: queries packed as K pairs [d/2][mp][2] (mp = rows rounded up to 4), so
//    a q register holds one pair of D for 4 query rows; each K row is loaded 8 values (4 pairs) at a
//    time and multiplied by lane (vbfdotq_laneq_f32): K rows are read in place, query rows come out along
//    the lanes, and the softmax works on 4 rows per vector without shuffles. Register tile: 4 tokens x
//    4 query vectors (16 accumulators).
//  - softmax: column-wise, exp by a degree-6 polynomial (the avx512bf16 set's), p as bf16 token pairs.
//  - p.v: V rows zipped into token pairs per 16-column block ([t/2][16][2], natural column order), p
//    pairs of 4 rows in one register, BFDOT by lane: 4 rows x 16 columns (16 accumulators) per tile.
// Tiles hold up to 96 tokens; a partial tile is padded with zero rows.
//
// Expected rate (Neoverse V1/V2: four 128-bit SIMD pipes, 3 loads per cycle; BFDOT = 8 multiply-adds):
// scores issue 16 query loads and 4 key loads per 64 BFDOTs (4 pairs of D, 16 rows, 4 tokens), p.v 4 V
// loads and 1 p load per 16 BFDOTs, so both are BFDOT-bound at 4 per cycle, the vector bf16 peak; the
// softmax's exp, ~20 instructions per 4 scores, is small beside the 576 multiply-adds of each score.
// Emulation measures correctness only (docs/cpu.md, section ARM64).
//
// BFDOT's sums (without FEAT_EBF16's FPCR.EBF) round to odd and flush denormals to zero: the bits differ
// from the x86 sets', as between any two levels; they do not depend on the tile's other rows or tokens.
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/mla_kernel_set.h"
#include "backends/cpu/neon_bf16/e4m3_bf16.h"

namespace tessera::cpu {
namespace {

constexpr int kTileTokens = 96;
constexpr int kTokenBlock = 4;  // scores: tokens per register tile
constexpr int kPvCols = 16;     // p.v: columns per block (4 vectors)

size_t align64(size_t x) {
  return (x + 63) & ~size_t(63);
}
int round4(int m) {
  return (m + 3) & ~3;
}

struct Scratch {
  float* s;           // [kTileTokens][mp]
  uint16_t* p_pairs;  // [kTileTokens / 2][mp][2]
  float* alpha;       // [mp]
  uint16_t* v_pack;   // [kTileTokens / 2][kPvCols][2]
  const void** rows;  // kTileTokens K row pointers (zero rows past nt)
  uint16_t* zero_row;
  size_t bytes;
};

Scratch carve(void* base, int m, int d_qk, int d_v) {
  const int mp = round4(m);
  char* p = static_cast<char*>(base);
  Scratch sc;
  size_t off = 0;
  sc.s = reinterpret_cast<float*>(p + off);
  off += align64(size_t(kTileTokens) * mp * 4);
  sc.p_pairs = reinterpret_cast<uint16_t*>(p + off);
  off += align64(size_t(kTileTokens / 2) * mp * 4);
  sc.alpha = reinterpret_cast<float*>(p + off);
  off += align64(size_t(mp) * 4);
  sc.v_pack = reinterpret_cast<uint16_t*>(p + off);
  off += align64(size_t(kTileTokens / 2) * kPvCols * 4);
  sc.rows = reinterpret_cast<const void**>(p + off);
  off += align64(kTileTokens * sizeof(void*));
  sc.zero_row = reinterpret_cast<uint16_t*>(p + off);
  off += align64(size_t(d_qk > d_v ? d_qk : d_v) * 2);
  sc.bytes = off;
  return sc;
}

size_t q_packed_bytes(int m, int d_qk) {
  return align64(size_t(round4(m)) * size_t(d_qk) * 2);
}

// q [m][d_qk] -> [d_qk/2][mp][2]: element (row c, k) at (k/2)*mp*2 + c*2 + k%2; rows >= m are zero.
void pack_q(const void* q, int m, int d_qk, void* packed) {
  const int mp = round4(m), kpairs = d_qk / 2;
  const uint32_t* src = static_cast<const uint32_t*>(q);
  uint32_t* dst = static_cast<uint32_t*>(packed);
  for (int kp = 0; kp < kpairs; ++kp)
    for (int c = 0; c < mp; ++c) dst[int64_t(kp) * mp + c] = c < m ? src[int64_t(c) * kpairs + kp] : 0u;
}

size_t scratch_bytes(int m, int d_qk, int d_v) {
  return carve(nullptr, m, d_qk, d_v).bytes;
}

// fp32 -> bf16 bits, round to nearest even, NaN kept quiet, results below 2^-126 flushed to zero (the
// rule of the x86 bf16 conversions, so the sets' K rows agree).
inline uint16x4_t to_bf16(float32x4_t x) {
  const uint32x4_t bits = vreinterpretq_u32_f32(x);
  const uint32x4_t lsb = vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(1));
  const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(bits, vaddq_u32(lsb, vdupq_n_u32(0x7FFF))), 16);
  const uint32x4_t mag = vandq_u32(bits, vdupq_n_u32(0x7FFFFFFF));
  const uint32x4_t nan = vcgtq_u32(mag, vdupq_n_u32(0x7F800000));
  const uint32x4_t tiny = vcltq_u32(mag, vdupq_n_u32(0x00800000));
  uint32x4_t out = vbslq_u32(nan, vorrq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(0x40)), rounded);
  out = vbslq_u32(tiny, vshrq_n_u32(vandq_u32(bits, vdupq_n_u32(0x80000000)), 16), out);
  return vmovn_u32(out);
}

// ---- scores ----

// s rows [t0, t0 + 4) x query vectors [v0, v0 + NV) (4 rows each).
template <int NV>
void scores_block(const void* const* rows, const uint16_t* q, int mp, int kpairs, float* s, int lds, int v0) {
  const uint16_t* k[kTokenBlock];
  for (int t = 0; t < kTokenBlock; ++t) k[t] = static_cast<const uint16_t*>(rows[t]);
  float32x4_t acc[kTokenBlock][NV];
  for (int t = 0; t < kTokenBlock; ++t)
    for (int v = 0; v < NV; ++v) acc[t][v] = vdupq_n_f32(0.0f);
  const int64_t q_step = int64_t(mp) * 2;
  const uint16_t* qv0 = q + 8 * v0;
  for (int kp = 0; kp < kpairs; kp += 4) {
    bfloat16x8_t kr[kTokenBlock];
#pragma GCC unroll 4
    for (int t = 0; t < kTokenBlock; ++t) kr[t] = vreinterpretq_bf16_u16(vld1q_u16(k[t] + 2 * kp));
    dot_key_quad(acc, kr, qv0 + kp * q_step, q_step);
  }
  for (int t = 0; t < kTokenBlock; ++t)
    for (int v = 0; v < NV; ++v) vst1q_f32(s + t * lds + 4 * (v0 + v), acc[t][v]);
}

// s[t][c] for t < round4(nt) (rows past nt point at zeros), c < mp; d_qk a multiple of 8.
void scores(const void* const* rows, int nt, const uint16_t* q, int mp, int d_qk, float* s) {
  const int kpairs = d_qk / 2, vecs = mp / 4;
  for (int t = 0; t < nt; t += kTokenBlock) {
    int v = 0;
    for (; v + 4 <= vecs; v += 4) scores_block<4>(rows + t, q, mp, kpairs, s + t * mp, mp, v);
    switch (vecs - v) {
      case 3:
        scores_block<3>(rows + t, q, mp, kpairs, s + t * mp, mp, v);
        break;
      case 2:
        scores_block<2>(rows + t, q, mp, kpairs, s + t * mp, mp, v);
        break;
      case 1:
        scores_block<1>(rows + t, q, mp, kpairs, s + t * mp, mp, v);
        break;
      default:
        break;
    }
  }
}

// ---- softmax ----

// exp(x) for x <= 0: x = n ln2 + r, degree-6 Taylor polynomial in r, times 2^n as two normal factors
// (n >= -150 after the clamp, so each half is >= 2^-75 and the product underflows as IEEE says). NaN stays NaN.
inline float32x4_t exp_nonpositive(float32x4_t x) {
  x = vmaxq_f32(vdupq_n_f32(-104.0f), x);
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
  r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t ni = vcvtq_s32_f32(n);  // NaN -> 0: p is already NaN
  const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
  const float32x4_t f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
  const float32x4_t f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
  return vmulq_f32(vmulq_f32(p, f1), f2);
}

// Scales and masks s [nt][mp] in place, updates row_max / row_sum (rows < m), writes alpha [mp] and p as
// bf16 token pairs [ceil(nt/2)][mp][2] (a missing odd token is 0). A row whose scores are all -inf so
// far keeps m = -inf and gets p = 0 (it subtracts 0 instead of m').
void softmax(float* s, int nt, int m, int mp, float scale, const int* visible, float* row_max, float* row_sum,
             float* alpha_out, uint16_t* p_pairs) {
  const float32x4_t neg_inf = vdupq_n_f32(-__builtin_inff()), vscale = vdupq_n_f32(scale);
  for (int c = 0; c < mp; c += 4) {
    int32_t vis_l[4];
    float max_l[4], sum_l[4];
    for (int i = 0; i < 4; ++i) {
      const bool row = c + i < m;
      vis_l[i] = row ? (visible ? visible[c + i] : nt) : 0;
      max_l[i] = row ? row_max[c + i] : -__builtin_inff();
      sum_l[i] = row ? row_sum[c + i] : 0.0f;
    }
    const int32x4_t vis = vld1q_s32(vis_l);
    float32x4_t mx = neg_inf;
    for (int t = 0; t < nt; ++t) {
      float* st = s + t * mp + c;
      const uint32x4_t seen = vcgtq_s32(vis, vdupq_n_s32(t));
      const float32x4_t x = vbslq_f32(seen, vmulq_f32(vld1q_f32(st), vscale), neg_inf);
      vst1q_f32(st, x);
      mx = vmaxq_f32(mx, x);
    }
    const float32x4_t m_old = vld1q_f32(max_l);
    const float32x4_t m_new = vmaxq_f32(m_old, mx);
    const float32x4_t m_use = vbslq_f32(vceqq_f32(m_new, neg_inf), vdupq_n_f32(0.0f), m_new);
    const float32x4_t alpha = exp_nonpositive(vsubq_f32(m_old, m_use));
    float32x4_t sum = vmulq_f32(vld1q_f32(sum_l), alpha);
    for (int t = 0; t < nt; t += 2) {
      const float32x4_t p0 = exp_nonpositive(vsubq_f32(vld1q_f32(s + t * mp + c), m_use));
      const float32x4_t p1 =
          t + 1 < nt ? exp_nonpositive(vsubq_f32(vld1q_f32(s + (t + 1) * mp + c), m_use)) : vdupq_n_f32(0.0f);
      sum = vaddq_f32(sum, vaddq_f32(p0, p1));
      const uint16x4x2_t z = vzip_u16(to_bf16(p0), to_bf16(p1));
      vst1q_u16(p_pairs + (int64_t(t / 2) * mp + c) * 2, vcombine_u16(z.val[0], z.val[1]));
    }
    float new_max[4], new_sum[4];
    vst1q_f32(new_max, m_new);
    vst1q_f32(new_sum, sum);
    for (int i = 0; i < 4 && c + i < m; ++i) {
      row_max[c + i] = new_max[i];
      row_sum[c + i] = new_sum[i];
    }
    vst1q_f32(alpha_out + c, alpha);
  }
}

// ---- p.v ----

// Columns [c0, c0 + 4 NC) of the V rows as token pairs: v_pack[tp][4 NC][2], natural column order.
template <int NC>
void pack_v_pairs(const void* const* v_rows, int nt, int c0, uint16_t* v_pack) {
  for (int t = 0; t < nt; t += 2) {
    const uint16_t* r0 = static_cast<const uint16_t*>(v_rows[t]) + c0;
    const uint16_t* r1 = t + 1 < nt ? static_cast<const uint16_t*>(v_rows[t + 1]) + c0 : nullptr;
    uint16_t* dst = v_pack + int64_t(t / 2) * NC * 8;
    for (int c = 0; c < 4 * NC; c += 8) {
      const uint16x8_t a = vld1q_u16(r0 + c), b = r1 ? vld1q_u16(r1 + c) : vdupq_n_u16(0);
      vst1q_u16(dst + 2 * c, vzip1q_u16(a, b));
      vst1q_u16(dst + 2 * c + 8, vzip2q_u16(a, b));
    }
  }
}

// Rows [r0, r0 + rows) (rows <= 4) x NC column vectors at o (row stride ldo): o = o * alpha + p.v.
template <int NC>
void pv_block(const uint16_t* p, int64_t p_step, const uint16_t* v, int pairs, const float* alpha, int rows, float* o,
              int ldo) {
  float32x4_t acc[4][NC];
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < NC; ++j)
      acc[r][j] = r < rows ? vmulq_n_f32(vld1q_f32(o + r * ldo + 4 * j), alpha[r]) : vdupq_n_f32(0.0f);
  for (int tp = 0; tp < pairs; ++tp) {
    const bfloat16x8_t pr = vreinterpretq_bf16_u16(vld1q_u16(p + tp * p_step));  // 4 rows' token pairs
    bfloat16x8_t b[NC];
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) b[j] = vreinterpretq_bf16_u16(vld1q_u16(v + (int64_t(tp) * NC + j) * 8));
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
      acc[0][j] = vbfdotq_laneq_f32(acc[0][j], b[j], pr, 0);
      acc[1][j] = vbfdotq_laneq_f32(acc[1][j], b[j], pr, 1);
      acc[2][j] = vbfdotq_laneq_f32(acc[2][j], b[j], pr, 2);
      acc[3][j] = vbfdotq_laneq_f32(acc[3][j], b[j], pr, 3);
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < NC; ++j) vst1q_f32(o + r * ldo + 4 * j, acc[r][j]);
}

struct Progress {
  void (*fn)(void*, int, int);
  void* ctx;
  int parts;
};

template <int NC>
void pv_columns(const void* const* v_rows, int nt, const uint16_t* p_pairs, int m, int mp, int c0, int d_v,
                const float* alpha, float* o, uint16_t* v_pack, const Progress& pr, int first) {
  pack_v_pairs<NC>(v_rows, nt, c0, v_pack);
  const int pairs = (nt + 1) / 2;
  const int64_t p_step = int64_t(mp) * 2;
  for (int r = 0; r < m; r += 4) {
    if (pr.fn) pr.fn(pr.ctx, first + r / 4, pr.parts);
    pv_block<NC>(p_pairs + 2 * r, p_step, v_pack, pairs, alpha + r, m - r < 4 ? m - r : 4, o + int64_t(r) * d_v + c0,
                 d_v);
  }
}

void pv(const void* const* v_rows, int nt, const uint16_t* p_pairs, const float* alpha, int m, int mp, int d_v,
        float* o, uint16_t* v_pack, void (*progress)(void*, int, int), void* progress_ctx) {
  const int blocks = (d_v + kPvCols - 1) / kPvCols, groups = (m + 3) / 4;
  const Progress pr{progress, progress_ctx, blocks * groups};
  for (int blk = 0, c = 0; blk < blocks; ++blk, c += kPvCols) {
    if (c + kPvCols <= d_v) {
      pv_columns<4>(v_rows, nt, p_pairs, m, mp, c, d_v, alpha, o, v_pack, pr, blk * groups);
    } else {  // d_v is a multiple of 8: an 8-column last block
      pv_columns<2>(v_rows, nt, p_pairs, m, mp, c, d_v, alpha, o, v_pack, pr, blk * groups);
    }
  }
}

void attend_tile(const MlaTileArgs& a) {
  const Scratch sc = carve(a.scratch, a.m, a.d_qk, a.d_v);
  const int mp = round4(a.m);
  memset(sc.zero_row, 0, size_t(a.d_qk > a.d_v ? a.d_qk : a.d_v) * 2);
  for (int t = 0; t < kTileTokens; ++t) sc.rows[t] = t < a.nt ? a.k_rows[t] : sc.zero_row;
  scores(sc.rows, a.nt, static_cast<const uint16_t*>(a.q_packed), mp, a.d_qk, sc.s);
  softmax(sc.s, a.nt, a.m, mp, a.scale, a.visible, a.row_max, a.row_sum, sc.alpha, sc.p_pairs);
  pv(a.v_rows ? a.v_rows : sc.rows, a.nt, sc.p_pairs, sc.alpha, a.m, mp, a.d_v, a.o, sc.v_pack, a.progress,
     a.progress_ctx);
}

// ---- FP8 tokens -> bf16 K rows ----

// 16 e4m3 values times an fp32 scale -> bf16 (e4m3 * scale in fp32, rounded by to_bf16).
inline void dequant16(const Tables& t, const uint8_t* src, float32x4_t scale, uint16_t* dst) {
  bfloat16x8_t h[2];
  e4m3x16_to_bf16(t, vld1q_u8(src), &h[0], &h[1]);
  for (int i = 0; i < 2; ++i) {
    const uint16x8_t bits = vreinterpretq_u16_bf16(h[i]);
    const float32x4_t lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(bits), 16));
    const float32x4_t hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(bits), 16));
    vst1q_u16(dst + 8 * i, vcombine_u16(to_bf16(vmulq_f32(lo, scale)), to_bf16(vmulq_f32(hi, scale))));
  }
}

void dequant_v32(const uint8_t* token, void* row) {
  const Tables t = load_tables();
  uint16_t* out = static_cast<uint16_t*>(row);
  float scales[4];
  memcpy(scales, token + 512, sizeof(scales));
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 128; i += 16) dequant16(t, token + 128 * b + i, vdupq_n_f32(scales[b]), out + 128 * b + i);
  memcpy(out + 512, token + 528, 128);  // the 64 bf16 RoPE values
}

void dequant_model1(const uint8_t* data, const uint8_t* scales, void* row) {
  const Tables t = load_tables();
  uint16_t* out = static_cast<uint16_t*>(row);
  for (int c = 0; c < 7; ++c) {
    uint32_t bits = scales[c] == 0 ? 0x00400000u : uint32_t(scales[c]) << 23;  // UE8M0 -> fp32
    if (scales[c] == 0xFF) bits = 0x7FC00000u;                                 // NaN
    float s;
    memcpy(&s, &bits, 4);
    for (int i = 0; i < 64; i += 16) dequant16(t, data + 64 * c + i, vdupq_n_f32(s), out + 64 * c + i);
  }
  memcpy(out + 448, data + 448, 64);  // the 64 bf16 RoPE values, in two 32-value pieces
  memcpy(out + 480, data + 512, 64);
}

const MlaKernelSet kSet = {
    "neon_bf16",
    MlaElem::kBF16,
    kTileTokens,
    8,  // d_qk: whole groups of 4 pairs (one K register)
    8,  // d_v: whole 8-column zips
    q_packed_bytes,
    pack_q,
    scratch_bytes,
    attend_tile,
    nullptr,  // o stays in natural order
    dequant_v32,
    dequant_model1,
    nullptr,
    false,
};

}  // namespace

const MlaKernelSet* mla_kernels_neon_bf16() {
  return &kSet;
}

}  // namespace tessera::cpu
