// Packing for the fp32-FMA kernel sets (avx2/, avx512/), written once over the vector width V (a
// folder's traits, f32_vec.h; L = V::kLanes below): a-panel blocks (rows of fp32 K-values, row stride
// kc) and b-panels (nr columns, a multiple of L; element (k, n) at panel[k*nr + n]). bf16, fp16, e4m3,
// e5m2 and fp32 sources are converted to fp32 exactly on the way in; K- and row-contiguous sources take vector paths
// (templates over the source type, so the per-vector conversion has no branches), other strides a
// scalar loop. Internal linkage throughout (README.md, "Width templates").
#pragma once

#include <stdint.h>

#include "backends/cpu/f32_convert-inl.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu {
namespace {

using scalar_convert::src_elem_bytes;
using scalar_convert::src_to_f32;

inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

inline const char* element(const GemmSrc& s, int64_t r, int64_t k) {
  return static_cast<const char*>(s.data) + (r * s.stride_r + k * s.stride_k) * src_elem_bytes(s.type);
}

// K-contiguous source (b-side rows are output columns): L columns x L K values at a time, transposed
// so that each K value becomes an L-column row of the panel.
template <class V, GemmSrcType T>
void pack_b_kcontig(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, float* dst) {
  constexpr int L = V::kLanes;
  const int64_t r_end = min64(r0 + rows, r_total);
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    float* panel = dst + int64_t(p) * kc * nr;
    for (int grp = 0; grp < nr / L; ++grp) {
      const int64_t rbase = r0 + p * nr + grp * L;
      for (int kk = 0; kk < kc; kk += L) {
        const int64_t k_in = min64(k_total - (k0 + kk), kc - kk);
        const typename V::LoadTail k_tail = V::load_tail(k_in);
        typename V::Vec v[L];
        for (int i = 0; i < L; ++i) {
          const char* src = element(s, rbase + i, k0 + kk);
          if (rbase + i >= r_end) {
            v[i] = V::zero();
          } else {
            v[i] = k_in >= L ? load_src<V, T>(src) : load_src<V, T>(src, k_tail);
          }
        }
        V::transpose(v);
        const int kn = kc - kk < L ? kc - kk : L;
        for (int j = 0; j < kn; ++j) V::store(panel + int64_t(kk + j) * nr + grp * L, v[j]);
      }
    }
  }
}

// Row-contiguous (MN-major) source: the nr columns of one K value are adjacent in memory.
template <class V, GemmSrcType T>
void pack_b_rcontig(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
                    int nr, float* dst) {
  constexpr int L = V::kLanes;
  const int64_t r_end = min64(r0 + rows, r_total);
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    float* panel = dst + int64_t(p) * kc * nr;
    for (int k = 0; k < kc; ++k) {
      const bool k_valid = k0 + k < k_total;
      for (int grp = 0; grp < nr / L; ++grp) {
        const int64_t rbase = r0 + p * nr + grp * L;
        const int64_t r_in = k_valid ? r_end - rbase : 0;
        const char* src = element(s, rbase, k0 + k);
        V::store(panel + int64_t(k) * nr + grp * L,
                 r_in >= L ? load_src<V, T>(src) : load_src<V, T>(src, V::load_tail(r_in)));
      }
    }
  }
}

