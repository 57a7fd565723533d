// D = round(C + tile), the one rounding of every packed GEMM, written once with Highway for the vector
// levels that have no hand-written version (AVX2; the avx512 folder has its own with 16 x 16 register
// transposes). Same bits as the portable loops in src/gemm/finalize.cc: one fp32 add, then round to
// nearest even for bf16 D with NaN -> 0x7FC0 | sign.
//
// A tile the micro-kernel produced transposed is turned around in L1 blocks of lanes x 8 values, so the
// tile and D are both read and written along their rows.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/gemm_finalize.cc"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU32 = hn::RebindToUnsigned<DF>;
using DI32 = hn::RebindToSigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;  // half-width: one bf16 per fp32 lane
using VF = hn::Vec<DF>;

constexpr int kBlockCols = 8;  // D columns per transposed block

float bf16_bits_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Round-to-nearest-even fp32 -> bf16 codes, NaN -> 0x7FC0 | sign, one code per lane (half width).
hn::Vec<DU16> to_bf16(VF v) {
  const DU32 du32;
  const DI32 di32;
  const auto u = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du32, 0x7FFFu)), lsb));
  const auto magnitude = hn::BitCast(di32, hn::And(u, hn::Set(du32, 0x7FFFFFFFu)));
  const auto nan = hn::RebindMask(du32, hn::Gt(magnitude, hn::Set(di32, 0x7F800000)));
  const auto qnan = hn::Or(hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 0x8000u)), hn::Set(du32, 0x7FC0u));
  return hn::DemoteTo(DU16(), hn::BitCast(di32, hn::IfThenElse(nan, qnan, rounded)));
}

VF load_c(const FinalizeArgs& a, int64_t i, int64_t j) {
  const DF df;
  if (!a.c) return hn::Zero(df);
  if (!a.c_bf16) return hn::LoadU(df, static_cast<const float*>(a.c) + i * a.ldc + j);
  const auto h = hn::LoadU(DU16(), static_cast<const uint16_t*>(a.c) + i * a.ldc + j);
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(DU32(), h)));
}

float load_c_one(const FinalizeArgs& a, int64_t i, int64_t j) {
  if (!a.c) return 0.0f;
  if (!a.c_bf16) return static_cast<const float*>(a.c)[i * a.ldc + j];
  return bf16_bits_to_f32(static_cast<const uint16_t*>(a.c)[i * a.ldc + j]);
}

void store_d(const FinalizeArgs& a, int64_t i, int64_t j, VF v) {
  if (a.d_bf16) {
    hn::StoreU(to_bf16(v), DU16(), static_cast<uint16_t*>(a.d) + i * a.ldd + j);
    return;
  }
  float* d = static_cast<float*>(a.d) + i * a.ldd + j;
  if (a.stream && (reinterpret_cast<uintptr_t>(d) % (hn::Lanes(DF()) * 4)) == 0) {
    hn::Stream(v, DF(), d);
  } else {
    hn::StoreU(v, DF(), d);
  }
}

void store_d_one(const FinalizeArgs& a, int64_t i, int64_t j, float v) {
  if (a.d_bf16) {
    static_cast<uint16_t*>(a.d)[i * a.ldd + j] = f32_to_bf16_bits(v);
  } else {
    static_cast<float*>(a.d)[i * a.ldd + j] = v;
  }
}

void finalize_natural(const FinalizeArgs& a) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  for (int64_t i = 0; i < a.rows; ++i) {
    const float* row = a.tile + i * a.ldt;
    int64_t j = 0;
    for (; j + n <= a.cols; j += n) store_d(a, i, j, hn::Add(load_c(a, i, j), hn::LoadU(df, row + j)));
    for (; j < a.cols; ++j) store_d_one(a, i, j, load_c_one(a, i, j) + row[j]);
  }
}

// D rows [i0, i0 + rows) x columns [j0, j0 + cols) from the transposed tile (element (i, j) at
// tile[j * ldt + i]); rows <= lanes, cols <= kBlockCols.
void transposed_block(const FinalizeArgs& a, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  const DF df;
  const int64_t n = int64_t(hn::Lanes(df));
  HWY_ALIGN float by_column[kBlockCols * (HWY_MAX_BYTES / 4)];
  HWY_ALIGN float by_row[(HWY_MAX_BYTES / 4) * kBlockCols];
  for (int64_t c = 0; c < cols; ++c) {
    const float* src = a.tile + (j0 + c) * a.ldt + i0;
    if (rows == n) {
      hn::Store(hn::LoadU(df, src), df, by_column + c * n);
    } else {
      for (int64_t r = 0; r < rows; ++r) by_column[c * n + r] = src[r];
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) by_row[r * kBlockCols + c] = by_column[c * n + r];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = 0;
    if (n == kBlockCols && cols == kBlockCols) {  // one vector per D row
      store_d(a, i0 + r, j0, hn::Add(load_c(a, i0 + r, j0), hn::Load(df, by_row + r * kBlockCols)));
      c = cols;
    }
    for (; c < cols; ++c) store_d_one(a, i0 + r, j0 + c, load_c_one(a, i0 + r, j0 + c) + by_row[r * kBlockCols + c]);
  }
}

void finalize_transposed(const FinalizeArgs& a) {
  const int64_t n = int64_t(hn::Lanes(DF()));
  for (int64_t i0 = 0; i0 < a.rows; i0 += n) {
    const int64_t rows = a.rows - i0 < n ? a.rows - i0 : n;
    for (int64_t j0 = 0; j0 < a.cols; j0 += kBlockCols)
      transposed_block(a, i0, rows, j0, a.cols - j0 < kBlockCols ? a.cols - j0 : kBlockCols);
  }
}

void finalize(const FinalizeArgs& a) {
  if (a.transposed) {
    finalize_transposed(a);
  } else {
    finalize_natural(a);
  }
  if (a.stream) hwy::FlushStream();  // non-temporal stores are weakly ordered
}

}  // namespace

FinalizeFn finalize_fn() {
  return finalize;
}

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
FinalizeFn gemm_finalize_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, finalize_fn);
}
}  // namespace tessera::cpu
#endif
