// The AMX GEMM kernel set: bf16 tiles multiplied by tdpbf16ps into fp32 tile registers.
//
// AMX holds eight tile registers of up to 16 rows x 64 bytes. One tdpbf16ps multiplies a 16 x 32 bf16
// a-tile by a 32 x 16 b-tile stored as 16 rows of K pairs (exactly the avx512bf16 set's packed b-panel
// layout, element (k, n) at [(k/2)*nr*2 + n*2 + k%2]) and adds to a 16 x 16 fp32 tile. A micro-kernel
// call covers (16 or 32 rows) x 32 columns: tiles 0-3 hold C (row half i, column half j at 2i+j), 4-5
// the a-tiles of rows 0-15 / 16-31, 6-7 the b-tiles of columns 0-15 / 16-31 (stride nr*4 bytes). The
// b-panels come from the avx512bf16 set's pack_b unchanged (K padded to 32 here: k_align = 32).
//
// a-panels are always copied into "tile order": 16-row groups, each K step of 32 values of the group's
// 16 rows as one contiguous 1 KiB tile, so an a-tile load reads 16 consecutive lines. Read in place
// (rows 4 KiB apart at K = 2048) the 16 lines of every tile load fell into one L1 set. Row r, value k
// of a block prepared for kc values is at [(r/16)*16*kc + (k/32)*512 + (r%16)*32 + k%32] (so a panel
// starting at row ir is at ir * kc: the driver's lda is kc). Rows past the block's last are zero.
//
// Scales: unscaled calls keep C in the tiles for the whole call (loaded from c when accumulating);
// scaled calls run each K group into zeroed tiles, store them to a small buffer and fold it into a
// call-local fp32 sum with FMAs, sum += t * row_scale * col_scale (DeepGEMM's per-128-K promotion),
// then c (+)= sum. Scales that are all powers of two never get here: the driver folds them into the
// operands (gemm_prepare_amx.cc) and calls the kernel unscaled.
//
// Tile configuration: set per call, loaded only when the thread's current one differs (tile_config.h).
// A panel with fewer than 16 (or 32) valid rows gets a configuration with that many rows in its tiles,
// so no c row past the panel's last is read or written.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/amx/gemm_prepare_amx.h"
#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/ukr_prefetch.h"

