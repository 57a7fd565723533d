// The MQA-logits set on fp32 FMA units (AVX2 and AVX-512, mqa_logits_kernels.h): keys are converted to
// fp32 once per tile and every query of the tile reuses them. Heads run along the vector lanes and key
// rows along the register block: per d, a group of G query vectors is loaded, each of kRows key values
// is broadcast, and G x kRows FMAs issue (AVX-512: 4 x 6 = 24 accumulators, 64 heads; AVX2: 2 x 6 = 12
// accumulators, 16 heads), leaving room for the query vectors and one broadcast in the register file.
// More heads run as further groups over the same rows (still in L1). The epilogue scales by the
// token's scale, applies relu, multiplies by the head weights and adds into one lane-wise sum per row,
// group after group; the lanes are summed last: a fixed order whatever the row's block.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/mqa_logits.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <string.h>

#include "backends/cpu/hwy/fp8_fp4_to_f32-inl.h"
#include "backends/cpu/mqa_logits_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr int kRows = 6;                                // key rows per register block
constexpr int kGroup = HWY_LANES(float) >= 16 ? 4 : 2;  // head vectors per pass over the rows

// Rows [r0, r0 + kRows) of one call (`nrows` of them real; the others repeat the last real row and
// are dropped), head vectors [v0, v0 + G): adds w * relu(scale * q.k) of those heads into sum[r].
template <int G>
HWY_INLINE void AddGroup(const MqaRowsArgs& a, int hp, int v0, const float* const* krow, int r0, int nrows,
                         int last_vector, hn::Mask<DF> last_mask, VF* sum) {
  const DF df;
  constexpr int N = int(HWY_LANES(float));
  VF acc[kRows][G];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < G; ++v) acc[r][v] = hn::Zero(df);

  const float* qd = static_cast<const float*>(a.q_panel) + v0 * N;
  for (int d = 0; d < a.dim; ++d, qd += hp) {
    VF q[G];
#pragma GCC unroll 4
    for (int v = 0; v < G; ++v) q[v] = hn::LoadU(df, qd + v * N);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const VF k = hn::Set(df, krow[r][d]);
#pragma GCC unroll 4
      for (int v = 0; v < G; ++v) acc[r][v] = hn::MulAdd(q[v], k, acc[r][v]);
    }
  }

  const VF zero = hn::Zero(df);
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    if (r >= nrows) break;
    const VF scale = hn::Set(df, a.k_scale[r0 + r]);
#pragma GCC unroll 4
    for (int v = 0; v < G; ++v) {
      VF x = hn::Mul(acc[r][v], scale);
      x = hn::IfThenElse(hn::Lt(x, zero), zero, x);  // relu; NaN passes
      VF w = hn::LoadU(df, a.weights + (v0 + v) * N);
      if (v0 + v == last_vector) {  // lanes past `heads`: neither 0 * inf nor the ignored weights count
        x = hn::IfThenElseZero(last_mask, x);
        w = hn::IfThenElseZero(last_mask, w);
      }
      sum[r] = hn::MulAdd(x, w, sum[r]);
    }
  }
}

template <int G>
HWY_INLINE void AddGroupUpTo(int g, const MqaRowsArgs& a, int hp, int v0, const float* const* krow, int r0, int nrows,
                             int last_vector, hn::Mask<DF> last_mask, VF* sum) {
  if constexpr (G > 1) {
    if (g < G) return AddGroupUpTo<G - 1>(g, a, hp, v0, krow, r0, nrows, last_vector, last_mask, sum);
  }
  AddGroup<G>(a, hp, v0, krow, r0, nrows, last_vector, last_mask, sum);
}

void Rows(const MqaRowsArgs& a) {
  const DF df;
  constexpr int N = int(HWY_LANES(float));
  const int hp = 16 * a.head_vectors;
  const int vectors = (a.heads + N - 1) / N;
  const hn::Mask<DF> last_mask = hn::FirstN(df, size_t(a.heads - (vectors - 1) * N));
  const float* k = static_cast<const float*>(a.k);
  for (int r0 = 0; r0 < a.rows; r0 += kRows) {
    const int nrows = a.rows - r0 < kRows ? a.rows - r0 : kRows;
    const float* krow[kRows];
    for (int r = 0; r < kRows; ++r) krow[r] = k + (r0 + (r < nrows ? r : nrows - 1)) * a.k_stride;
    VF sum[kRows];
    for (int r = 0; r < kRows; ++r) sum[r] = hn::Zero(df);
    for (int v0 = 0; v0 < vectors; v0 += kGroup) {
      const int g = vectors - v0 < kGroup ? vectors - v0 : kGroup;
      AddGroupUpTo<kGroup>(g, a, hp, v0, krow, r0, nrows, vectors - 1, last_mask, sum);
    }
    for (int r = 0; r < nrows; ++r) a.out[r0 + r] = hn::GetLane(hn::SumOfLanes(df, sum[r]));
  }
}

