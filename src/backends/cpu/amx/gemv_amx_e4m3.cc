// Decode GEMV over e4m3 weights on AMX tiles: each weight element is converted to bf16 once, by the
// vector unit, and multiplied by all M activation columns in one tile product.
//
// A thread takes its rows in blocks of 16 (a tile's rows) and each block in K pieces of kMaxPieceK
// values; a "unit" is one block over one piece. Units are converted row by row into a tile-order
// staging buffer (16 rows x 32 values = one 1 KiB tile per K step; 16 KiB per unit: L1). Two buffers
// alternate: while unit i+1 is converted, unit i's tile products run interleaved with it (one 16th
// of its K steps after each converted row), so the tile unit works while the vector unit converts.
// Each row's piece of the unit kPrefetchUnits later is prefetched as the row is converted: 16 rows
// side by side in short pieces are too many streams for the hardware prefetcher (M=4, N=4096,
// K=7168, 2 threads from DRAM: 1.78 -> 1.38-1.43 ms; 1 unit ahead 1.43, 2 1.38, 4 1.46-1.53). The
// lines go to L2, not L1: two units of weights in L1 beside the two 16 KiB staging buffers evicted
// those (weights in L2, no tiles: conversion 357 -> 240 ns per unit), and from DRAM, M=4, 2 threads,
// GB/s, L1 -> L2: N=32768 K=512 13.8-14.5 -> 17.3-18.7, N=24576 K=1536 15.8-16.4 -> 19.0-19.5,
// N=4096 K=7168 17.6-19.8 -> 20.0-21.9.
//
// Why not the 48-row tile GEMV of gemv_amx.cc for e4m3: it staged 48 rows x 1024 values in natural
// order (96 KiB: L2) with the 4-permute conversion, after which the tiles ran; M=5..8 took 1.7-2.2x
// the time of this kernel, and M <= 4 stayed on the vector GEMV, which vdpbf16ps (half the fp32 FMA
// rate on AMX Xeons) holds at ~9 GB/s per core at M=4 (this kernel: ~15, weights in L2, 1 thread).
//
// Conversion is the vector GEMV's "lane order" lookup (fp8_convert.h): 64 e4m3 values become two bf16
// vectors whose K pairs are permuted within the 64-block; the activations are interleaved in the same
// order, so every product pair is the right one. Two accumulator tiles take alternate scale groups;
// one group after its end, a group's tile is stored and folded into fp32 row sums with
// a_scale[g][m] * w_scale(g, row), the same per-group promotion as the other GEMVs. Blocking depends
// only on the shape, and each row's arithmetic is the same in any block, so the bits never depend on
// how rows fall to threads.
#include "backends/cpu/amx/gemv_amx_e4m3.h"

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/avx512bf16/fp8_convert.h"

