// Row-level helpers of the MLA tasks (see mla_rows.h).
#include "attention/flash_mla/mla_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/registry.h"
#include "tessera/core/cpu.h"

namespace tessera::flash_mla {

namespace {

struct MlaProblem {
  bool bf16_inputs;
  int64_t d_qk, d_v;
};

const char* refuse_set(const cpu::KernelImpl&, const void* table, const void* problem) {
  const auto& set = *static_cast<const cpu::MlaKernelSet*>(table);
  const auto& p = *static_cast<const MlaProblem*>(problem);
  if (set.elem == cpu::MlaElem::kBF16 && !p.bf16_inputs) return "refused: fp16 inputs (bf16 kernels)";
  if (p.d_qk % set.qk_align != 0) return "refused: d_qk not a multiple of the set's qk_align";
  if (p.d_v % set.v_align != 0) return "refused: d_v not a multiple of the set's v_align";
  return nullptr;
}

}  // namespace

const cpu::MlaKernelSet* choose_kernels(bool bf16_inputs, int64_t d_qk, int64_t d_v) {
  const MlaProblem problem{bf16_inputs, d_qk, d_v};
  return static_cast<const cpu::MlaKernelSet*>(
      cpu::choose_kernel(cpu::Slot::kMla, "flash_mla", refuse_set, &problem).table);
}

void load_row(const void* src, DType type, int64_t stride, int64_t n, const cpu::MlaKernelSet& ks, void* dst) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (ks.elem == cpu::MlaElem::kBF16) {  // only bf16 sources reach the bf16 kernels
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (stride == 1) {
      std::memcpy(d, s, size_t(n) * 2);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = s[i * stride];
    }
    return;
  }
  if (stride == 1 && ks.widen_row) {
    ks.widen_row(s, int(n), type == DType::kF16, dst);
    return;
  }
  float* d = static_cast<float*>(dst);
  if (type == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i * stride]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f16_to_f32(s[i * stride]);
  }
}

void store_row(const float* o, int64_t n, float factor, DType type, void* dst) {
  // bf16 rows through the level's GEMM finalize (the same round-to-nearest-even conversion, vectorised;
  // the scalar loop below took ~2 cycles per element, a sixth of a decode unit's time at 128 heads).
  const auto simd = type == DType::kBF16
                        ? reinterpret_cast<cpu::FinalizeFn>(cpu::cached_kernel(cpu::Slot::kGemmFinalize, "flash_mla"))
                        : nullptr;
  if (simd) {
    constexpr int64_t kChunk = 512;
    alignas(64) float scaled[kChunk];
    for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
      const int64_t w = std::min(kChunk, n - c0);
      const float* src = o + c0;
      if (factor != 1.0f) {
        for (int64_t i = 0; i < w; ++i) scaled[i] = src[i] * factor;
        src = scaled;
      }
      cpu::FinalizeArgs a;
      a.tile = src;
      a.ldt = w;
      a.transposed = false;
      a.d = static_cast<uint16_t*>(dst) + c0;
      a.d_bf16 = true;
      a.ldd = w;
      a.c = nullptr;
      a.c_bf16 = false;
      a.ldc = 0;
      a.rows = 1;
      a.cols = w;
      simd(a);
    }
    return;
  }
  if (type == DType::kF32) {
    float* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = o[i] * factor;
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (type == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(o[i] * factor);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(o[i] * factor);
  }
}

float sink_factor(const float* sink, float lse) {
  if (!sink) return 1.0f;
  if (std::isinf(lse) && lse > 0) return 0.0f;
  return float(1.0 / (1.0 + std::exp(double(*sink) - double(lse))));
}

int power_of_two_shift(int64_t n) {
  if (n <= 0 || (n & (n - 1))) return -1;
  return __builtin_ctzll(uint64_t(n));
}

const uint8_t* Fp8Cache::token(int64_t slot) const {
  int64_t block, off;
  split_slot(slot, block_size, block_shift, &block, &off);
  return base + block * block_stride + off * token_stride;
}

const uint8_t* Fp8Cache::model1_scales(int64_t slot) const {
  int64_t block, off;
  split_slot(slot, block_size, block_shift, &block, &off);
  return base + block * block_stride + block_size * 576 + off * 8;
}

Fp8Cache check_fp8_cache(const char* fn, const char* arg, const TensorView& c) {
  check_defined(fn, arg, c);
  check_dtype(fn, arg, c, {DType::kF8E4M3, DType::kI8, DType::kU8});
  check_ndim(fn, arg, c, {4});
  TESSERA_CHECK(c.shape[2] == 1, fn, ": argument '", arg,
                "' must have num_heads_k == 1 (shape[2]) for the FP8 sparse "
                "cache, got ",
                c.shape_str());
  const int64_t bpt = c.shape[3];
  TESSERA_CHECK(bpt == 656 || bpt == 584, fn, ": argument '", arg,
                "' must have 656 (V32) or 584 (MODEL1) bytes per "
                "token in its last dimension, got ",
                c.shape_str());
  TESSERA_CHECK(c.shape[1] >= 1, fn, ": argument '", arg, "' must have block_size >= 1, got ", c.shape_str());
  TESSERA_CHECK(c.strides[3] == 1, fn, ": argument '", arg,
                "' must have contiguous token bytes (stride(3) == 1), "
                "got strides ",
                c.strides_str());
  Fp8Cache g;
  g.base = static_cast<const uint8_t*>(c.data);
  g.layout = bpt == 656 ? KvCacheLayout::kV32 : KvCacheLayout::kModel1;
  g.num_blocks = c.shape[0];
  g.block_size = c.shape[1];
  g.block_stride = c.strides[0];
  g.block_shift = power_of_two_shift(g.block_size);
  if (g.layout == KvCacheLayout::kV32) {
    TESSERA_CHECK(c.strides[1] >= 656 || c.shape[1] == 1, fn, ": argument '", arg,
                  "' must not overlap tokens "
                  "(stride(1) >= 656 bytes), got strides ",
                  c.strides_str());
    g.token_stride = c.shape[1] == 1 ? 656 : c.strides[1];
    TESSERA_CHECK(c.shape[0] == 1 || g.block_stride >= g.block_size * g.token_stride, fn, ": argument '", arg,
                  "' must not overlap blocks (stride(0) >= block_size * stride(1)), got strides ", c.strides_str());
  } else {
    TESSERA_CHECK(c.strides[1] == 584 || c.shape[1] == 1, fn, ": argument '", arg,
                  "' (MODEL1 layout) must have "
                  "stride(1) == 584 bytes (FlashMLA's per-block FP8 layout, docs/attention.md), got strides ",
                  c.strides_str());
    g.token_stride = 576;
    TESSERA_CHECK(c.shape[0] == 1 || g.block_stride >= g.block_size * 584, fn, ": argument '", arg,
                  "' must not overlap blocks (stride(0) >= block_size * 584), got strides ", c.strides_str());
  }
  return g;
}

}  // namespace tessera::flash_mla