inline void pack_b_generic(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total,
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

template <class V, GemmSrcType T>
void pack_b_typed(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
                  float* dst) {
  if (s.stride_k == 1) return pack_b_kcontig<V, T>(s, r0, rows, r_total, k0, kc, k_total, nr, dst);
  if (s.stride_r == 1) return pack_b_rcontig<V, T>(s, r0, rows, r_total, k0, kc, k_total, nr, dst);
  pack_b_generic(s, r0, rows, r_total, k0, kc, k_total, nr, dst);
}

// GemmKernelSet::pack_b.
template <class V>
void pack_b_f32(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
                void* dst) {
  float* d = static_cast<float*>(dst);
  switch (s.type) {
    case GemmSrcType::kBF16:
      return pack_b_typed<V, GemmSrcType::kBF16>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
    case GemmSrcType::kE4M3:
      return pack_b_typed<V, GemmSrcType::kE4M3>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
    case GemmSrcType::kF16:
      return pack_b_typed<V, GemmSrcType::kF16>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
    case GemmSrcType::kE5M2:
      return pack_b_typed<V, GemmSrcType::kE5M2>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
    default:
      return pack_b_typed<V, GemmSrcType::kF32>(s, r0, rows, r_total, k0, kc, k_total, nr, d);
  }
}

// K-contiguous source: whole vectors, one partial tail, then zeros up to kc.
template <class V, GemmSrcType T>
void copy_a_kcontig(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  constexpr int L = V::kLanes;
  const int k_in = int(clamp64(k_total - k0, 0, kc));
  const int es = src_elem_bytes(T);
  for (int r = 0; r < rows; ++r) {
    const char* src = element(s, r0 + r, k0);
    float* out = buf + int64_t(r) * kc;
    int kk = 0;
    for (; kk + L <= k_in; kk += L) V::store(out + kk, load_src<V, T>(src + kk * es));
    for (; kk < kc; kk += L) {
      const typename V::Vec v = load_src<V, T>(src + kk * es, V::load_tail(k_in - kk));
      if (kc - kk >= L) {
        V::store(out + kk, v);
      } else {
        V::store_part(out + kk, V::store_tail(kc - kk), v);
      }
    }
  }
}

// MN-major source: element (r, k) at r + k*stride_k. L K values of L rows are loaded as K-rows and
// transposed into a-panel rows.
template <class V, GemmSrcType T>
void copy_a_rcontig(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  constexpr int L = V::kLanes;
  for (int rb = 0; rb < rows; rb += L) {
    const typename V::LoadTail r_tail = V::load_tail(rows - rb);
    const int rn = rows - rb < L ? rows - rb : L;
    for (int kb = 0; kb < kc; kb += L) {
      const int64_t k_in = min64(k_total - (k0 + kb), kc - kb);  // K values to read in this block
      typename V::Vec v[L];
      for (int k = 0; k < L; ++k) {
        const char* src = element(s, r0 + rb, k0 + kb + k);
        if (k >= k_in) {
          v[k] = V::zero();
        } else {
          v[k] = rn == L ? load_src<V, T>(src) : load_src<V, T>(src, r_tail);
        }
      }
      V::transpose(v);
      const bool full = kc - kb >= L;
      const typename V::StoreTail store_tail = V::store_tail(kc - kb);
      for (int r = 0; r < rn; ++r) {
        float* out = buf + int64_t(rb + r) * kc + kb;
        if (full) {
          V::store(out, v[r]);
        } else {
          V::store_part(out, store_tail, v[r]);
        }
      }
    }
  }
}

inline void copy_a_generic(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < kc; ++k) buf[int64_t(r) * kc + k] = k0 + k < k_total ? src_to_f32(s, r0 + r, k0 + k) : 0.0f;
}

template <class V, GemmSrcType T>
void copy_a_typed(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, float* buf) {
  if (s.stride_k == 1) return copy_a_kcontig<V, T>(s, r0, rows, k0, kc, k_total, buf);
  if (s.stride_r == 1) return copy_a_rcontig<V, T>(s, r0, rows, k0, kc, k_total, buf);
  copy_a_generic(s, r0, rows, k0, kc, k_total, buf);
}

// GemmKernelSet::prepare_a. fp32 kernels always copy: narrow types need converting, and an fp32 copy
// keeps the block's rows kc apart (L2-friendly) whatever the source's leading dimension.
template <class V>
const void* prepare_a_f32(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                          int64_t* lda) {
  float* b = static_cast<float*>(buf);
  *lda = kc;
  switch (s.type) {
    case GemmSrcType::kBF16:
      copy_a_typed<V, GemmSrcType::kBF16>(s, r0, rows, k0, kc, k_total, b);
      break;
    case GemmSrcType::kE4M3:
      copy_a_typed<V, GemmSrcType::kE4M3>(s, r0, rows, k0, kc, k_total, b);
      break;
    case GemmSrcType::kF16:
      copy_a_typed<V, GemmSrcType::kF16>(s, r0, rows, k0, kc, k_total, b);
      break;
    case GemmSrcType::kE5M2:
      copy_a_typed<V, GemmSrcType::kE5M2>(s, r0, rows, k0, kc, k_total, b);
      break;
    default:
      copy_a_typed<V, GemmSrcType::kF32>(s, r0, rows, k0, kc, k_total, b);
      break;
  }
  return b;
}

// GemmKernelSet::accepts.
inline bool accepts_f32_sources(GemmSrcType t) {
  return t == GemmSrcType::kBF16 || t == GemmSrcType::kE4M3 || t == GemmSrcType::kF32 || t == GemmSrcType::kF16 ||
         t == GemmSrcType::kE5M2;
}

}  // namespace
}  // namespace tessera::cpu
