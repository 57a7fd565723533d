// Portable ep kernels: the reference the vector versions (hwy/ep_kernels.cc) must match bit for bit.
#include "backends/cpu/ep_kernels.h"

#include <cmath>
#include <cstring>

namespace tessera::cpu {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
float bf16_value(uint16_t h) {
  return float_of(uint32_t(h) << 16);
}
uint16_t to_bf16(float x) {
  uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;  // canonical NaN (see ep_kernels.h)
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// e4m3fn, nearest even, saturating at 448; NaN -> 0x7F with the sign.
uint8_t to_e4m3_sat(float x) {
  const uint32_t u = bits_of(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint8_t(sign | 0x7Fu);
  uint32_t code;
  if (a < 0x3C800000u) {  // below 2^-6: multiples of 2^-9, rounded by the add-and-subtract trick
    const volatile float big = 16384.0f;
    const float t = (float_of(a) + big) - big;
    code = uint32_t(t * 512.0f);
  } else {
    const uint32_t v = a - (120u << 23);
    code = (v + 0x7FFFFu + ((v >> 20) & 1u)) >> 20;
  }
  return uint8_t(sign | (code > 0x7Eu ? 0x7Eu : code));
}

// The smallest power of two >= x > 0 as an exponent byte, clamped to [1, 254].
uint32_t ceil_exponent(float x) {
  const uint32_t u = bits_of(x) & 0x7FFFFFFFu;
  uint32_t e = u >> 23;
  if ((u & 0x7FFFFFu) != 0 && e != 0) ++e;
  return e < 1 ? 1 : e > 254 ? 254 : e;
}

void copy(void* dst, const void* src, size_t bytes, int) {
  std::memcpy(dst, src, bytes);
}
void store_fence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void reduce_bf16(uint16_t* out, const uint16_t* const* rows, int num_rows, const uint16_t* bias0, const uint16_t* bias1,
                 int64_t n, int) {
  for (int64_t h = 0; h < n; ++h) {
    float acc = 0.0f;
    if (bias0) acc += bf16_value(bias0[h]);
    if (bias1) acc += bf16_value(bias1[h]);
    for (int i = 0; i < num_rows; ++i) acc += bf16_value(rows[i][h]);
    out[h] = to_bf16(acc);
  }
}

void weighted_reduce_bf16(uint16_t* out, const uint16_t* const* rows, const float* weights, int num_rows, int64_t n) {
  for (int64_t h = 0; h < n; ++h) {
    float acc = 0.0f;
    for (int i = 0; i < num_rows; ++i) {
      const float product = weights[i] * bf16_value(rows[i][h]);
      acc += product;
    }
    out[h] = to_bf16(acc);
  }
}

void cast_e4m3(uint8_t* out, float* scales, uint8_t* exponents, const uint16_t* x, int64_t n, int round_scale) {
  for (int64_t b0 = 0, blk = 0; b0 < n; b0 += 128, ++blk) {
    const int64_t b1 = b0 + 128 < n ? b0 + 128 : n;
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) {
      const float v = std::fabs(bf16_value(x[i]));
      if (v > amax) amax = v;  // false for NaN: ignored
    }
    if (!(amax > 1e-4f)) amax = 1e-4f;
    float scale, inverse;
    uint32_t e = 0;
    if (round_scale) {
      e = ceil_exponent(amax / 448.0f);
      scale = float_of(e << 23);
      inverse = float_of((254u - e) << 23);
    } else {
      scale = amax / 448.0f;
      inverse = 448.0f / amax;
    }
    if (scales) scales[blk] = scale;
    if (exponents && round_scale) exponents[blk] = uint8_t(e);
    for (int64_t i = b0; i < b1; ++i) out[i] = to_e4m3_sat(bf16_value(x[i]) * inverse);
  }
}

void e4m3_sat_mul(uint8_t* out, const float* x, int64_t n, float mul) {
  for (int64_t i = 0; i < n; ++i) out[i] = to_e4m3_sat(x[i] * mul);
}

void round_bf16(uint16_t* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = bits_of(x[i]);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
      out[i] = uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);  // the sign kept (see ep_kernels.h)
      continue;
    }
    u += 0x7FFFu + ((u >> 16) & 1u);
    out[i] = uint16_t(u >> 16);
  }
}

constexpr EpKernels kKernels{"scalar",  copy,         store_fence, reduce_bf16, weighted_reduce_bf16,
                             cast_e4m3, e4m3_sat_mul, round_bf16};

}  // namespace

const EpKernels* ep_kernels_scalar() {
  return &kKernels;
}

}  // namespace tessera::cpu
