// Plain interface between the GEMM driver (src/gemm) and the per-ISA kernel sets (src/backends/cpu/<isa>).
// No inline functions or templates here: ISA translation units include this file (see README.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {
enum class Isa : int;  // tessera/core/cpu.h (not included: it is not a plain header)
}

namespace tessera::cpu {

// Element type of an operand in memory.
enum class GemmSrcType : int {
  kBF16 = 0,
  kF32 = 1,
  kE4M3 = 2,  // float8_e4m3fn
  kE2M1 = 3,  // float4 e2m1, two per byte along K (low nibble = even k)
  kF16 = 4,   // IEEE binary16 (the tile language's T.gemm; the library GEMM takes none)
  kE5M2 = 5,  // float8_e5m2 (likewise)
};

// How the bf16 sets read a kF16 operand: every fp16 value x is hi + lo with hi = bf16(x) rounded to
// nearest and lo = x - hi, both exact in bf16, and stands for one bf16 K pair, so an R x K fp16 operand
// reads as R x 2K bf16 (k, kc and k_total count those): [hi lo], [hi hi] or [lo lo]. An A side read as
// [hi lo] against a B side read as [hi hi] and again as [lo lo] gives a.hb and a.lb: their sum is the
// exact fp16 product, in fp32.
enum class F16Split : int { kHiLo = 0, kHiHi = 1, kLoLo = 2 };

// An operand as the driver sees it: element (r, k) of an R x K matrix, r = row of the output it feeds
// (m for A, n for B). Strides count elements of the stored type. kE2M1 strides count bytes: packed
// along K, value (r, k) is nibble k&1 of byte r*stride_r + (k/2)*stride_k (stride_k == 1); packed along
// rows (fp4_along_r), it is nibble r&1 of byte (r/2)*stride_r + k*stride_k.
struct GemmSrc {
  const void* data;
  GemmSrcType type;
  int64_t stride_r;
  int64_t stride_k;
  // Packing hint set by the driver for kernel sets that convert fp8 in "lane order" (avx512bf16): K is
  // then permuted within aligned 64-value blocks identically on both sides (which leaves dot products
  // unchanged); k0 and kc passed to prepare_a/pack_b are multiples of 64. Ignored by other sets.
  bool lane_order = false;
  bool fp4_along_r = false;
  F16Split f16_split = F16Split::kHiLo;  // kF16 on the bf16 sets (the fp32 sets read fp16 as it is)
};

// Scales of one operand, expanded to fp32: scale of row r in K-group g at scale[g * group_stride + r].
// scale == nullptr means "no scales" (factor 1).
struct GemmScales {
  const float* scale;
  int64_t group_stride;
};

struct UkrArgs {
  const void* a;  // a-panel: mr rows (rows beyond m_valid are not read), row stride lda elements
  int64_t lda;
  const void* b;  // packed b-panel (nr columns, interleaved layout)
  int kc;         // K values in this call (multiple of the kernel's k_align; padding is zero)
  int group;      // K values per scale group (a multiple of k_align); == kc when unscaled
  float* c;       // fp32 tile, row stride ldc floats; mr x nr values are written
  int64_t ldc;
  int accumulate;          // 0: the first group overwrites c; 1: every group adds to c
  int m_valid;             // rows of the a-panel that exist (1..mr); c rows at or beyond it are untouched
  int n_valid;             // b-panel columns whose results are used (1..nr; 0 = all): a kernel may leave c
                           // columns at or beyond it unwritten (whole vectors of them skipped)
  const float* row_scale;  // row_scale[g * row_scale_stride + r] for r < mr, or nullptr
  int64_t row_scale_stride;
  const float* col_scale;  // col_scale[g * col_scale_stride + c] for c < nr, or nullptr
  int64_t col_scale_stride;
  // Lines the caller will read next, prefetched into L2 a few at a time while the tile computes (a
  // burst of a few hundred prefetches is mostly dropped; see ukr_prefetch.h): lines [pf_begin, pf_end)
  // of a block whose line i is at pf_base + (i / pf_row_lines) * pf_row_stride + (i % pf_row_lines) * 64.
  // pf_end <= pf_begin: none.
  const char* pf_base;
  int64_t pf_row_stride;
  int pf_row_lines;
  int pf_begin, pf_end;
  // Units [cv_begin, cv_end) of the next a-panel's conversion, done through the K loop beside the
  // products (kernel sets with fuses_e4m3_convert; cv_end <= cv_begin: none). Unit u is 64 K values of
  // row u / cv_row_units: e4m3 bytes at cv_src + row * cv_src_stride + (u % cv_row_units) * 64, written
  // as bf16 in lane order (GemmSrc::lane_order) at cv_dst + row * cv_dst_stride + (u % cv_row_units) * 64.
  const char* cv_src;
  int64_t cv_src_stride;
  uint16_t* cv_dst;
  int64_t cv_dst_stride;
  int cv_row_units;
  int cv_begin, cv_end;
};

using UkrFn = void (*)(const UkrArgs& args);

// The columns of a b-side tail panel as dot products along K, over bf16 rows that are both
// K-contiguous (a row i at a + i * lda, b row t at b + t * ldb; nothing at or beyond k_valid is read):
// c[i * ldc + t] = (accumulate ? c[i * ldc + t] : 0) + sum_g (sum_{k in g, k < k_valid} a[i][k] b[t][k])
//                  * row_scale[g * row_scale_stride + i] * col_scale[g * col_scale_stride + t]
// for i < rows, t < cols, over K groups of `group` values (scales nullptr: one unscaled group).
struct TailDotArgs {
  const uint16_t* a;
  int64_t lda;
  int rows;
  const uint16_t* b;
  int64_t ldb;
  int cols;
  int k_valid;
  float* c;
  int64_t ldc;
  int accumulate;
  int group;
  const float* row_scale;
  int64_t row_scale_stride;
  const float* col_scale;
  int64_t col_scale_stride;
};
using TailDotFn = void (*)(const TailDotArgs& args);

// One register tile of a kernel set: mr a-panel rows x nr b-panel columns; rate: its measured
// throughput on whole panels relative to the set's best tile (0 means 1), for the plan's cost.
struct GemmTile {
  int mr, nr;
  UkrFn ukr;
  float rate;
};

struct GemmKernelSet {
  const char* name;  // e.g. "avx512bf16"
  int k_align;       // K granularity of packed data (2 for bf16 pairs, 1 for fp32)
  int elem_bytes;    // bytes per packed element (2 or 4)
  int kc;            // default K block
  // Register tiles offered (the plan picks the one that wastes least on padding), num_tiles <= 4.
  GemmTile tiles[4];
  int num_tiles;
  // Which source types prepare_a / pack_b accept; the dispatcher refuses the set for others.
  bool (*accepts)(GemmSrcType type);

