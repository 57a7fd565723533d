// The unit loop shared by the decode GEMVs whose weights the vector unit converts to bf16 before the
// tiles multiply them (e4m3: gemv_amx_e4m3.cc, FP4: gemv_amx_fp4.cc). Private to the folder; everything
// here has internal linkage in each file that includes it (ISA rule 2), and each file passes its own
// "stager", the function that converts one weight row's piece into tile order.
//
// A thread takes its rows in blocks of 16 (a tile's rows) and each block in K pieces of at most
// kMaxPieceK values; a "unit" is one block over one piece. Units are converted row by row into a
// tile-order staging buffer (16 rows x 32 values = one 1 KiB tile per K step; 16 KiB per unit: L1).
// Two buffers alternate: while unit i+1 is converted, unit i's tile products run interleaved with it
// (one 16th of its K steps after each converted row), so the tile unit works while the vector unit
// converts. The stager prefetches each row's piece of the unit kPrefetchUnits later as it converts the
// row (see gemv_amx_e4m3.cc for the reasons behind the distance and the L2 hint).
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
//
// Two accumulator tiles take alternate scale groups; one group after its end, a group's tile is stored
// and folded into fp32 row sums with a_scale[g][m] * w_scale(g, row), the per-group promotion of the
// other GEMVs (FP4 weights carry their scales in the converted values and pass no w_scale). Blocking
// depends only on the shape, and each row's arithmetic is the same in any block, so the bits never
// depend on how rows fall to threads.
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu::amx {
namespace {

constexpr int kRows = 16;            // weight rows per block (a tile's rows)
constexpr int64_t kMaxPieceK = 512;  // K values per unit (among the fastest piece lengths tried)
constexpr int kPrefetchUnits = 2;

// Tiles: 0-1 the accumulators of alternate scale groups (a 16-row product is throughput-bound, ~17
// cycles, with one chain or four; the second lets a group's store wait a group), 2-3 weights and 4-5
// activations, alternating between K steps. mp columns: 4 for M <= 4, else 8 (the zero columns cost
// nothing; the callers take M >= 4), so a stored accumulator is 16 x mp contiguous fp32 and element e
// belongs to row e / mp and column e % mp.
inline void configure_units(int mp) {
  TileConfig want;
  memset(&want, 0, sizeof(want));
  want.palette = 1;
  const int used[] = {0, 1, 2, 3, 4, 5};  // a plain array: no <initializer_list> in ISA files (rule 1)
  for (int t : used) want.rows[t] = kRows;
  want.colsb[0] = want.colsb[1] = uint16_t(mp * 4);  // 16 rows x mp fp32
  want.colsb[2] = want.colsb[3] = 64;                // 16 rows x 32 bf16
  want.colsb[4] = want.colsb[5] = uint16_t(mp * 4);  // 16 K pairs x mp columns
  use_tile_config(want);
}

inline int units_columns(int m) {
  return m <= 4 ? 4 : 8;
}

// Four columns of 16 dwords transposed in registers: out[j] holds pairs 4j..4j+3, each as the four
// columns' dwords in order. Within each 128-bit lane L, u_i holds pair 4L + i of the four columns; lane j
// of u_0..u_3 is then out[j].
inline void transpose_4_columns(const __m512i* v, __m512i out[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i x0 = _mm512_shuffle_i32x4(u0, u1, 0x44), x1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i x2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), x3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  out[0] = _mm512_shuffle_i32x4(x0, x1, 0x88);
  out[1] = _mm512_shuffle_i32x4(x0, x1, 0xDD);
  out[2] = _mm512_shuffle_i32x4(x2, x3, 0x88);
  out[3] = _mm512_shuffle_i32x4(x2, x3, 0xDD);
}

// One K step of the b-operand (16 K pairs x mp columns of dwords, mp = 4 or 8): dword q * mp + mi =
// lane q of v[mi], by transposes in registers. (vpscatterdd took a quarter of a short M=4 call's time,
// N=32 K=7168, and slowed the tile loads that read its lines.)
inline void store_b_step(uint32_t* dst, const __m512i* v, int mp) {
  __m512i lo[4], hi[4];
  transpose_4_columns(v, lo);
  if (mp == 4) {
    for (int j = 0; j < 4; ++j) _mm512_storeu_si512(dst + 16 * j, lo[j]);
    return;
  }
  // Pair q of columns 0-3 is lane q % 4 of lo[q / 4], of columns 4-7 the same lane of hi[q / 4]: two
  // pairs per output vector, lanes alternating.
  transpose_4_columns(v + 4, hi);
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int j = 0; j < 4; ++j) {
    _mm512_storeu_si512(dst + 32 * j, _mm512_permutex2var_epi64(lo[j], first, hi[j]));
    _mm512_storeu_si512(dst + 32 * j + 16, _mm512_permutex2var_epi64(lo[j], second, hi[j]));
  }
}

// Row r of a staging buffer zero over kc values (rows past the matrix's end).
inline void zero_rows(int64_t kc, int r, uint16_t* dst) {
  for (int64_t s = 0; s < kc / 32; ++s) _mm512_store_si512(dst + s * 512 + r * 32, _mm512_setzero_si512());
}

// Per-thread staging: two buffers of 16 rows x kMaxPieceK bf16 (heap, not static TLS).
struct Stage {
  uint16_t* data = nullptr;
  ~Stage() { free(data); }
  uint16_t* buffer(int i) {
    if (!data) data = static_cast<uint16_t*>(aligned_alloc(64, size_t(2) * kRows * kMaxPieceK * 2));
    return data + size_t(i) * kRows * kMaxPieceK;
  }
};

// One unit of work: a 16-row block (row0, rows valid) over K piece [k0, k0 + kc).
struct Unit {
  int64_t row0;
  int rows;
  int64_t k0, kc;
};

// The tile side: K steps of staged units, folds at group ends, the block's outputs at its end.
class BlockRunner {
 public:
  BlockRunner(const GemvArgs& p, int mp, const uint32_t* bt, int64_t k_pad)
      : p_(p), mp_(mp), shift_(mp == 4 ? 2 : 3), bt_(bt), k_pad_(k_pad) {}

  // K steps [s0, s1) of unit u from buf; folds at group ends; writes the block's outputs after its last
  // K step.
  void compute(const Unit& u, int64_t s0, int64_t s1, const uint16_t* buf) {
    if (s0 >= s1) return;
    if (s0 == 0 && u.k0 == 0) begin_block(u);
    const int64_t b_step = int64_t(16) * mp_;  // dwords per K step of activations
    const int b_stride = mp_ * 4;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t k = u.k0 + 32 * s;
      const uint16_t* a = buf + s * 512;
      const uint32_t* b = bt_ + (k / 32) * b_step;
      if (s % 2 == 0) {
        _tile_loadd(2, a, 64);
        _tile_loadd(4, b, b_stride);
        if (acc_ == 0) {
          _tile_dpbf16ps(0, 2, 4);
        } else {
          _tile_dpbf16ps(1, 2, 4);
        }
      } else {
        _tile_loadd(3, a, 64);
        _tile_loadd(5, b, b_stride);
        if (acc_ == 0) {
          _tile_dpbf16ps(0, 3, 5);
        } else {
          _tile_dpbf16ps(1, 3, 5);
        }
      }
      if (k + 32 == fold_at_) end_group();
    }
    if (s1 * 32 == u.kc && u.k0 + u.kc >= k_pad_) end_block(u);
  }

 private:
  void begin_block(const Unit& u) {
    for (auto& v : sum_) v = _mm512_setzero_ps();
    // Each row's weight-scale row, with one division per block instead of one per row: at short K a
    // block is one unit. A block inside one scale row (16 rows of a 128-row block, or no weight scales)
    // needs only that row's index; the others build the per-row vector through memory, whose load waits
    // for the 16 stores to complete (no store forwarding), and with them every older store: the staging
    // rows and tile stores.
    first_scale_row_ = 0;
    uniform_scale_ = true;
    if (p_.w_scale) {
      const int64_t first = p_.w_row0 + p_.n0 + u.row0;
      int64_t q = first / p_.w_scale_rows, rem = first - q * p_.w_scale_rows;
      first_scale_row_ = q;
      uniform_scale_ = rem + u.rows <= p_.w_scale_rows;
      if (!uniform_scale_) {
        alignas(64) int32_t idx[kRows] = {};
        for (int r = 0; r < u.rows; ++r) {
          idx[r] = int32_t(q);
          if (++rem == p_.w_scale_rows) rem = 0, ++q;
        }
        scale_rows_ = _mm512_load_si512(idx);
      }
    }
    group_ = 0;
    fold_at_ = p_.group < k_pad_ ? p_.group : k_pad_;
    acc_ = 0;
    pending_ = false;
    _tile_zero(0);
    _tile_zero(1);
  }

  // A group's accumulator is stored and folded one group later, when its products have long finished:
  // storing it at once waited for the last product, and the conversion stalled behind that store
  // (with the end_block change, M=4 N=1792 K=512 in L2: 402-405 -> 388-395 ns per unit, N=1024 K=1536
  // 456-469 -> 433-438). The other tile takes the next group meanwhile. Groups are still folded in
  // order, so the sums are the same.
  void end_group() {
    if (pending_) fold(1 - acc_);
    fold_at_ = fold_at_ + p_.group < k_pad_ ? fold_at_ + p_.group : k_pad_;
    pending_ = true;
    acc_ = 1 - acc_;
  }

  // Accumulator `tile` (16 x mp fp32, contiguous), holding group group_, folded into the row sums with
  // that group's scales: element e of vector i is row (16 i + e) / mp, column (16 i + e) % mp.
  void fold(int tile) {
    alignas(64) float t[kRows * 8];
    if (tile == 0) {
      _tile_stored(0, t, mp_ * 4);
      _tile_zero(0);
    } else {
      _tile_stored(1, t, mp_ * 4);
      _tile_zero(1);
    }
    const int64_t g = group_++;
    __m512 as = _mm512_set1_ps(1.0f);
    if (p_.a_scale) {
      const __m512 a = _mm512_maskz_loadu_ps(__mmask16((1u << p_.m) - 1), p_.a_scale + g * p_.a_scale_stride);
      as = _mm512_permutexvar_ps(_mm512_and_si512(lane_, _mm512_set1_epi32(mp_ - 1)), a);  // column e % mp
    }
    if (uniform_scale_) {  // as[column] * ws, as below; every vector has the same columns (16 % mp == 0)
      const __m512 scale =
          p_.w_scale ? _mm512_mul_ps(as, _mm512_set1_ps(p_.w_scale[g * p_.w_scale_stride + first_scale_row_])) : as;
      for (int i = 0; i < mp_; ++i) sum_[i] = _mm512_fmadd_ps(_mm512_load_ps(t + 16 * i), scale, sum_[i]);
      return;
    }
    const __m512 ws = _mm512_i32gather_ps(scale_rows_, p_.w_scale + g * p_.w_scale_stride, 4);
    for (int i = 0; i < mp_; ++i) {  // 16 * mp elements
      const __m512i row = _mm512_srli_epi32(_mm512_add_epi32(lane_, _mm512_set1_epi32(16 * i)), shift_);
      const __m512 scale = _mm512_mul_ps(as, _mm512_permutexvar_ps(row, ws));
      sum_[i] = _mm512_fmadd_ps(_mm512_load_ps(t + 16 * i), scale, sum_[i]);
    }
  }

  void end_block(const Unit& u) {
    if (pending_) fold(1 - acc_);  // the block's last group
    pending_ = false;
    if (mp_ == 4) {  // the decode case: each output row gathered from the four sums in registers
      // Element e = 4 r + mi of sum_[r / 4], lane 4 (r % 4) + mi: lanes 0-7 from sum_[0..1], 8-15
      // from sum_[2..3]. (64 scalar stores and their loads from memory took ~60 ns per block, a
      // seventh of a K = 512 unit, with the loads waiting on the block's last fold.)
      const __m512i base = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
      const __mmask16 rows = __mmask16((1u << u.rows) - 1);
      for (int mi = 0; mi < p_.m; ++mi) {
        const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(mi));
        const __m512 lo = _mm512_permutex2var_ps(sum_[0], idx, sum_[1]);
        const __m512 hi = _mm512_permutex2var_ps(sum_[2], idx, sum_[3]);
        _mm512_mask_storeu_ps(p_.out + mi * p_.ldo + p_.n0 + u.row0, rows, _mm512_mask_blend_ps(0xFF00, lo, hi));
      }
      return;
    }
    alignas(64) float s[kRows * 8];
    for (int i = 0; i < mp_; ++i) _mm512_store_ps(s + 16 * i, sum_[i]);
    for (int r = 0; r < u.rows; ++r)
      for (int mi = 0; mi < p_.m; ++mi) p_.out[mi * p_.ldo + p_.n0 + u.row0 + r] = s[r * mp_ + mi];
  }

  const GemvArgs& p_;
  const int mp_, shift_;
  const uint32_t* bt_;
  int64_t k_pad_;
  const __m512i lane_ = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 sum_[8];
  __m512i scale_rows_;           // each row's weight-scale row (blocks across two of them)
  int64_t first_scale_row_ = 0;  // the block's first row's
  bool uniform_scale_ = true;    // all of the block's rows share first_scale_row_ (or no scales)
  int64_t group_ = 0, fold_at_ = 0;
  int acc_ = 0;           // the tile accumulating the current group
  bool pending_ = false;  // the other tile holds the previous group, not yet folded
};