namespace tessera::cpu::amx {
namespace {

constexpr int kRows = 16;             // weight rows per block (a tile's rows)
constexpr int64_t kMaxPieceK = 512;   // K values per unit (weights in L2, 1 thread, M=4: 256 / 512 /
                                      // 1024 / 2048 / 8192: 0.068 / 0.064 / 0.064 / 0.079 / 0.091 ms)
constexpr int kPrefetchUnits = 2;

// Tiles: 0-1 the accumulators of alternate scale groups (a 16-row product is throughput-bound, ~17
// cycles, with one chain or four; the second lets a group's store wait a group), 2-3 weights and 4-5
// activations, alternating between K steps. mp columns: M rounded up to
// a power of two (the zero columns cost nothing), so a stored accumulator is 16 x mp contiguous fp32 and
// element e belongs to row e / mp and column e % mp.
void configure(int mp) {
  TileConfig want;
  std::memset(&want, 0, sizeof(want));
  want.palette = 1;
  const int used[] = {0, 1, 2, 3, 4, 5};  // a plain array: no <initializer_list> in ISA files (rule 1)
  for (int t : used) want.rows[t] = kRows;
  want.colsb[0] = want.colsb[1] = uint16_t(mp * 4);  // 16 rows x mp fp32
  want.colsb[2] = want.colsb[3] = 64;                // 16 rows x 32 bf16
  want.colsb[4] = want.colsb[5] = uint16_t(mp * 4);  // 16 K pairs x mp columns
  use_tile_config(want);
}

// Activation rows (e4m3) as the tiles' b-operand in lane order: for K step s, 16 pairs x mp columns of
// dwords at bt + s * 16 * mp, pair q of column mi at dword q * mp + mi. Zero past K up to k_pad (a
// multiple of 64) and in columns m..mp-1.
void interleave_activations(const GemvArgs& p, int mp, int64_t k_pad, uint32_t* bt) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  const __m512i pair_index = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(mp));
  for (int mi = 0; mi < mp; ++mi) {
    const char* row = static_cast<const char*>(p.a) + mi * p.a_stride;
    for (int64_t k = 0; k < k_pad; k += 64) {
      const int64_t left = mi < p.m ? p.k - k : 0;
      const __mmask64 valid = left >= 64 ? ~0ull : left <= 0 ? 0ull : (1ull << left) - 1;
      __m512i even, odd;
      avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_maskz_loadu_epi8(valid, row + k), &even, &odd);
      uint32_t* step = bt + (k / 32) * 16 * mp + mi;
      _mm512_i32scatter_epi32(step, pair_index, even, 4);
      _mm512_i32scatter_epi32(step + 16 * mp, pair_index, odd, 4);
    }
  }
}

// One weight row's K range [k0, k0 + kc) (kc a multiple of 64) converted into row r of a tile-order
// staging buffer (step s at dst + s * 512 values); zeros past K.
inline void stage_row(const avx512bf16::E4m3Tables& t, const char* row, int64_t k, int64_t k0, int64_t kc,
                      int r, uint16_t* dst, const char* pf) {
  uint16_t* out = dst + r * 32;
  const char* src = row + k0;
  const int64_t full = k - k0 >= kc ? kc : (k - k0) / 64 * 64;
  __m512i even, odd;
  int64_t kk = 0;
  for (; kk < full; kk += 64, out += 1024) {
    _mm_prefetch(pf + kk, _MM_HINT_T2);
    avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_loadu_si512(src + kk), &even, &odd);
    _mm512_store_si512(out, even);
    _mm512_store_si512(out + 512, odd);
  }
  for (; kk < kc; kk += 64, out += 1024) {  // the K tail, then zeros
    const int64_t left = k - (k0 + kk);
    const __mmask64 valid = left <= 0 ? 0ull : left >= 64 ? ~0ull : (1ull << left) - 1;
    avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_maskz_loadu_epi8(valid, src + kk), &even, &odd);
    _mm512_store_si512(out, even);
    _mm512_store_si512(out + 512, odd);
  }
}

inline void zero_rows(int64_t kc, int r, uint16_t* dst) {
  for (int64_t s = 0; s < kc / 32; ++s) _mm512_store_si512(dst + s * 512 + r * 32, _mm512_setzero_si512());
}

// Per-thread staging: two buffers of 16 rows x kMaxPieceK bf16 (heap, not static TLS).
struct Stage {
  uint16_t* data = nullptr;
  ~Stage() { std::free(data); }
  uint16_t* buffer(int i) {
    if (!data) data = static_cast<uint16_t*>(std::aligned_alloc(64, size_t(2) * kRows * kMaxPieceK * 2));
    return data + size_t(i) * kRows * kMaxPieceK;
  }
};

// One unit of work: a 16-row block (row0, rows valid) over K piece [k0, k0 + kc).
struct Unit {
  int64_t row0;
  int rows;
  int64_t k0, kc;
};

class BlockRunner {
 public:
  BlockRunner(const GemvArgs& p, int mp, const uint32_t* bt, int64_t k_pad)
      : p_(p), mp_(mp), shift_(mp == 1 ? 0 : mp == 2 ? 1 : mp == 4 ? 2 : 3), bt_(bt), k_pad_(k_pad) {}

