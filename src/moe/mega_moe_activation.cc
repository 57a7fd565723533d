#include "moe/mega_moe_activation.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/registry.h"
#include "tessera/core/dtype.h"

namespace tessera::mega_moe::detail {

void swiglu_row(const uint16_t* gate_up, int64_t n, float weight, std::optional<float> clamp, float* out) {
  const float c = clamp ? bf16_to_f32(f32_to_bf16(*clamp)) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float gate = bf16_to_f32(gate_up[i]);
    float up = bf16_to_f32(gate_up[n + i]);
    if (clamp) {
      gate = std::min(gate, c);
      up = std::min(std::max(up, -c), c);
    }
    const float silu = gate / (1.0f + std::exp(-gate));
    out[i] = (silu * up) * weight;
  }
}

void quantize_row_e4m3_ue8m0(const float* values, int64_t n, uint8_t* e4m3, uint8_t* scale_bytes) {
  // The level's vector rounding (the ep slot's e4m3_sat_mul): the bits of f32_to_e4m3_sat(v * inv).
  const auto& kernels = *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "mega_moe"));
  for (int64_t g = 0; g < n / 32; ++g) {
    const float* v = values + g * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
    // Exponent of the smallest power of two >= amax / 448 (0 for amax == 0, like DeepGEMM's bit trick).
    const uint32_t bits = f32_bits(amax * (1.0f / 448.0f));
    const uint32_t exponent = std::min<uint32_t>((bits >> 23) + ((bits & 0x7FFFFFu) != 0), 254u);
    const float inv = f32_from_bits((254u - exponent) << 23);  // 2^-(exponent - 127)
    scale_bytes[g] = uint8_t(exponent);
    kernels.e4m3_sat_mul(e4m3 + g * 32, v, 32, inv);
  }
}

void round_row_bf16(const float* values, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(values[i]);
}

}  // namespace tessera::mega_moe::detail
