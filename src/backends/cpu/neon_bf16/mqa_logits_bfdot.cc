// The MQA-logits kernel set of the neon_bf16 level: one query (all its heads) against a block of key
// rows, with BFDOT (MqaRowsArgs in mqa_logits_kernels.h). The panel is the bf16 sets' (heads
// pair-interleaved: for one pair of D, four heads' pairs fill a q register), so heads run along the 4
// fp32 lanes and key rows along the register block: each key row is loaded 8 values (4 pairs of D) at
// a time and multiplied by lane (vbfdotq_laneq_f32), never transposed. Heads go 16 at a time (4 query
// vectors) over a block of kRows rows: 16 accumulators, 4 key registers and the query vector in flight.
// The epilogue scales each head's dot by the row's fp32 scale, applies relu, multiplies by the head
// weights and sums heads in a fixed order (vector by vector over the chunks, then lanes 0..3), so a
// row's result does not depend on which block computed it.
//
// Expected rate (Neoverse V1/V2, four 128-bit SIMD pipes, BFDOT 8 multiply-adds per instruction): per
// 4 pairs of D and 16 heads, 16 query loads, kRows key loads and 16 x kRows BFDOTs; with kRows = 4,
// 64 BFDOTs against 20 loads (3 per cycle), so BFDOT-bound at 4 per cycle: the vector bf16 peak.
// Emulation measures correctness only (docs/cpu.md, section ARM64).
//
// BFDOT's sums (without FEAT_EBF16's FPCR.EBF) round to odd and flush denormals to zero, like the
// decode GEMV's (gemv_bfdot.cc): the bits differ from the x86 sets', as between any two levels.
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/mqa_logits_kernels.h"
#include "backends/cpu/neon_bf16/e4m3_bf16.h"

namespace tessera::cpu {
namespace {

constexpr int kRows = 4;       // key rows per register block
constexpr int kChunkVecs = 4;  // query vectors (4 heads each) per pass: 16 heads, one panel head vector

// Key rows [r0, r0 + nrows) into out; tot: kRows running head sums (one vector per row).
void rows_block(const MqaRowsArgs& a, int r0, int nrows) {
  const uint16_t* krow[kRows];
  for (int r = 0; r < kRows; ++r)
    krow[r] = static_cast<const uint16_t*>(a.k) + (r0 + (r < nrows ? r : nrows - 1)) * a.k_stride;
  const int pairs = a.dim / 2, quads = pairs / 4;
  const int panel_pitch = 32 * a.head_vectors;  // bf16 values per pair of D in the panel
  const uint16_t* panel = static_cast<const uint16_t*>(a.q_panel);
  float32x4_t tot[kRows];
  for (int r = 0; r < kRows; ++r) tot[r] = vdupq_n_f32(0.0f);
  const float32x4_t zero = vdupq_n_f32(0.0f);
  for (int c = 0; c < a.head_vectors; ++c) {
    float32x4_t acc[kRows][kChunkVecs];
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kChunkVecs; ++v) acc[r][v] = zero;
    const uint16_t* qc = panel + 32 * c;
    for (int p = 0; p < quads * 4; p += 4) {
      bfloat16x8_t k[kRows];
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) k[r] = vreinterpretq_bf16_u16(vld1q_u16(krow[r] + 2 * p));
      dot_key_quad(acc, k, qc + int64_t(p) * panel_pitch, panel_pitch);
    }
    if (pairs % 4) {  // the last 1-3 pairs of D (the panel holds no pairs past D)
      const int p = quads * 4, left = pairs - p;
      bfloat16x8_t k[kRows];
      for (int r = 0; r < kRows; ++r) {
        uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        memcpy(buf, krow[r] + 2 * p, size_t(left) * 4);
        k[r] = vreinterpretq_bf16_u16(vld1q_u16(buf));
      }
      for (int l = 0; l < left; ++l) {
        const uint16_t* q = qc + (p + l) * panel_pitch;
        for (int v = 0; v < kChunkVecs; ++v) {
          const bfloat16x8_t qv = vreinterpretq_bf16_u16(vld1q_u16(q + 8 * v));
          for (int r = 0; r < kRows; ++r) acc[r][v] = bfdot_lane(acc[r][v], qv, k[r], l);
        }
      }
    }
    // Epilogue of the chunk: heads 16 c + 4 v + i past `heads` stay out (their weights may be NaN, and
    // a zero dot times an infinite scale is NaN).
    for (int r = 0; r < kRows && r < nrows; ++r) {
      const float32x4_t s = vdupq_n_f32(a.k_scale[r0 + r]);
      for (int v = 0; v < kChunkVecs; ++v) {
        const int h0 = 16 * c + 4 * v;
        if (h0 >= a.heads) break;
        const int32_t idx[4] = {h0, h0 + 1, h0 + 2, h0 + 3};
        const uint32x4_t live = vcltq_s32(vld1q_s32(idx), vdupq_n_s32(a.heads));
        const float32x4_t x = vmaxq_f32(zero, vmulq_f32(acc[r][v], s));  // relu; NaN passes (vmax)
        const float32x4_t w = vld1q_f32(a.weights + h0);
        tot[r] = vaddq_f32(tot[r], vbslq_f32(live, vmulq_f32(x, w), zero));
      }
    }
  }
  for (int r = 0; r < kRows && r < nrows; ++r) {
    const float32x4_t t = tot[r];
    a.out[r0 + r] = ((vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 1)) + vgetq_lane_f32(t, 2)) + vgetq_lane_f32(t, 3);
  }
}

void rows(const MqaRowsArgs& a) {
  for (int r0 = 0; r0 < a.rows; r0 += kRows) rows_block(a, r0, a.rows - r0 < kRows ? a.rows - r0 : kRows);
}

void e4m3_to_bf16(const uint8_t* src, int64_t n, uint16_t* dst) {
  const Tables t = load_tables();
  int64_t i = 0;
  bfloat16x8_t v0, v1;
  for (; i + 16 <= n; i += 16) {
    e4m3x16_to_bf16(t, vld1q_u8(src + i), &v0, &v1);
    vst1q_u16(dst + i, vreinterpretq_u16_bf16(v0));
    vst1q_u16(dst + i + 8, vreinterpretq_u16_bf16(v1));
  }
  if (i < n) {
    uint8_t codes[16] = {};
    uint16_t out[16];
    memcpy(codes, src + i, size_t(n - i));
    e4m3x16_to_bf16(t, vld1q_u8(codes), &v0, &v1);
    vst1q_u16(out, vreinterpretq_u16_bf16(v0));
    vst1q_u16(out + 8, vreinterpretq_u16_bf16(v1));
    memcpy(dst + i, out, size_t(n - i) * 2);
  }
}

void e4m3_keys(const uint8_t* src, int64_t n, void* dst) {
  e4m3_to_bf16(src, n, static_cast<uint16_t*>(dst));
}

// Panels, panel size and MX keys are the scalar bf16 set's (plain C, scalar/mqa_logits.cc).
const MqaLogitsKernels kSet = {
    "mqa_neon_bf16", 2, mqa_panel_bytes_bf16, mqa_pack_query_bf16, e4m3_to_bf16, e4m3_keys, mqa_mx_keys_bf16, rows,
};

}  // namespace

const MqaLogitsKernels* mqa_kernels_neon_bf16() {
  return &kSet;
}

}  // namespace tessera::cpu