  // Row r of unit u converted into buf.
  void stage(const Unit& u, int r, uint16_t* buf, const Unit& ahead) const {
    if (r >= u.rows) {
      zero_rows(u.kc, r, buf);
      return;
    }
    const char* row = static_cast<const char*>(p_.w) + (u.row0 + r) * p_.ldw;
    const char* pf = static_cast<const char*>(p_.w) + (ahead.row0 + r) * p_.ldw + ahead.k0;
    stage_row(tables_, row, p_.k, u.k0, u.kc, r, buf, pf);
  }

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
    // block is one unit (M=4 N=1792 K=512, weights in L2, 1 thread: 58-59 -> 54-57 us). A block inside
    // one scale row (16 rows of a 128-row block, or no weight scales) needs only that row's index; the
    // others build the per-row vector through memory, whose load waits for the 16 stores to complete
    // (no store forwarding), and with them every older store: the staging rows and tile stores.
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
  const avx512bf16::E4m3Tables tables_ = avx512bf16::e4m3_tables();
  const __m512i lane_ = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 sum_[8];
  __m512i scale_rows_;           // each row's weight-scale row (blocks across two of them)
  int64_t first_scale_row_ = 0;  // the block's first row's
  bool uniform_scale_ = true;    // all of the block's rows share first_scale_row_ (or no scales)
  int64_t group_ = 0, fold_at_ = 0;
  int acc_ = 0;           // the tile accumulating the current group
  bool pending_ = false;  // the other tile holds the previous group, not yet folded
};

}  // namespace

void gemv_e4m3(const GemvArgs& p) {
  const int mp = p.m <= 1 ? 1 : p.m <= 2 ? 2 : p.m <= 4 ? 4 : 8;
  configure(mp);
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  uint32_t* bt = static_cast<uint32_t*>(p.scratch);
  interleave_activations(p, mp, k_pad, bt);

  GemvArgs q = p;  // rows relative to n0 from here on
  q.w = static_cast<const char*>(p.w) + p.n0 * p.ldw;
  const int64_t rows = p.n1 - p.n0;
  const int64_t pieces = (k_pad + kMaxPieceK - 1) / kMaxPieceK;
  const int64_t piece_k = (k_pad / pieces + 63) / 64 * 64;  // equal pieces, multiples of 64
  const int64_t units = (rows + kRows - 1) / kRows * pieces;
  if (units == 0) return;
  // Units in order: a block's K pieces, then the next block (a counter walk: no division per unit).
  auto make = [&](int64_t row0, int64_t k0) {
    return Unit{row0, int(rows - row0 < kRows ? rows - row0 : kRows), k0, k_pad - k0 < piece_k ? k_pad - k0 : piece_k};
  };
  auto after = [&](const Unit& u) { return u.k0 + u.kc < k_pad ? make(u.row0, u.k0 + u.kc) : make(u.row0 + kRows, 0); };

  static thread_local Stage stage;
  BlockRunner runner(q, mp, bt, k_pad);
  // The unit whose rows are prefetched while `next` is converted: kPrefetchUnits after it, or the last.
  Unit cur = make(0, 0), ahead = cur;
  int64_t ahead_index = 0;
  auto advance_ahead = [&](int64_t target) {
    const int64_t t = target < units ? target : units - 1;
    for (; ahead_index < t; ++ahead_index) ahead = after(ahead);
  };
  advance_ahead(kPrefetchUnits);
  for (int r = 0; r < kRows; ++r) runner.stage(cur, r, stage.buffer(0), ahead);
  for (int64_t i = 0; i < units; ++i) {
    uint16_t* buf = stage.buffer(int(i % 2));
    const int64_t steps = cur.kc / 32;
    if (i + 1 == units) {
      runner.compute(cur, 0, steps, buf);
      break;
    }
    // Convert the next unit row by row; after each row, 1/16 of this unit's K steps.
    const Unit next = after(cur);
    uint16_t* next_buf = stage.buffer(int((i + 1) % 2));
    advance_ahead(i + 1 + kPrefetchUnits);
    for (int r = 0; r < kRows; ++r) {
      runner.stage(next, r, next_buf, ahead);
      runner.compute(cur, steps * r / kRows, steps * (r + 1) / kRows, buf);
    }
    cur = next;
  }
}

}  // namespace tessera::cpu::amx
