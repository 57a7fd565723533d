// p.v of the Highway MLA set: o[r][:] = o[r][:] * alpha[r] + sum_t p[t][r] * v_t, all fp32.
// Register tiles: MR = 6 query rows x NV vectors of output columns (24 accumulators on AVX-512, 12 on
// AVX2), V rows as vector loads in place and p as broadcasts. The rescale by alpha happens when the tile
// is loaded, so o is read and written once per tile of tokens. Column blocks are the outer loop so their
// slice of the V rows stays in L1 while the row blocks stream it.
#if defined(TESSERA_HWY_MLA_PV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_MLA_PV_INL_H_
#undef TESSERA_HWY_MLA_PV_INL_H_
#else
#define TESSERA_HWY_MLA_PV_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {  // included by mla_kernels.cc only: nothing leaves its translation unit

// Rows [0, MR) x columns [c0, c0 + NV lanes): p points at p[0][first row], step mp per token. Not
// inlined, as scores_block (its pointers stay in registers).
template <int MR, int NV>
HWY_NOINLINE void pv_block(const float* const* v_rows, int nt, int c0, const float* p, int mp, const float* alpha,
                           float* o, int ldo) {
  const hn::ScalableTag<float> d;
  const int n = int(hn::Lanes(d));
  hn::Vec<decltype(d)> acc[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const auto a = hn::Set(d, alpha[r]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = hn::Mul(hn::LoadU(d, o + r * ldo + c0 + j * n), a);
  }
  for (int t = 0; t < nt; ++t) {
    const float* v = v_rows[t] + c0;
    const float* pt = p + int64_t(t) * mp;
    hn::Vec<decltype(d)> b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = hn::LoadU(d, v + j * n);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const auto x = hn::Set(d, pt[r]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] = hn::MulAdd(x, b[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) hn::StoreU(acc[r][j], d, o + r * ldo + c0 + j * n);
}

// One column block for every row: 6-row tiles, then the row tail. progress(ctx, part, parts) runs before
// each 6-row tile: part = first + tile index.
struct PvProgress {
  void (*fn)(void*, int, int);
  void* ctx;
  int parts;
};

template <int NV>
void pv_columns(const float* const* v_rows, int nt, int c0, const float* p, int m, int mp, const float* alpha, float* o,
                int d_v, const PvProgress& pr, int first) {
  int r = 0;
  for (; r + 6 <= m; r += 6) {
    if (pr.fn) pr.fn(pr.ctx, first + r / 6, pr.parts);
    pv_block<6, NV>(v_rows, nt, c0, p + r, mp, alpha + r, o + int64_t(r) * d_v, d_v);
  }
  const float* pr_ = p + r;
  const float* ar = alpha + r;
  float* orow = o + int64_t(r) * d_v;
  switch (m - r) {
    case 5:
      pv_block<5, NV>(v_rows, nt, c0, pr_, mp, ar, orow, d_v);
      break;
    case 4:
      pv_block<4, NV>(v_rows, nt, c0, pr_, mp, ar, orow, d_v);
      break;
    case 3:
      pv_block<3, NV>(v_rows, nt, c0, pr_, mp, ar, orow, d_v);
      break;
    case 2:
      pv_block<2, NV>(v_rows, nt, c0, pr_, mp, ar, orow, d_v);
      break;
    case 1:
      pv_block<1, NV>(v_rows, nt, c0, pr_, mp, ar, orow, d_v);
      break;
    default:
      break;
  }
}

// d_v must be a multiple of the vector length.
void mla_pv(const float* const* v_rows, int nt, const float* p, const float* alpha, int m, int mp, int d_v, float* o,
            void (*progress)(void*, int, int), void* progress_ctx) {
  const hn::ScalableTag<float> d;
  const int n = int(hn::Lanes(d));
  constexpr int kNV = hn::MaxLanes(hn::ScalableTag<float>()) >= 16 ? 4 : 2;  // 32 or 16 registers
  const int width = kNV * n, blocks = (d_v + width - 1) / width, tiles = m / 6;
  const PvProgress pr{tiles > 0 ? progress : nullptr, progress_ctx, blocks * tiles};
  for (int blk = 0, c = 0; blk < blocks; ++blk, c += width) {
    const int vectors = (d_v - c) / n;
    if (vectors >= kNV) {
      pv_columns<kNV>(v_rows, nt, c, p, m, mp, alpha, o, d_v, pr, blk * tiles);
    } else if (vectors == 3) {
      pv_columns<3>(v_rows, nt, c, p, m, mp, alpha, o, d_v, pr, blk * tiles);
    } else if (vectors == 2) {
      pv_columns<2>(v_rows, nt, c, p, m, mp, alpha, o, d_v, pr, blk * tiles);
    } else {
      pv_columns<1>(v_rows, nt, c, p, m, mp, alpha, o, d_v, pr, blk * tiles);
    }
  }
  if (tiles == 0 && progress) progress(progress_ctx, 0, 1);
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