int64_t PanelBytes(int heads, int dim) {
  return int64_t(dim) * 16 * ((heads + 15) / 16) * 4;
}

void PackQuery(const uint16_t* q_bf16, int heads, int dim, void* panel) {
  const int hp = 16 * ((heads + 15) / 16);
  float* p = static_cast<float*>(panel);
  memset(p, 0, size_t(PanelBytes(heads, dim)));
  for (int h = 0; h < heads; ++h)
    for (int d = 0; d < dim; ++d) {
      const uint32_t bits = uint32_t(q_bf16[int64_t(h) * dim + d]) << 16;
      memcpy(p + int64_t(d) * hp + h, &bits, 4);
    }
}

// fp32 values of n e4m3 bytes; `store` writes one vector of them at element i.
template <class Store>
HWY_INLINE void ConvertE4m3(const uint8_t* src, int64_t n, const Store& store) {
  const DF df;
  constexpr int64_t N = int64_t(HWY_LANES(float));
  int64_t i = 0;
  for (; i + N <= n; i += N) store(i, LoadE4m3AsF32(df, src + i), N);
  if (i < n) {  // the tail through a zero-padded copy
    uint8_t tail[N] = {};
    memcpy(tail, src + i, size_t(n - i));
    store(i, LoadE4m3AsF32(df, tail), n - i);
  }
}

void E4m3Keys(const uint8_t* src, int64_t n, void* dst) {
  const DF df;
  float* out = static_cast<float*>(dst);
  ConvertE4m3(src, n, [&](int64_t i, VF v, int64_t count) {
    if (count == int64_t(hn::Lanes(df))) {
      hn::StoreU(v, df, out + i);
    } else {
      alignas(64) float tmp[HWY_LANES(float)];
      hn::Store(v, df, tmp);
      memcpy(out + i, tmp, size_t(count) * 4);
    }
  });
}

void E4m3ToBf16(const uint8_t* src, int64_t n, uint16_t* dst) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> du16;
  ConvertE4m3(src, n, [&](int64_t i, VF v, int64_t count) {
    // e4m3 values are exact in bf16: the upper half of the fp32 bits (0..0xFFFF, so the saturating
    // demotion keeps it).
    const auto bf16 = hn::DemoteTo(du16, hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, v))));
    if (count == int64_t(hn::Lanes(df))) {
      hn::StoreU(bf16, du16, dst + i);
    } else {
      alignas(64) uint16_t tmp[HWY_LANES(float)];
      hn::StoreU(bf16, du16, tmp);
      memcpy(dst + i, tmp, size_t(count) * 2);
    }
  });
}

// 2^(e - 127) for a UE8M0 exponent (0xFF is NaN, 0 the fp32 subnormal 2^-127).
float Ue8m0ToF32(uint32_t e) {
  const uint32_t bits = e == 0xFF ? 0x7FC00000u : e == 0 ? 0x00400000u : e << 23;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

void MxKeys(const MqaMxKeyArgs& a) {
  const DF df;
  constexpr int N = int(HWY_LANES(float));
  for (int r = 0; r < a.rows; ++r) {
    uint32_t word;
    memcpy(&word, a.scales + r * a.scales_stride, 4);
    const uint8_t* row = a.values + r * a.values_stride;
    float* out = static_cast<float*>(a.dst) + int64_t(r) * a.dim;
    for (int d0 = 0; d0 < a.dim; d0 += 32) {  // one UE8M0 exponent per 32 values; dim % 32 == 0
      const VF scale = hn::Set(df, Ue8m0ToF32((word >> (8 * (d0 / 32))) & 0xFF));
      if (a.fp4) {
        for (int d = d0; d < d0 + 32; d += 2 * N) {
          VF first, second;
          LoadE2m1PairAsF32(df, row + d / 2, &first, &second);
          hn::StoreU(hn::Mul(first, scale), df, out + d);
          hn::StoreU(hn::Mul(second, scale), df, out + d + N);
        }
      } else {
        for (int d = d0; d < d0 + 32; d += N) hn::StoreU(hn::Mul(LoadE4m3AsF32(df, row + d), scale), df, out + d);
      }
    }
  }
}

const MqaLogitsKernels kSet = {"mqa_hwy", 4, PanelBytes, PackQuery, E4m3ToBf16, E4m3Keys, MxKeys, Rows};

}  // namespace

const MqaLogitsKernels* mqa_set() {
  return &kSet;
}

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
const MqaLogitsKernels* mqa_kernels_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, mqa_set);
}
}  // namespace tessera::cpu
#endif
