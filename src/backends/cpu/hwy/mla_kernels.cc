// The Highway MLA kernel set for the avx2 and avx512 levels: fp32 K rows, queries and p, fp32 FMA.
// One attend_tile = scores (mla_scores-inl.h) -> online softmax (mla_softmax-inl.h) -> p.v with the
// rescale folded in (mla_pv-inl.h); FP8 tokens and bf16/fp16 rows become fp32 rows in mla_dequant-inl.h.
// Tiles hold up to 96 tokens: divisible by every scores register tile (6 and 8 tokens), so a partial tile
// is padded with a zero row instead of needing edge kernels.
//
// Scratch layout (64-byte aligned pieces): s (then p) [96][mp] fp32 | row_max, row_sum, alpha [mp] fp32 |
// visible [mp] int | 96 row pointers | one zero row of d_qk fp32. mp = m rounded up to the vector length.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/mla_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <string.h>

#include "backends/cpu/hwy/mla_dequant-inl.h"
#include "backends/cpu/hwy/mla_pv-inl.h"
#include "backends/cpu/hwy/mla_scores-inl.h"
#include "backends/cpu/hwy/mla_softmax-inl.h"
#include "backends/cpu/mla_kernel_set.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

constexpr int kTileTokens = 96;
constexpr int kTokenPad = 24;  // a multiple of every scores tile height

size_t align64(size_t x) {
  return (x + 63) & ~size_t(63);
}
int round_up(int x, int to) {
  return (x + to - 1) / to * to;
}
int vector_lanes() {
  return int(hn::Lanes(hn::ScalableTag<float>()));
}

struct Scratch {
  float* s;
  float* row_max;
  float* row_sum;
  float* alpha;
  int* visible;
  const float** rows;
  float* zero_row;
  size_t bytes;
};

Scratch carve(void* base, int m, int d_qk) {
  const int mp = round_up(m, vector_lanes());
  char* p = static_cast<char*>(base);
  Scratch sc;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* at = p + off;
    off += align64(bytes);
    return at;
  };
  sc.s = reinterpret_cast<float*>(take(size_t(kTileTokens) * mp * 4));
  sc.row_max = reinterpret_cast<float*>(take(size_t(mp) * 4));
  sc.row_sum = reinterpret_cast<float*>(take(size_t(mp) * 4));
  sc.alpha = reinterpret_cast<float*>(take(size_t(mp) * 4));
  sc.visible = reinterpret_cast<int*>(take(size_t(mp) * 4));
  sc.rows = reinterpret_cast<const float**>(take(kTileTokens * sizeof(void*)));
  sc.zero_row = reinterpret_cast<float*>(take(size_t(d_qk) * 4));
  sc.bytes = off;
  return sc;
}

size_t q_packed_bytes(int m, int d_qk) {
  return size_t(round_up(m, vector_lanes())) * size_t(d_qk) * 4;
}

// q [m][d_qk] -> [d_qk][mp]: query rows along the lanes; rows >= m are zero. Written in order (the
// strided reads of m rows stay in L1 across consecutive k).
void pack_q(const void* q, int m, int d_qk, void* packed) {
  const int mp = round_up(m, vector_lanes());
  const float* src = static_cast<const float*>(q);
  float* dst = static_cast<float*>(packed);
  for (int k = 0; k < d_qk; ++k) {
    float* col = dst + int64_t(k) * mp;
    for (int c = 0; c < m; ++c) col[c] = src[int64_t(c) * d_qk + k];
    for (int c = m; c < mp; ++c) col[c] = 0.0f;
  }
}

size_t scratch_bytes(int m, int d_qk, int) {
  return carve(nullptr, m, d_qk).bytes;
}

void attend_tile(const MlaTileArgs& a) {
  const Scratch sc = carve(a.scratch, a.m, a.d_qk);
  const int mp = round_up(a.m, vector_lanes()), nt_pad = round_up(a.nt, kTokenPad);
  memset(sc.zero_row, 0, size_t(a.d_qk) * 4);
  for (int t = 0; t < nt_pad; ++t) sc.rows[t] = t < a.nt ? static_cast<const float*>(a.k_rows[t]) : sc.zero_row;
  for (int r = 0; r < mp; ++r) {  // padding rows see nothing and are never stored back
    sc.row_max[r] = r < a.m ? a.row_max[r] : -__builtin_inff();
    sc.row_sum[r] = r < a.m ? a.row_sum[r] : 0.0f;
    sc.visible[r] = r < a.m ? (a.visible ? a.visible[r] : a.nt) : 0;
  }
  mla_scores(sc.rows, nt_pad, static_cast<const float*>(a.q_packed), mp, a.d_qk, sc.s);
  mla_softmax(sc.s, a.nt, mp, a.scale, SoftmaxRows{sc.row_max, sc.row_sum, sc.alpha, sc.visible});
  for (int r = 0; r < a.m; ++r) {
    a.row_max[r] = sc.row_max[r];
    a.row_sum[r] = sc.row_sum[r];
  }
  const float* const* v_rows = a.v_rows ? reinterpret_cast<const float* const*>(a.v_rows) : sc.rows;
  mla_pv(v_rows, a.nt, sc.s, sc.alpha, a.m, mp, a.d_v, a.o, a.progress, a.progress_ctx);
}

HWY_MAYBE_UNUSED const MlaKernelSet* mla_kernel_table() {
  static const MlaKernelSet set = {
      HWY_TARGET == HWY_AVX3   ? "hwy_avx512"
      : HWY_TARGET == HWY_AVX2 ? "hwy_avx2"
      : HWY_TARGET == HWY_NEON ? "hwy_neon"
                               : "hwy_other",
      MlaElem::kF32,
      kTileTokens,
      1,
      vector_lanes(),
      q_packed_bytes,
      pack_q,
      scratch_bytes,
      attend_tile,
      nullptr,
      mla_dequant_v32,
      mla_dequant_model1,
      mla_widen_row,
      false,
  };
  return &set;
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
const MlaKernelSet* mla_kernels_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, mla_kernel_table);
}
}  // namespace tessera::cpu
#endif
