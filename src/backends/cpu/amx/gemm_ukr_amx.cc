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
// then c (+)= sum.
//
// Tile configuration: set per call, loaded only when the thread's current one differs (tile_config.h).
// A panel with fewer than 16 (or 32) valid rows gets a configuration with that many rows in its tiles,
// so no c row past the panel's last is read or written.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/avx512bf16/f16_split.h"
#include "backends/cpu/avx512bf16/fp8_convert.h"
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
// values: fill(row, out) writes row `row`'s K steps at out + s * 512; padding rows are zeroed here.
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
void to_tile_order(const uint16_t* src, int64_t ld, int rows, int kc, int k_valid, uint16_t* dst) {
  const int steps = kc / 32;
  for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
    const uint16_t* in = src + row * ld;
    int s = 0;
    for (; s < steps && s * 32 + 32 <= k_valid; ++s) _mm512_store_si512(out + s * 512, _mm512_loadu_si512(in + s * 32));
    for (; s < steps; ++s) {
      const int left = k_valid - s * 32;
      const __mmask32 m = left <= 0 ? 0 : (left >= 32 ? ~0u : (1u << left) - 1);
      _mm512_store_si512(out + s * 512, _mm512_maskz_loadu_epi16(m, in + s * 32));
    }
  });
}

// Rows [0, rows) of an e4m3 source along K, K [k0, k0 + kc) (kc a multiple of 64), converted straight
// into tile order: each 64 values give K steps 2c and 2c + 1 of the row (lane order when the source asks
// for it, the same conversion the avx512bf16 set's staging copy does). K values at or beyond k_valid
// read as code 0 (+0.0), so a chunk that ends past K needs no staging copy. Against that staging copy
// followed by to_tile_order (fp8, 2 threads, separate processes, 6 rounds): M=128 N=7168 K=2048 x1.06,
// N=2112 K=7168 x1.09, N=24576 K=1536 x1.08; M=1024 x1.01-1.02.
void e4m3_to_tile_order(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int k_valid, uint16_t* dst) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  const int steps = kc / 32;
  for_each_tile_row(rows, kc, dst, [&](int row, uint16_t* out) {
    const char* in = static_cast<const char*>(src.data) + (r0 + row) * src.stride_r + k0;
    auto convert = [&](int s, __m512i codes) __attribute__((always_inline)) {
      __m512i lo, hi;
      avx512bf16::e4m3x64_to_bf16_in(t, src.lane_order, codes, &lo, &hi);
      _mm512_store_si512(out + s * 512, lo);
      _mm512_store_si512(out + (s + 1) * 512, hi);
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
void narrow_to_tile_order(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int k_valid, uint16_t* dst) {
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
        _mm512_store_si512(out + s * 512, lo);
        _mm512_store_si512(out + (s + 1) * 512, hi);
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
      _mm512_store_si512(out + s * 512, avx512bf16::f16x16_split_pairs(halves, src.f16_split));
    }
  });
}

const void* prepare_a(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                      int64_t* lda) {
  uint16_t* out = static_cast<uint16_t*>(buf);
  *lda = kc;
  if (src.type == GemmSrcType::kBF16 && src.stride_k == 1) {
    const int64_t left = k_total - k0;
    const int k_valid = left < kc ? int(left) : kc;
    to_tile_order(static_cast<const uint16_t*>(src.data) + r0 * src.stride_r + k0, src.stride_r, rows, kc, k_valid,
                  out);
    return out;
  }
  if (src.type == GemmSrcType::kE4M3 && src.stride_k == 1 && kc % 64 == 0) {
    const int64_t left = k_total - k0;
    e4m3_to_tile_order(src, r0, rows, k0, kc, left < kc ? int(left) : kc, out);
    return out;
  }
  if (src.stride_k == 1 && ((src.type == GemmSrcType::kE5M2 && kc % 64 == 0) || src.type == GemmSrcType::kF16)) {
    const int64_t left = k_total - k0;
    narrow_to_tile_order(src, r0, rows, k0, kc, left < kc ? int(left) : kc, out);
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
    to_tile_order(block, ld, group_rows, kc, kc, out + int64_t(g) * kc);
  }
  return out;
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
    s.prepare_a = prepare_a;
    s.copies_a = true;
    s.tail_dot = nullptr;  // it reads a-panels as rows; tails run as one column tile instead
    s.tail_dot_cols = 0;
    s.fuses_e4m3_convert = false;
    return s;
  }();
  return &set;
}

}  // namespace tessera::cpu
