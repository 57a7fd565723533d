// The FP8 KV-cache quantiser and dequantiser (FlashMLA's API, docs/attention.md), byte for byte.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention/flash_mla/mla_rows.h"
#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/registry.h"
#include "core/abs_max.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

struct LayoutInfo {
  int64_t d, nope, tile, tiles;
};

LayoutInfo info(KvCacheLayout layout) {
  return layout == KvCacheLayout::kV32 ? LayoutInfo{576, 512, 128, 4} : LayoutInfo{512, 448, 64, 7};
}

// max(amax / 448, 1e-4) rounded up to a power of two (exactly: the smallest 2^k >= the fp32 value).
float tile_scale(float amax) {
  const float x = std::fmax(amax / 448.0f, 1e-4f);
  uint32_t u = f32_bits(x);
  if (u & 0x7FFFFFu) u = (u & 0xFF800000u) + 0x800000u;
  return f32_from_bits(u);
}

// Tile scales and e4m3 values of one token row (d bf16 values, element stride `stride`).
void quantize_token(const uint16_t* x, int64_t stride, const LayoutInfo& li, uint8_t* values, float* scales) {
  const auto& ep = *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "quantize_k_cache"));
  float xf[128];  // one tile (64 or 128 values) in f32
  for (int64_t t = 0; t < li.tiles; ++t) {
    const int64_t n = li.tile;
    for (int64_t i = 0; i < n; ++i) xf[i] = bf16_to_f32(x[(t * n + i) * stride]);
    const float s = tile_scale(abs_max16(xf, n));  // as the fmax loop: a NaN never wins
    scales[t] = s;
    // s is a power of two: x / s is x * (1 / s) exactly while 1 / s is normal (every finite amax).
    const uint32_t bits = f32_bits(s);
    if ((bits >> 23) - 1u < 254u) {
      ep.e4m3_sat_mul(values + t * n, xf, n, 1.0f / s);
    } else {
      for (int64_t i = 0; i < n; ++i) values[t * n + i] = f32_to_e4m3_sat(xf[i] / s);
    }
  }
}

// e4m3 code -> f32, all 256 codes (the dequantiser's lookup).
struct E4m3Table {
  float v[256];
  E4m3Table() {
    for (int b = 0; b < 256; ++b) v[b] = e4m3_to_f32(uint8_t(b));
  }
};
const E4m3Table& e4m3_table() {
  static const E4m3Table t;
  return t;
}

void check_bf16_cache(const char* fn, const char* arg, const TensorView& t, const LayoutInfo& li) {
  check_defined(fn, arg, t);
  check_dtype(fn, arg, t, {DType::kBF16});
  check_ndim(fn, arg, t, {4});
  TESSERA_CHECK(t.shape[2] == 1 && t.shape[3] == li.d, fn, ": argument '", arg,
                "' must have shape [num_blocks, "
                "block_size, 1, ",
                li.d, "] for this layout, got ", t.shape_str());
}

void check_pair(const char* fn, const TensorView& bf16, const char* bf16_arg, const TensorView& quant,
                const char* quant_arg, KvCacheLayout layout) {
  TESSERA_CHECK(quant.ndim == 4 && quant.shape[3] == kv_cache_bytes_per_token(layout), fn, ": argument '", quant_arg,
                "' must have ", kv_cache_bytes_per_token(layout), " bytes per token (last dim) for this layout, got ",
                quant.shape_str());
  TESSERA_CHECK(quant.shape[0] == bf16.shape[0] && quant.shape[1] == bf16.shape[1], fn, ": arguments '", quant_arg,
                "' ", quant.shape_str(), " and '", bf16_arg, "' ", bf16.shape_str(),
                " must have the same num_blocks and block_size");
}

}  // namespace

int64_t kv_cache_head_dim(KvCacheLayout layout) {
  return info(layout).d;
}
int64_t kv_cache_bytes_per_token(KvCacheLayout layout) {
  return layout == KvCacheLayout::kV32 ? 656 : 584;
}

void quantize_k_cache(const TensorView& k, KvCacheLayout layout, const TensorView& out) {
  const char* fn = "quantize_k_cache";
  const LayoutInfo li = info(layout);
  check_bf16_cache(fn, "input_k_cache", k, li);
  check_defined(fn, "out", out);
  check_pair(fn, k, "input_k_cache", out, "out", layout);
  const Fp8Cache c = check_fp8_cache(fn, "out", out);
  check_no_overlap(fn, "out", out, "input_k_cache", k);
  uint8_t* base = static_cast<uint8_t*>(out.data);
  parallel_for(k.shape[0] * k.shape[1], [&](int64_t begin, int64_t end) {
    uint8_t values[512];
    float scales[7];
    for (int64_t slot = begin; slot < end; ++slot) {
      const int64_t blk = slot / c.block_size, off = slot % c.block_size;
      const uint16_t* x = k.ptr<uint16_t>() + blk * k.strides[0] + off * k.strides[1];
      quantize_token(x, k.strides[3], li, values, scales);
      uint8_t* tok = base + (c.token(slot) - c.base);
      std::memcpy(tok, values, size_t(li.nope));
      uint8_t* rope = tok + (layout == KvCacheLayout::kV32 ? 528 : 448);
      for (int64_t i = 0; i < 64; ++i) std::memcpy(rope + 2 * i, &x[(li.nope + i) * k.strides[3]], 2);
      if (layout == KvCacheLayout::kV32) {
        std::memcpy(tok + 512, scales, 16);
      } else {
        uint8_t* sc = base + (c.model1_scales(slot) - c.base);
        for (int64_t t = 0; t < 7; ++t) sc[t] = uint8_t(f32_bits(scales[t]) >> 23);
        sc[7] = 0;
      }
    }
  });
}

void dequantize_k_cache(const TensorView& quant, KvCacheLayout layout, const TensorView& out) {
  const char* fn = "dequantize_k_cache";
  const LayoutInfo li = info(layout);
  const Fp8Cache c = check_fp8_cache(fn, "quant_k_cache", quant);
  check_bf16_cache(fn, "out", out, li);
  check_pair(fn, out, "out", quant, "quant_k_cache", layout);
  check_no_overlap(fn, "out", out, "quant_k_cache", quant);
  const E4m3Table& lut = e4m3_table();
  parallel_for(out.shape[0] * out.shape[1], [&](int64_t begin, int64_t end) {
    for (int64_t slot = begin; slot < end; ++slot) {
      const int64_t blk = slot / c.block_size, off = slot % c.block_size;
      uint16_t* y = out.ptr<uint16_t>() + blk * out.strides[0] + off * out.strides[1];
      const uint8_t* tok = c.token(slot);
      float scales[7];
      if (layout == KvCacheLayout::kV32) {
        std::memcpy(scales, tok + 512, 16);
      } else {
        for (int64_t t = 0; t < 7; ++t) scales[t] = ue8m0_to_f32(c.model1_scales(slot)[t]);
      }
      for (int64_t t = 0; t < li.tiles; ++t)
        for (int64_t i = t * li.tile; i < (t + 1) * li.tile; ++i)
          y[i * out.strides[3]] = f32_to_bf16(lut.v[tok[i]] * scales[t]);
      const uint8_t* rope = tok + (layout == KvCacheLayout::kV32 ? 528 : 448);
      for (int64_t i = 0; i < 64; ++i) std::memcpy(&y[(li.nope + i) * out.strides[3]], rope + 2 * i, 2);
    }
  });
}

}  // namespace tessera::flash_mla
