// Plain interface between the MLA attention driver (src/attention/flash_mla) and the per-ISA kernel sets.
// No inline functions or templates here: ISA translation units include this file (see README.md).
//
// A unit of work is M query rows attending to a stream of token tiles (FlashAttention's online softmax).
// The driver gathers each tile's K rows (V = the first d_v elements of each row) in the set's element
// type and calls attend_tile, which updates the rows' running max, sum and unnormalised output:
//   s[t][r] = scale * q_r . k_t                    (masked to -inf for t >= visible[r])
//   m' = max(m, max_t s), alpha = exp(m - m'), p = exp(s - m')
//   sum' = sum * alpha + sum_t p,  o' = o * alpha + sum_t p[t] * v_t
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "tessera/core/cpu.h"

namespace tessera::cpu {

enum class MlaElem : int {
  kBF16 = 0,  // K rows and q in bf16; p rounded to bf16 for p.v (vdpbf16ps kernels)
  kF32 = 1,   // K rows and q in fp32 (the portable reference set and the fp32-FMA sets; also serves fp16
              // inputs exactly)
};

struct MlaTileArgs {
  const void* q_packed;  // from pack_q
  int m;                 // query rows (<= kMlaMaxRows)
  int d_qk, d_v;
  float scale;
  const void* const* k_rows;  // nt row pointers, each d_qk elements of the set's type
  const void* const* v_rows;  // nt rows of d_v elements, or nullptr: V is the first d_v elements of k_rows
  int nt;                     // 1..tile_tokens
  const int* visible;         // per row: the first visible[r] tokens of this tile count; nullptr = all nt
  float* o;                   // [m][d_v] fp32, row stride d_v
  float* row_max;             // [m], -inf before the first tile
  float* row_sum;             // [m], 0 before the first tile
  void* scratch;              // scratch_bytes(m, d_qk, d_v) bytes, 64-byte aligned
  // Called as progress(ctx, i, n) for i = 0..n-1 at points spread over the tile's work (or skipped when
  // null), so the driver can issue the next tile's prefetches in small batches: one burst of ~1000
  // prefetches fills the miss queues and stalls the core.
  void (*progress)(void* ctx, int part, int parts);
  void* progress_ctx;
  // The unit's first tile, for a set with fresh_o: o holds no values yet and the set writes it (o = p.v)
  // instead of rescaling and accumulating, so the driver need not zero it first.
  bool o_fresh;
};

struct MlaKernelSet {
  const char* name;
  MlaElem elem;
  int tile_tokens;  // nt <= tile_tokens
  // Layout requirements of the fast sets: d_qk % qk_align == 0 and d_v % v_align == 0.
  int qk_align, v_align;
  size_t (*q_packed_bytes)(int m, int d_qk);
  // q: m rows of d_qk elements of the set's type, contiguous.
  void (*pack_q)(const void* q, int m, int d_qk, void* packed);
  size_t (*scratch_bytes)(int m, int d_qk, int d_v);
  void (*attend_tile)(const MlaTileArgs& a);
  // attend_tile may keep o in a set-specific layout within its m * d_v floats (avx512bf16: columns
  // permuted within rows; amx: also the rows of each full 16-row block as 16 x 16 tiles); this restores
  // the natural order of m rows (nullptr: o is always natural). o is read only after it, and zeros are
  // zeros in every layout.
  void (*o_to_natural)(float* o, int m, int d_v);
  // FP8 tokens -> one K row of the set's type (FlashMLA's FP8 layouts, docs/attention.md; e4m3 -> fp32 *
  // scale -> bf16 values).
  // V32: the 656 bytes of a token -> 576 elements. MODEL1: 576 data bytes and 7 UE8M0 scales -> 512.
  void (*dequant_v32)(const uint8_t* token, void* row);
  void (*dequant_model1)(const uint8_t* data, const uint8_t* scales, void* row);
  // n contiguous bf16 (fp16 when `fp16`) values -> n elements of the set's type, for query and K rows
  // that are not read in place; nullptr: the driver's portable loop.
  void (*widen_row)(const uint16_t* src, int n, bool fp16, void* dst);
  // attend_tile honours MlaTileArgs::o_fresh (otherwise the driver zeroes o before the first tile).
  bool fresh_o;
};

constexpr int kMlaMaxRows = 128;

const MlaKernelSet* mla_kernels_scalar();
const MlaKernelSet* mla_kernels_avx512bf16();  // nullptr when built without that level
// The AMX set (src/backends/cpu/amx/mla_*_amx.cc): the avx512bf16 set's numerics with tile products.
const MlaKernelSet* mla_kernels_amx();
// The fp32-FMA set written with Highway (src/backends/cpu/hwy/mla_kernels.cc) for `level` (kAvx2: 256-bit,
// kAvx512 and above: 512-bit registers), or nullptr when that target was not built. fp32 K rows and
// queries, fp32 p; d_v must be a multiple of the set's v_align (its vector length).
const MlaKernelSet* mla_kernels_hwy(Isa level);
// The BFDOT set of the neon_bf16 level (neon_bf16/mla_bfdot.cc): bf16 K rows, queries and p, the x86
// bf16 sets' numerics; d_qk and d_v multiples of 8. nullptr on CPUs other than AArch64.
const MlaKernelSet* mla_kernels_neon_bf16();

// Pieces of the avx512bf16 set, one exporting file each (src/backends/cpu/avx512bf16/mla_*.cc).
// scores: s[t * lds + c] = sum_k k_rows[t][k] * q[c][k] for t < nt, c < mp (mp = m rounded up to 16),
// q packed as [d_qk/2][mp][2]. k_rows holds round_up(nt, 24) pointers (padding rows point at zeros) and
// s has that many rows.
void mla_scores_avx512bf16(const void* const* k_rows, int nt, const void* q_packed, int mp, int d_qk, float* s,
                           int lds);
// softmax: scales and masks s [nt][mp] in place, updates row_max/row_sum, writes alpha[mp] and p as bf16
// pairs [ceil(nt/2)][mp][2] (token pairs; a missing odd token is 0).
void mla_softmax_avx512bf16(float* s, int nt, int m, int mp, float scale, const int* visible, float* row_max,
                            float* row_sum, float* alpha, uint16_t* p_pairs);
// pv: o[r][:] = o[r][:] * alpha[r] + sum_t p[t][r] * v_t for r < m, columns in the order o_to_natural
// undoes; v_rows: nt rows (the first d_v elements are read); v_pack is scratch of ceil(nt/2) * 128 bf16.
// progress (may be null) runs before each 6-row register tile (progress(ctx, i, n), i = 0..n-1 in order),
// spreading the driver's prefetches finely enough that the miss queues drain in between.
void mla_pv_avx512bf16(const void* const* v_rows, int nt, const uint16_t* p_pairs, const float* alpha, int m, int mp,
                       int d_v, float* o, uint16_t* v_pack, void (*progress)(void*, int, int), void* progress_ctx);
void mla_o_to_natural_avx512bf16(float* o, int m, int d_v);
void mla_dequant_v32_avx512bf16(const uint8_t* token, void* row);
void mla_dequant_model1_avx512bf16(const uint8_t* data, const uint8_t* scales, void* row);

}  // namespace tessera::cpu