namespace tessera::cpu {
namespace {

using amx::TileConfig;

// Configuration for a call whose a-panel has `rows` valid rows (1..32).
TileConfig make_config(int rows) {
  TileConfig want;
  std::memset(&want, 0, sizeof(want));
  want.palette = 1;
  const int top = rows < 16 ? rows : 16, bottom = rows - top;
  for (int t = 0; t < 8; ++t) want.colsb[t] = 64;
  want.rows[0] = want.rows[1] = want.rows[4] = uint8_t(top);
  want.rows[2] = want.rows[3] = want.rows[5] = uint8_t(bottom);
  want.rows[6] = want.rows[7] = 16;
  if (bottom == 0) want.colsb[2] = want.colsb[3] = want.colsb[5] = 0;  // unused: unconfigured
  return want;
}

// The configurations are built once: one built on the stack at every call was read back before its
// byte stores had reached the cache (a failed store forward), which waited for every older store,
// among them the previous call's C-tile stores and so its whole chain of tile products.
void configure(int rows) {
  static const struct Table {
    TileConfig config[33];
    Table() {
      for (int r = 1; r <= 32; ++r) config[r] = make_config(r);
    }
  } table;
  amx::use_tile_config(table.config[rows]);
}

// K values [k0, k1) (multiples of 32) of the a-panel (RT row tiles) against NT column tiles, added to
// the C tiles.
template <int RT, int NT>
inline void k_steps(const UkrArgs& p, int k0, int k1, UkrPrefetcher& pf) {
  const char* a = static_cast<const char*>(p.a);
  const int64_t a_group = int64_t(16) * p.kc * 2;  // bytes of one 16-row group (tile order)
  const char* b = static_cast<const char*>(p.b);
  const int64_t b_stride = int64_t(32) * 4;  // nr = 32 columns of bf16 pairs
  for (int k = k0; k < k1; k += 32) {
    const char* bk = b + int64_t(k / 2) * b_stride;
    _tile_loadd(6, bk, b_stride);
    if (NT == 2) _tile_loadd(7, bk + 64, b_stride);
    _tile_loadd(4, a + int64_t(k) * 32, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if (RT == 2) {
      _tile_loadd(5, a + a_group + int64_t(k) * 32, 64);
      _tile_dpbf16ps(2, 5, 6);
      if (NT == 2) _tile_dpbf16ps(3, 5, 7);
    }
    if (pf.per_step) pf.run(p, pf.per_step);
  }
}

template <int RT, int NT>
inline void zero_c() {
  _tile_zero(0);
  if (NT == 2) _tile_zero(1);
  if (RT == 2) {
    _tile_zero(2);
    if (NT == 2) _tile_zero(3);
  }
}

template <int RT, int NT>
inline void load_c(float* c, int64_t ldc) {
  const int64_t stride = ldc * 4;
  _tile_loadd(0, c, stride);
  if (NT == 2) _tile_loadd(1, c + 16, stride);
  if (RT == 2) {
    _tile_loadd(2, c + 16 * ldc, stride);
    if (NT == 2) _tile_loadd(3, c + 16 * ldc + 16, stride);
  }
}

template <int RT, int NT>
inline void store_c(float* c, int64_t ldc) {
  const int64_t stride = ldc * 4;
  _tile_stored(0, c, stride);
  if (NT == 2) _tile_stored(1, c + 16, stride);
  if (RT == 2) {
    _tile_stored(2, c + 16 * ldc, stride);
    if (NT == 2) _tile_stored(3, c + 16 * ldc + 16, stride);
  }
}

// acc[r][..] (+)= t[r][..] * row_scale[g][r] * col_scale[g][..] for the call's valid rows (the first
// group overwrites). acc has a row stride of 32 floats, so the whole 4 KiB stays in L1; the caller's c
// (row stride ldc, a few KiB) is touched once per call, not once per group: folding each group into c
// ran the scaled kernel (group 128) at 0.63-0.68 of the unscaled one, this way at 0.70 (kc = 256) and
// 0.81 (kc = 1024); a-panels in L2, 1 thread, c rows then 4 KiB apart (one L1 set; packed.cc now pads
// such strides).
template <int NT>
inline void fold(const UkrArgs& p, const float* t, int g, float* acc) {
  const float* rs = p.row_scale ? p.row_scale + g * p.row_scale_stride : nullptr;
  const float* cs = p.col_scale ? p.col_scale + g * p.col_scale_stride : nullptr;
  __m512 col[NT];
  for (int v = 0; v < NT; ++v) col[v] = cs ? _mm512_loadu_ps(cs + 16 * v) : _mm512_set1_ps(1.0f);
  for (int r = 0; r < p.m_valid && r < 32; ++r) {
    const __m512 row = _mm512_set1_ps(rs ? rs[r] : 1.0f);
    for (int v = 0; v < NT; ++v) {
      float* out = acc + r * 32 + 16 * v;
      const __m512 prev = g == 0 ? _mm512_setzero_ps() : _mm512_load_ps(out);
      _mm512_store_ps(out, _mm512_fmadd_ps(_mm512_load_ps(t + r * 32 + 16 * v), _mm512_mul_ps(row, col[v]), prev));
    }
  }
}

template <int RT, int NT>
void ukr_tiles(const UkrArgs& p) {
  UkrPrefetcher pf(p);  // the caller's next lines, spread over the K loop
  const bool scaled = p.row_scale != nullptr || p.col_scale != nullptr;
  if (!scaled) {
    if (p.accumulate) {
      load_c<RT, NT>(p.c, p.ldc);
    } else {
      zero_c<RT, NT>();
    }
    k_steps<RT, NT>(p, 0, p.kc, pf);
    store_c<RT, NT>(p.c, p.ldc);
    return;
  }
  // One K group at a time into zeroed tiles, stored to t and folded into the call's sum with its
  // scales. (Folding group g - 1 only after issuing group g's tile products, from a second buffer, was
  // no faster; measurements: docs/notes/2026-12-05-measurements-moved-from-source.md.)
  alignas(64) float t[32 * 32];
  alignas(64) float acc[32 * 32];
  const int groups = (p.kc + p.group - 1) / p.group;
  for (int g = 0; g < groups; ++g) {
    const int k0 = g * p.group, k1 = k0 + p.group < p.kc ? k0 + p.group : p.kc;
    zero_c<RT, NT>();
    k_steps<RT, NT>(p, k0, k1, pf);
    store_c<RT, NT>(t, 32);
    fold<NT>(p, t, g, acc);
  }
  for (int r = 0; r < p.m_valid && r < 32; ++r)
    for (int v = 0; v < NT; ++v) {
      float* cr = p.c + r * p.ldc + 16 * v;
      const __m512 sum = _mm512_load_ps(acc + r * 32 + 16 * v);
      _mm512_storeu_ps(cr, p.accumulate ? _mm512_add_ps(_mm512_loadu_ps(cr), sum) : sum);
    }
}

// mr = 32 or 16 rows x nr = 32 columns; a tail panel whose valid columns fit one column tile computes
// only that one (n_step = 16).
template <int MR>
void gemm_ukr_amx(const UkrArgs& p) {
  const int rows = p.m_valid < MR ? p.m_valid : MR;
  configure(rows);
  const bool one_col_tile = p.n_valid > 0 && p.n_valid <= 16;
  if (rows > 16) {
    if (one_col_tile) {
      ukr_tiles<2, 1>(p);
    } else {
      ukr_tiles<2, 2>(p);
    }
  } else if (one_col_tile) {
    ukr_tiles<1, 1>(p);
  } else {
    ukr_tiles<1, 2>(p);
  }
}

}  // namespace

const GemmKernelSet* gemm_kernels_amx() {
  static const GemmKernelSet set = [] {
    // The a-panels, b-panels and thin tails are the avx512bf16 set's (same layouts); AMX implies it.
    const GemmKernelSet& base = *gemm_kernels_avx512bf16();
    GemmKernelSet s = base;
    s.name = "amx";
    s.k_align = 32;  // one tdpbf16ps consumes 32 K values per row
    // K blocks of 1024: each call loads and stores its C tiles through the fp32 workspace (L2) once,
    // so longer blocks mean fewer such trips, which pays for b-panels (64 KiB) that no longer stay in
    // L1. bf16, 2 threads, the bench's M >= 128 shapes, 256 vs 1024 alternating call by call in one
    // process (2026-12-01): 1024 took 1-18% less time on 10 of 11 in one pass and on all 9 BLIS-order
    // ones in a second (M=128 N=24576 K=1536 x1.15 / x1.22, M=1024 N=7168 K=2048 x1.05 / x1.18); M=1024
    // N=32768 K=512 (one chunk of 512 instead of two of 256) x0.88 in one pass, x1.02 in another; M=64
    // rows x0.93-x1.29 (geometric mean x1.06). 256 had looked 10-17% faster in separate processes
    // alternated a day earlier, on a host whose speed moves 2x between minutes. Scaled problems fold
    // every group into c once per call and also take 1024 (fp8: 256 took 0-13% longer).
    s.kc = 1024;
    s.kc_scaled = 1024;
    // 32 x 32 is the tile; 16 x 32 (rate 0.6 on packed panels) takes short a-sides where it pads less.
    // Measured again on 2026-12-01 in separate processes alternated 6 times (TESSERA_GEMM_TILE=0|1, 2
    // threads): 16 x 32 took longer on 8 of the bench's 11 bf16 M >= 128 shapes (x0.91-0.96; M=128
    // N=4096 K=7168 x1.28, N=576 x1.02) and on fp8 M=1024 (x0.87-0.89), and was mixed on fp8 M=64/128
    // (x0.86-1.19, geometric mean ~x1.03). Alternating the two call by call in one process had
    // suggested the opposite (x1.05-1.37 for 16 x 32): switching tile configurations between calls
    // biases that comparison, so tile choices are compared across processes.
    s.tiles[0] = {32, 32, gemm_ukr_amx<32>, 1.0f};
    s.tiles[1] = {16, 32, gemm_ukr_amx<16>, 0.6f};
    s.num_tiles = 2;
    s.n_step = 16;
    s.prepare_a = amx::prepare_a;
    s.prepare_a_folded = amx::prepare_a_folded;
    s.fold_b_scales = amx::fold_b_scales;
    s.copies_a = true;
    s.tail_dot = nullptr;  // it reads a-panels as rows; tails run as one column tile instead
    s.tail_dot_cols = 0;
    s.fuses_e4m3_convert = false;
    return s;
  }();
  return &set;
}

}  // namespace tessera::cpu
