// Plain interface between the ep component (src/ep) and its loops: hwy/ep_kernels.cc (Highway, AVX2 and
// AVX-512) and the portable scalar/ep_kernels.cc. No inline functions or templates here: ISA
// translation units include this file (see README.md).
//
// Numerics are fixed so every ISA gives the same bits:
//  - reduce_bf16: acc = +0.0f; acc += bias0; acc += bias1 (each if not null); acc += rows[i] for i in
//    order, all in fp32; out = bf16(acc) rounded to nearest even. Every NaN result becomes 0x7FC0
//    (which NaN an addition of two NaNs keeps is up to the compiler, so the sign is dropped).
//  - weighted_reduce_bf16: acc = +0.0f; acc = acc + fp32(weights[i] * rows[i]) for i in order (a
//    multiply then an add, never a fused multiply-add); out = bf16(acc) as above.
//  - cast_e4m3: per block of 128 values (the last may be shorter): amax = max |x| (NaN ignored),
//    clamped to >= 1e-4;
//    round_scale: e = the exponent byte of the smallest power of two >= amax / 448 (clamped to
//    [1, 254]), scale = 2^(e-127), inverse 2^(127-e); else scale = amax / 448, inverse = 448 / amax;
//    q = e4m3 (round to nearest even, saturating at +-448, NaN stays NaN) of fp32(x * inverse). Writes
//    the fp32 scale (scales != null) and, with round_scale, the exponent byte (exponents != null).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {
enum class Isa : int;  // tessera/core/cpu.h
}

namespace tessera::cpu {

struct EpKernels {
  const char* name;
  // dst = src; streaming != 0 uses non-temporal stores for the 64-byte aligned part (data that is not
  // read again soon, e.g. another process's receive region); call store_fence() before publishing.
  void (*copy)(void* dst, const void* src, size_t bytes, int streaming);
  void (*store_fence)();
  // streaming != 0: non-temporal stores for out (call store_fence() before anyone reads it).
  void (*reduce_bf16)(uint16_t* out, const uint16_t* const* rows, int num_rows, const uint16_t* bias0,
                      const uint16_t* bias1, int64_t n, int streaming);
  void (*weighted_reduce_bf16)(uint16_t* out, const uint16_t* const* rows, const float* weights, int num_rows,
                               int64_t n);
  void (*cast_e4m3)(uint8_t* out, float* scales, uint8_t* exponents, const uint16_t* x, int64_t n, int round_scale);
  // out[i] = f32_to_e4m3_sat(x[i] * mul) (tessera/core/dtype.h: nearest even, saturating at +-448, NaN ->
  // 0x7F with the sign). Also the activation quantisers of the model and Mega MoE, which scale by powers
  // of two.
  void (*e4m3_sat_mul)(uint8_t* out, const float* x, int64_t n, float mul);
  // out[i] = f32_to_bf16(x[i]) (tessera/core/dtype.h: nearest even, NaN -> 0x7FC0 with its sign, unlike
  // the reductions above). The model's activation rows.
  void (*round_bf16)(uint16_t* out, const float* x, int64_t n);
};

const EpKernels* ep_kernels_scalar();
// Highway's build for `level` (hwy/ep_kernels.cc), nullptr below AVX2; only for a level this CPU has.
const EpKernels* ep_kernels_hwy(Isa level);

}  // namespace tessera::cpu
