// Internal: max |x[i]| over a row of floats for the quantisers in generic (baseline ISA) code, in vector
// registers through the compiler's vector extension (SSE2 / NEON).
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {

// max(0, |x[0]|, ..., |x[n-1]|) for n a multiple of 16, exactly as a loop of amax = std::max(amax,
// std::fabs(x[i])): max is exact in any order, and a NaN never wins (amax < NaN is false), so 16 lanes and
// a final 4-lane reduction give the same value.
inline float abs_max16(const float* x, int64_t n) {
  using F4 = float __attribute__((vector_size(16)));
  using U4 = uint32_t __attribute__((vector_size(16)));
  auto abs_at = [x](int64_t i) {
    U4 u;
    std::memcpy(&u, x + i, sizeof u);
    return F4(u & 0x7FFFFFFFu);
  };
  auto vmax = [](F4 acc, F4 v) { return acc < v ? v : acc; };
  F4 m0{}, m1{}, m2{}, m3{};
  for (int64_t i = 0; i < n; i += 16) {
    m0 = vmax(m0, abs_at(i));
    m1 = vmax(m1, abs_at(i + 4));
    m2 = vmax(m2, abs_at(i + 8));
    m3 = vmax(m3, abs_at(i + 12));
  }
  const F4 m = vmax(vmax(m0, m1), vmax(m2, m3));
  float amax = 0;
  for (int j = 0; j < 4; ++j) amax = amax < m[j] ? m[j] : amax;
  return amax;
}

}  // namespace tessera
