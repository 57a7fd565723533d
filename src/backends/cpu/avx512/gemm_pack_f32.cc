// Packing for the avx512 (fp32-FMA) kernel set: a-panel blocks (rows of fp32 K-values, row stride kc)
// and b-panels (nr columns, a multiple of 16; element (k, n) at panel[k*nr + n]). bf16, e4m3 and fp32
// sources are converted to fp32 exactly on the way in; K- and row-contiguous sources take vector paths
// (templates over the source type, so the per-vector conversion has no branches), other strides a
// scalar loop.
#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/avx512/f32_convert.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

using avx512::load16_f32;
using avx512::load16_f32_full;
using avx512::mask16;
using avx512::src_elem_bytes;
using avx512::src_to_f32;
using avx512::transpose16x16;

int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

const char* element(const GemmSrc& s, int64_t r, int64_t k) {
  return static_cast<const char*>(s.data) + (r * s.stride_r + k * s.stride_k) * src_elem_bytes(s.type);
}

// K-contiguous source (b-side rows are output columns): 16 columns x 16 K values at a time, transposed
// so that each K value becomes a 16-column row of the panel.
template <GemmSrcType T>
void pack_b_kcontig(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, float* dst) {
  const int64_t r_end = min64(r0 + rows, r_total);
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    float* panel = dst + int64_t(p) * kc * nr;
    for (int grp = 0; grp < nr / 16; ++grp) {
      const int64_t rbase = r0 + p * nr + grp * 16;
      for (int kk = 0; kk < kc; kk += 16) {
        const int64_t k_in = min64(k_total - (k0 + kk), kc - kk);
        const __mmask16 km = mask16(k_in);
        __m512 v[16];
        for (int i = 0; i < 16; ++i) {
          const char* src = element(s, rbase + i, k0 + kk);
          if (rbase + i >= r_end) {
            v[i] = _mm512_setzero_ps();
          } else {
            v[i] = k_in >= 16 ? load16_f32_full(T, src) : load16_f32(T, src, km);
          }
        }
        transpose16x16(v);
        const int kn = kc - kk < 16 ? kc - kk : 16;
        for (int j = 0; j < kn; ++j) _mm512_storeu_ps(panel + int64_t(kk + j) * nr + grp * 16, v[j]);
      }
    }
  }
}

// Row-contiguous (MN-major) source: the nr columns of one K value are adjacent in memory.
template <GemmSrcType T>
void pack_b_rcontig(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, float* dst) {
  const int64_t r_end = min64(r0 + rows, r_total);
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    float* panel = dst + int64_t(p) * kc * nr;
    for (int k = 0; k < kc; ++k) {
      const bool k_valid = k0 + k < k_total;
      for (int grp = 0; grp < nr / 16; ++grp) {
        const int64_t rbase = r0 + p * nr + grp * 16;
        const int64_t r_in = k_valid ? r_end - rbase : 0;
        const char* src = element(s, rbase, k0 + k);
        _mm512_storeu_ps(panel + int64_t(k) * nr + grp * 16,
                         r_in >= 16 ? load16_f32_full(T, src) : load16_f32(T, src, mask16(r_in)));
      }
    }
  }
}

void pack_b_generic(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, float* dst) {
  const int64_t r_end = min64(r0 + rows, r_total);
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p)
    for (int k = 0; k < kc; ++k)
      for (int c = 0; c < nr; ++c) {
        const int64_t r = r0 + p * nr + c;
        const bool valid = r < r_end && k0 + k < k_total;
        dst[(int64_t(p) * kc + k) * nr + c] = valid ? src_to_f32(s, r, k0 + k) : 0.0f;
      }
}

template <GemmSrcType T>
void pack_b_typed(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
                  float* dst) {
  if (s.stride_k == 1) return pack_b_kcontig<T>(s, r0, rows, r_total, k0, kc, k_total, nr, dst);
  if (s.stride_r == 1) return pack_b_rcontig<T>(s, r0, rows, r_total, k0, kc, k_total, nr, dst);
  pack_b_generic(s, r0, rows, r_total, k0, kc, k_total, nr, dst);
}

void pack_b(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
            void* dst) {
  float* d = static_cast<float*>(dst);
  switch (s.type) {
    case GemmSrcType::kBF16:
      return pack_b_typed<GemmSrcType::kBF16>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
    case GemmSrcType::kE4M3:
      return pack_b_typed<GemmSrcType::kE4M3>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
    default:
      return pack_b_typed<GemmSrcType::kF32>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
  }
}