// Runs every unit of rows [p.n0, p.n1) (outputs and weight-scale rows relative to p.n0, as the
// BlockRunner takes them) over K padded to k_pad, in pieces that are multiples of `granule` (the
// stager's conversion step). `bt`: the activations in tile order (16 K pairs x mp dwords per K step).
// stage(u, r, buf, ahead) converts row r < u.rows of unit u into staging buffer buf and prefetches the
// same row of unit `ahead`.
template <class Stager>
void run_units(const GemvArgs& p, int mp, const uint32_t* bt, int64_t k_pad, int64_t granule, const Stager& stage) {
  const int64_t rows = p.n1 - p.n0;
  const int64_t pieces = (k_pad + kMaxPieceK - 1) / kMaxPieceK;
  const int64_t piece_k = (k_pad / pieces + granule - 1) / granule * granule;  // equal pieces
  const int64_t units = (rows + kRows - 1) / kRows * pieces;
  if (units == 0) return;
  // Units in order: a block's K pieces, then the next block (a counter walk: no division per unit).
  auto make = [&](int64_t row0, int64_t k0) {
    return Unit{row0, int(rows - row0 < kRows ? rows - row0 : kRows), k0, k_pad - k0 < piece_k ? k_pad - k0 : piece_k};
  };
  auto after = [&](const Unit& u) { return u.k0 + u.kc < k_pad ? make(u.row0, u.k0 + u.kc) : make(u.row0 + kRows, 0); };
  auto stage_row = [&](const Unit& u, int r, uint16_t* buf, const Unit& ahead) {
    if (r < u.rows) {
      stage(u, r, buf, ahead);
    } else {
      zero_rows(u.kc, r, buf);
    }
  };

  static thread_local Stage staging;
  BlockRunner runner(p, mp, bt, k_pad);
  // The unit whose rows are prefetched while `next` is converted: kPrefetchUnits after it, or the last.
  Unit cur = make(0, 0), ahead = cur;
  int64_t ahead_index = 0;
  auto advance_ahead = [&](int64_t target) {
    const int64_t t = target < units ? target : units - 1;
    for (; ahead_index < t; ++ahead_index) ahead = after(ahead);
  };
  advance_ahead(kPrefetchUnits);
  for (int r = 0; r < kRows; ++r) stage_row(cur, r, staging.buffer(0), ahead);
  for (int64_t i = 0; i < units; ++i) {
    uint16_t* buf = staging.buffer(int(i % 2));
    const int64_t steps = cur.kc / 32;
    if (i + 1 == units) {
      runner.compute(cur, 0, steps, buf);
      break;
    }
    // Convert the next unit row by row; after each row, 1/16 of this unit's K steps.
    const Unit next = after(cur);
    uint16_t* next_buf = staging.buffer(int((i + 1) % 2));
    advance_ahead(i + 1 + kPrefetchUnits);
    for (int r = 0; r < kRows; ++r) {
      stage_row(next, r, next_buf, ahead);
      runner.compute(cur, steps * r / kRows, steps * (r + 1) / kRows, buf);
    }
    cur = next;
  }
}

}  // namespace
}  // namespace tessera::cpu::amx