  // Makes rows [r0, r0+rows) x K [k0, k0+kc) available as an a-panel block. kc is a multiple of
  // k_align; K values at or beyond k_total read as zero. Returns the block and its row stride in *lda;
  // buf (rows * kc elements) is used when a copy is needed.
  const void* (*prepare_a)(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                           int64_t* lda);
  // Packs rows [r0, r0+rows) x K [k0, k0+kc) into ceil(rows/nr) b-panels of kc x nr each (panel p
  // at dst + p*kc*nr elements). Rows >= r0+rows or >= r_total and K >= k_total are zero. nr is the
  // nr of one of the set's tiles.
  void (*pack_b)(const GemmSrc& src, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
                 void* dst);
  // Column granularity of a full-height tile's work when its micro-kernels honour UkrArgs::n_valid
  // (a partly valid last b-panel costs round_up(n_valid, n_step) columns); 0: they compute all nr.
  int n_step;
  // Optional: tail panels of at most tail_dot_cols valid columns by dot products (see TailDotArgs).
  TailDotFn tail_dot;
  int tail_dot_cols;
  // Whether the micro-kernels do UkrArgs::cv_* conversions (e4m3 -> bf16 lane order, as prepare_a).
  bool fuses_e4m3_convert;
  // K block for problems with scale groups (0: kc). Depends only on the problem, like kc.
  int kc_scaled = 0;
  // prepare_a copies every a-panel, bf16 read in place included (amx: tile order), so each extra b-block
  // repeats a copy of the whole a-side: the plan packs larger b-sides whole.
  bool copies_a = false;
  // Optional (both or neither; amx): scales that are all powers of two folded into the operands, so the
  // micro-kernels run unscaled (PackedPlan::fold_scales). prepare_a_folded is prepare_a (into buf) with
  // row r's values of K group g times scale[g * scale_stride + r] (g counted from k0); fold_b_scales
  // multiplies packed b-panels (pack_b's layout, `cols` columns of kc values) in place by
  // scale[g * scale_stride + c]. Both exact: every scale is 2^e with |e| <= kFoldExponentMax and the
  // source values are fp8 or fp4, so each product is the value with e added to its bf16 exponent.
  // group is a multiple of 32 (of 64 with lane order).
  const void* (*prepare_a_folded)(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total,
                                  void* buf, int64_t* lda, const float* scale, int64_t scale_stride,
                                  int group) = nullptr;
  void (*fold_b_scales)(void* panels, int cols, int nr, int kc, int group, const float* scale,
                        int64_t scale_stride) = nullptr;
  // The micro-kernels sum every output as one fp32 FMA chain in k order within a K chunk (the fp32
  // sets, gemm_ukr_f32-inl.h); bf16 pair products (vdpbf16ps, BFMMLA) and tiles do not.
  bool k_order_chain = false;
};

// The largest |e| of a 2^e scale that may be folded into fp8 / fp4 operands: e4m3 (2^-9 .. 448) and
// e2m1 (0.5 .. 6) values times 2^+-64 stay normal bf16 numbers.
constexpr int kFoldExponentMax = 64;

// Writes D = round(C + tile) for an output block (the one rounding of every GEMM path).
// transposed == false: tile[i * ldt + j] is D[i][j]; true: tile[j * ldt + i] is D[i][j].
// d/c are fp32 or bf16 (d_bf16 / c_bf16), row strides ldd/ldc in elements; c may be null or equal d.
// bf16 rounding is round-to-nearest-even with NaN -> 0x7FC0|sign, bit-identical to f32_to_bf16.
struct FinalizeArgs {
  const float* tile;
  int64_t ldt;
  bool transposed;
  void* d;
  bool d_bf16;
  int64_t ldd;
  const void* c;
  bool c_bf16;
  int64_t ldc;
  int64_t rows, cols;
  // Whole 64-byte lines of D go out with non-temporal stores (no read for ownership, the operands stay
  // cached); the driver sets it for large D (finalize.cc). Partial or unaligned lines are stored normally.
  bool stream = false;
};
using FinalizeFn = void (*)(const FinalizeArgs& args);
// AVX-512 F/BW version (usable by the avx512 and avx512bf16 levels); the driver has a portable one.
FinalizeFn gemm_finalize_avx512();
// Highway version (hwy/gemm_finalize.cc) for the avx2 level and up; nullptr when not built.
FinalizeFn gemm_finalize_hwy(Isa level);

// Accessors; each returns nullptr when the library was built without that level.
const GemmKernelSet* gemm_kernels_amx();  // AMX tiles; reuses the avx512bf16 set's packing
const GemmKernelSet* gemm_kernels_avx512bf16();
const GemmKernelSet* gemm_kernels_avx512();
const GemmKernelSet* gemm_kernels_avx2();
const GemmKernelSet* gemm_kernels_neon();       // AArch64 NEON fp32 FMA (neon/)
const GemmKernelSet* gemm_kernels_neon_bf16();  // AArch64 BFMMLA (neon_bf16/), bf16 and e4m3 operands

// ---- decode GEMV (M <= 8): D rows streamed over K-contiguous weights ----
// out[m * ldo + n] (fp32) = sum_g (sum_{k in g} a[m][k] * w[n][k]) * a_scale[g*ass + m] * w_scale(g, n)
// for n in [n0, n1). a (m rows, K-contiguous, row stride a_stride) and w (K-contiguous rows, row stride
// ldw) have the same type, bf16 or e4m3; neither is read beyond K. group is a multiple of 64 (or >= K
// when unscaled, a_scale == nullptr). w_scale(g, n) = w_scale[g * wss + (w_row0 + n) / w_scale_rows].
// scratch: at least 8 * round_up(K, 64) * 4 bytes (the fp32 kernels keep the activations widened), 64-byte
// aligned, private to the calling thread.
struct GemvArgs {
  const void* a;
  int64_t a_stride;
  int m;
  const void* w;
  GemmSrcType w_type;
  int64_t ldw;
  int64_t k;
  int group;
  const float* a_scale;
  int64_t a_scale_stride;
  const float* w_scale;
  int64_t w_scale_stride;
  int w_scale_rows;
  int64_t w_row0;  // absolute row of w's first row (for the weight-scale index)
  float* out;
  int64_t ldo;
  int64_t n0, n1;
  void* scratch;
  // The caller's whole weight matrix is too large to stay cached between calls (so it streams from
  // DRAM): the kernel then takes each row's whole K in one pass. Decided from the problem, never from
  // the thread's share, so the bits do not depend on the thread count.
  bool streamed = false;
};
using GemvFn = void (*)(const GemvArgs& args);
GemvFn gemv_kernel_avx512bf16();
GemvFn gemv_kernel_amx();  // AMX tiles: 16 weight rows x M outputs per product (gemv_amx.cc)
// BFDOT (neon_bf16/gemv_bfdot.cc) for the neon_bf16 level and up (ARM builds; nullptr elsewhere).
GemvFn gemv_kernel_neon_bf16();
// fp32 FMAs (hwy/gemv.cc) for the avx2 level and up; nullptr when no Highway target of `level` was built.
GemvFn gemv_kernel_hwy(Isa level);

// ---- decode GEMV over packed FP4 (e2m1) weights with per-32 power-of-two (UE8M0) weight scales ----
// out[m * ldo + n] = sum_g (sum_{k in g} a[m][k] * w[n][k] * 2^(e(n, k/32) - 127)) * a_scale[g*ass + m],
// g over a_group-wide K groups (a multiple of 128; the whole K when a_scale == nullptr). w rows hold K/2
// bytes (K even), the even value in the low nibble; the exponent byte e(n, b) is at
// w_exp[(w_row0 + n) * exp_row_bytes + (b / 4) * exp_word_bytes + b % 4] (DeepGEMM's packed int32 scale
// layout read in place). The scale multiplies fp32 partial sums of 32-value blocks (exact), which needs
// 1 <= e <= 254; the kernel returns false (out partly written) if any exponent is outside, so the
// caller recomputes that problem another way. a: e4m3 or bf16 rows, K-contiguous.
struct GemvFp4Args {
  const void* a;
  int64_t a_stride;
  GemmSrcType a_type;
  int m;
  const uint8_t* w;
  int64_t ldw;
  int64_t k;
  const uint8_t* w_exp;
  int64_t exp_row_bytes, exp_word_bytes;
  int64_t w_row0;
  int a_group;
  const float* a_scale;
  int64_t a_scale_stride;
  float* out;
  int64_t ldo;
  int64_t n0, n1;
  void* scratch;  // >= 32 * round_up(K, 128) bytes, 64-byte aligned, private to the calling thread
};
using GemvFp4Fn = bool (*)(const GemvFp4Args& args);
GemvFp4Fn gemv_fp4_kernel_avx512bf16();
// AMX tiles (amx/gemv_amx_fp4.cc): the weight scales go into the converted bf16 values, which takes
// 64 <= e <= 190 (false otherwise, as above).
GemvFp4Fn gemv_fp4_kernel_amx();
// BFDOT (neon_bf16/gemv_fp4_bfdot.cc) for the neon_bf16 level and up, exponents 1..254 as above (ARM
// builds; nullptr elsewhere).
GemvFp4Fn gemv_fp4_kernel_neon_bf16();
// fp32 FMAs (hwy/gemv_fp4.cc) for the avx2 level and up, exponents 1..254 as above; nullptr when no
// Highway target of `level` was built.
GemvFp4Fn gemv_fp4_kernel_hwy(Isa level);

}  // namespace tessera::cpu