// K-contiguous source: whole vectors, one masked tail, then zeros up to kc.
template <GemmSrcType T>
void copy_a_kcontig(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  const int k_in = int(clamp64(k_total - k0, 0, kc));
  const int es = src_elem_bytes(T);
  for (int r = 0; r < rows; ++r) {
    const char* src = element(s, r0 + r, k0);
    float* out = buf + int64_t(r) * kc;
    int kk = 0;
    for (; kk + 16 <= k_in; kk += 16) _mm512_storeu_ps(out + kk, load16_f32_full(T, src + kk * es));
    for (; kk < kc; kk += 16)
      _mm512_mask_storeu_ps(out + kk, mask16(kc - kk), load16_f32(T, src + kk * es, mask16(k_in - kk)));
  }
}

// MN-major source: element (r, k) at r + k*stride_k. 16 K values of 16 rows are loaded as K-rows and
// transposed into a-panel rows.
template <GemmSrcType T>
void copy_a_rcontig(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  for (int rb = 0; rb < rows; rb += 16) {
    const __mmask16 rm = mask16(rows - rb);
    const int rn = rows - rb < 16 ? rows - rb : 16;
    for (int kb = 0; kb < kc; kb += 16) {
      const int64_t k_in = min64(k_total - (k0 + kb), kc - kb);  // K values to read in this block
      __m512 v[16];
      for (int k = 0; k < 16; ++k) {
        const char* src = element(s, r0 + rb, k0 + kb + k);
        if (k >= k_in) {
          v[k] = _mm512_setzero_ps();
        } else {
          v[k] = rn == 16 ? load16_f32_full(T, src) : load16_f32(T, src, rm);
        }
      }
      transpose16x16(v);
      const __mmask16 store_mask = mask16(kc - kb);
      for (int r = 0; r < rn; ++r) _mm512_mask_storeu_ps(buf + int64_t(rb + r) * kc + kb, store_mask, v[r]);
    }
  }
}

void copy_a_generic(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < kc; ++k) buf[int64_t(r) * kc + k] = k0 + k < k_total ? src_to_f32(s, r0 + r, k0 + k) : 0.0f;
}

template <GemmSrcType T>
void copy_a_typed(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  if (s.stride_k == 1) return copy_a_kcontig<T>(s, r0, rows, k0, kc, k_total, buf);
  if (s.stride_r == 1) return copy_a_rcontig<T>(s, r0, rows, k0, kc, k_total, buf);
  copy_a_generic(s, r0, rows, k0, kc, k_total, buf);
}

// fp32 kernels always copy: bf16/e4m3 need converting, and an fp32 copy keeps the block's rows
// kc apart (L2-friendly) whatever the source's leading dimension.
const void* prepare_a(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                      int64_t* lda) {
  float* b = static_cast<float*>(buf);
  *lda = kc;
  switch (s.type) {
    case GemmSrcType::kBF16:
      copy_a_typed<GemmSrcType::kBF16>(s, r0, rows, k0, kc, k_total, b);
      break;
    case GemmSrcType::kE4M3:
      copy_a_typed<GemmSrcType::kE4M3>(s, r0, rows, k0, kc, k_total, b);
      break;
    default:
      copy_a_typed<GemmSrcType::kF32>(s, r0, rows, k0, kc, k_total, b);
      break;
  }
  return b;
}

bool accepts(GemmSrcType t) {
  return t == GemmSrcType::kBF16 || t == GemmSrcType::kE4M3 || t == GemmSrcType::kF32;
}

}  // namespace

void gemm_ukr_avx512_8x48(const UkrArgs& p);
void gemm_ukr_avx512_14x32(const UkrArgs& p);

const GemmKernelSet* gemm_kernels_avx512() {
  // kc = 256: fewer c-tile passes per K; measured 2-8% faster than 128 on Zen 5 (1 thread, bf16 nt,
  // 1024^3 / 256x2112x7168 / 512x7168x2048) although a 256 x 48 fp32 b-panel (48 KiB) leaves L1.
  static const GemmKernelSet set = {
      "avx512",
      /*k_align=*/1,
      /*elem_bytes=*/4,
      /*kc=*/256,       {{8, 48, gemm_ukr_avx512_8x48, 0.0f}, {14, 32, gemm_ukr_avx512_14x32, 0.0f}},
      /*num_tiles=*/2,  accepts,
      prepare_a,        pack_b,
      /*n_step=*/0,
      /*tail_dot=*/nullptr, /*tail_dot_cols=*/0, /*fuses_e4m3_convert=*/false,
  };
  return &set;
}

}  // namespace tessera::cpu
