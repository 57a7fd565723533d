// Every f32 -> small-format conversion of tessera/core/dtype.h paired with its float64 reference, so
// the encode tests can run one input set through all of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype_reference.h"
#include "tessera/core/dtype.h"
#include "test_util.h"

namespace tessera::test {

struct Conversion {
  const char* name;
  uint32_t (*impl)(float);
  uint32_t (*ref)(float);
};

namespace conversion_refs {

inline const MagnitudeTable& table(const FloatFormat& f) {
  static const MagnitudeTable bf16 = magnitude_table(kBf16Format), f16 = magnitude_table(kF16Format),
                              e4m3 = magnitude_table(kE4m3Format), e5m2 = magnitude_table(kE5m2Format),
                              e2m1 = magnitude_table(kE2m1Format);
  if (&f == &kBf16Format) return bf16;
  if (&f == &kF16Format) return f16;
  if (&f == &kE4m3Format) return e4m3;
  if (&f == &kE5m2Format) return e5m2;
  return e2m1;
}

// Rules from the dtype.h header comment: bf16/f16/e5m2 overflow -> inf; e4m3fn overflow or inf -> NaN;
// e2m1 saturates at 6; the *_sat variants saturate at the largest finite value.
inline uint32_t bf16(float x) {
  return encode_ref(kBf16Format, table(kBf16Format), {0x7F80, 0x7F80, true, 0x7FC0}, x);
}
inline uint32_t f16(float x) {
  if (std::isnan(x)) {  // payload truncated to 10 bits, kept non-zero (numpy's rule)
    const uint32_t u = f32_bits(x), payload = (u & 0x7FFFFFu) >> 13;
    return ((u >> 16) & 0x8000u) | 0x7C00u | (payload ? payload : 1u);
  }
  return encode_ref(kF16Format, table(kF16Format), {0x7C00, 0x7C00, true, 0}, x);
}
inline uint32_t e4m3(float x) {
  return encode_ref(kE4m3Format, table(kE4m3Format), {0x7F, 0x7F, true, 0x7F}, x);
}
inline uint32_t e4m3_sat(float x) {
  return encode_ref(kE4m3Format, table(kE4m3Format), {0x7E, 0x7E, true, 0x7F}, x);
}
inline uint32_t e5m2(float x) {
  return encode_ref(kE5m2Format, table(kE5m2Format), {0x7C, 0x7C, true, 0x7E}, x);
}
inline uint32_t e5m2_sat(float x) {
  return encode_ref(kE5m2Format, table(kE5m2Format), {0x7B, 0x7B, true, 0x7E}, x);
}
inline uint32_t e2m1(float x) {
  return encode_ref(kE2m1Format, table(kE2m1Format), {7, 7, false, 0}, x);
}

// DeepGEMM's quantiser: nearest e2m1 magnitude with ties toward the smaller one, 6 beyond, no
// negative zero, NaN -> 0.
inline uint32_t e2m1_deepgemm(float x) {
  if (std::isnan(x)) return 0;
  const double a = std::fabs(double(x));
  uint32_t best = 7;
  if (a <= 6) {
    best = 0;
    for (uint32_t c = 1; c < 8; ++c)
      if (std::fabs(a - decode_ref(kE2m1Format, c)) < std::fabs(a - decode_ref(kE2m1Format, best))) best = c;
  }
  return (x < 0 && best != 0) ? (best | 8u) : best;
}

// Nearest power of two, ties (1.5 * 2^e) up; NaN, inf, zero, negatives and results above 2^127 -> 0xFF.
// f32 subnormal inputs follow the same rule (as ml_dtypes >= 0.7 does; 0.6 sent everything above 2^-127
// to 2^-126): 1.5 * 2^-127 and above give 2^-126 (code 1), the rest 2^-127 (code 0).
inline uint32_t ue8m0(float x) {
  if (std::isnan(x) || std::isinf(x) || x <= 0 || std::signbit(x)) return 0xFF;
  const double a = double(x);
  if (a < std::ldexp(1.0, -126)) return a >= 1.5 * std::ldexp(1.0, -127) ? 1 : 0;
  int e;
  const double f = std::frexp(a, &e);  // a = (2f) * 2^(e-1), 2f in [1, 2)
  const int exponent = (2 * f >= 1.5) ? e : e - 1;
  return exponent + 127 >= 0xFF ? 0xFF : uint32_t(exponent + 127);
}

// DeepGEMM's ceil_to_ue8m0: smallest power of two >= |x|, exponent code clamped to [1, 254]
// (zero -> 1; inf and NaN -> 254).
inline uint32_t ue8m0_ceil(float x) {
  if (std::isnan(x) || std::isinf(x)) return 254;
  const double a = std::fabs(double(x));
  if (a == 0) return 1;
  int e;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const int exponent = f == 0.5 ? e - 1 : e;
  return uint32_t(std::clamp(exponent + 127, 1, 254));
}

}  // namespace conversion_refs

inline const std::vector<Conversion>& all_conversions() {
  namespace r = conversion_refs;
  static const std::vector<Conversion> list = {
      {"f32_to_bf16", [](float x) -> uint32_t { return f32_to_bf16(x); }, r::bf16},
      {"f32_to_f16", [](float x) -> uint32_t { return f32_to_f16(x); }, r::f16},
      {"f32_to_e4m3", [](float x) -> uint32_t { return f32_to_e4m3(x); }, r::e4m3},
      {"f32_to_e4m3_sat", [](float x) -> uint32_t { return f32_to_e4m3_sat(x); }, r::e4m3_sat},
      {"f32_to_e5m2", [](float x) -> uint32_t { return f32_to_e5m2(x); }, r::e5m2},
      {"f32_to_e5m2_sat", [](float x) -> uint32_t { return f32_to_e5m2_sat(x); }, r::e5m2_sat},
      {"f32_to_e2m1", [](float x) -> uint32_t { return f32_to_e2m1(x); }, r::e2m1},
      {"f32_to_e2m1_deepgemm", [](float x) -> uint32_t { return f32_to_e2m1_deepgemm(x); }, r::e2m1_deepgemm},
      {"f32_to_ue8m0", [](float x) -> uint32_t { return f32_to_ue8m0(x); }, r::ue8m0},
      {"f32_to_ue8m0_ceil", [](float x) -> uint32_t { return f32_to_ue8m0_ceil(x); }, r::ue8m0_ceil},
  };
  return list;
}

// Collects conversion mismatches and prints the first few with input bits, expected and actual codes.
class MismatchLog {
 public:
  explicit MismatchLog(const char* conversion) : conversion_(conversion) {}
  void check(float x, uint32_t expected, uint32_t got) {
    if (expected == got) return;
    if (count_++ >= 8) return;
    std::ostringstream os;
    os << "\n  " << conversion_ << "(bits " << hex(f32_bits(x)) << " = " << std::setprecision(9) << x << "): expected "
       << hex(expected) << ", got " << hex(got);
    text_ += os.str();
  }
  int64_t count() const { return count_; }
  std::string report() const { return std::to_string(count_) + " mismatches" + text_; }

 private:
  const char* conversion_;
  int64_t count_ = 0;
  std::string text_;
};

}  // namespace tessera::test
