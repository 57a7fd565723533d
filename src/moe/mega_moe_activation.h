// The activation between the two expert GEMMs, one token row at a time, with DeepGEMM's rounding:
// the fp32 GEMM-1 outputs arrive rounded to bf16; the optional clamp works on those bf16 values
// (gate <= c, -c <= up <= c with c rounded to bf16); silu(gate) * up * top-k weight is computed in
// fp32 (exact expf and division). fp8xfp4 then quantises each 32 values to e4m3 with a UE8M0 scale
// 2^ceil(log2(amax / 448)); bf16xbf16 rounds to bf16.
#pragma once

#include <cstdint>
#include <optional>

namespace tessera::mega_moe::detail {

// gate_up: bf16 [2 * n] (gate [0, n), up [n, 2n)); out: fp32 [n].
void swiglu_row(const uint16_t* gate_up, int64_t n, float weight, std::optional<float> clamp, float* out);

// values fp32 [n] (n % 32 == 0) -> e4m3 [n] and one UE8M0 exponent byte per 32 values [n / 32].
void quantize_row_e4m3_ue8m0(const float* values, int64_t n, uint8_t* e4m3, uint8_t* scale_bytes);

// values fp32 [n] -> bf16 [n] (round to nearest even).
void round_row_bf16(const float* values, int64_t n, uint16_t* out);

}  // namespace tessera::mega_moe::detail
