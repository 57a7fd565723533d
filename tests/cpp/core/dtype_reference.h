// An independent float64 model of tessera's small float formats, written from the format definitions
// in the header comment of include/tessera/core/dtype.h (not from its code):
//  - decode: value = (-1)^s * 2^(e - bias) * (1 + m/2^M) for normals, 2^(1 - bias) * m/2^M for e == 0,
//    plus each format's special codes;
//  - encode: pick the nearest representable magnitude in float64 (ties to the even code), then apply
//    the format's overflow / inf / NaN rule. The sign is kept (so tiny negatives give negative zero).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessera::test {

enum class Specials {
  kIeee,          // top exponent: inf (m == 0) or NaN (m != 0)       (bf16, f16, e5m2)
  kAllOnesIsNan,  // only S.1111.111 is NaN, no inf                    (e4m3fn)
  kNone,          // every code is finite                              (e2m1)
};

struct FloatFormat {
  const char* name;
  int exp_bits, man_bits, bias;
  Specials specials;
  int bits() const { return 1 + exp_bits + man_bits; }
  uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
};

inline constexpr FloatFormat kBf16Format{"bf16", 8, 7, 127, Specials::kIeee};
inline constexpr FloatFormat kF16Format{"f16", 5, 10, 15, Specials::kIeee};
inline constexpr FloatFormat kE4m3Format{"e4m3fn", 4, 3, 7, Specials::kAllOnesIsNan};
inline constexpr FloatFormat kE5m2Format{"e5m2", 5, 2, 15, Specials::kIeee};
inline constexpr FloatFormat kE2m1Format{"e2m1", 2, 1, 1, Specials::kNone};

inline double decode_ref(const FloatFormat& f, uint32_t code) {
  const bool negative = code & f.sign_bit();
  const uint32_t e = (code >> f.man_bits) & ((1u << f.exp_bits) - 1);
  const uint32_t m = code & ((1u << f.man_bits) - 1);
  const uint32_t e_top = (1u << f.exp_bits) - 1, m_top = (1u << f.man_bits) - 1;
  double mag;
  if (f.specials == Specials::kIeee && e == e_top) {
    mag = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (f.specials == Specials::kAllOnesIsNan && e == e_top && m == m_top) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    mag = std::ldexp(double(m), 1 - f.bias - f.man_bits);
  } else {
    mag = std::ldexp(double((1u << f.man_bits) + m), int(e) - f.bias - f.man_bits);
  }
  return std::copysign(mag, negative ? -1.0 : 1.0);
}

// ue8m0: 2^(e - 127), 0xFF is NaN.
inline double decode_ue8m0_ref(uint32_t code) {
  return code == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(code) - 127);
}

// The finite non-negative magnitudes of a format in code order (code i has magnitude values[i]),
// followed by one virtual entry: the value one step past the largest finite one, i.e. where a
// format with one more code would continue (rounding to it means "overflow").
struct MagnitudeTable {
  std::vector<double> values;
  uint32_t overflow_code = 0;  // index of the virtual entry
};

inline MagnitudeTable magnitude_table(const FloatFormat& f) {
  MagnitudeTable t;
  for (uint32_t code = 0; code < f.sign_bit(); ++code) {
    const double v = decode_ref(f, code);
    if (!std::isfinite(v)) break;
    t.values.push_back(v);
  }
  const size_t n = t.values.size();
  t.overflow_code = uint32_t(n);
  t.values.push_back(t.values[n - 1] + (t.values[n - 1] - t.values[n - 2]));
  return t;
}

// Nearest code to the finite magnitude a >= 0, ties to the even code; overflow_code when a rounds to
// (or beyond) the virtual entry.
inline uint32_t nearest_code(const MagnitudeTable& t, double a) {
  if (a >= t.values.back()) return t.overflow_code;
  const size_t hi = size_t(std::upper_bound(t.values.begin(), t.values.end(), a) - t.values.begin());
  const size_t lo = hi - 1;
  if (t.values[lo] == a) return uint32_t(lo);
  const double mid = 0.5 * (t.values[lo] + t.values[hi]);  // exact: both have few significant bits
  if (a < mid) return uint32_t(lo);
  if (a > mid) return uint32_t(hi);
  return uint32_t(lo % 2 == 0 ? lo : hi);
}

// What a conversion does with the inputs that have no nearest finite code.
struct EncodeRules {
  uint32_t inf_code;       // magnitude code for +-inf
  uint32_t overflow_code;  // magnitude code for finite values that round past the largest finite one
  bool nan_keeps_sign;
  uint32_t nan_code;  // magnitude code for NaN (f16 adds the payload separately)
};

inline uint32_t encode_ref(const FloatFormat& f, const MagnitudeTable& t, const EncodeRules& r, float x) {
  const bool negative = std::signbit(x);
  const uint32_t sign = negative ? f.sign_bit() : 0;
  if (std::isnan(x)) return (r.nan_keeps_sign ? sign : 0) | r.nan_code;
  if (std::isinf(x)) return sign | r.inf_code;
  const uint32_t code = nearest_code(t, std::fabs(double(x)));
  return sign | (code == t.overflow_code ? r.overflow_code : code);
}

}  // namespace tessera::test
