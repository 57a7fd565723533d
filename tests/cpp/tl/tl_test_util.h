// Helpers of the tile-language tests: compile options that share one kernel cache per build folder
// (every ctest process reuses what an earlier one compiled), and small array and rounding utilities.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/tl/builder.h"
#include "tessera/tl/kernel.h"
#include "test_util.h"

namespace tessera::test {

inline tl::CompileOptions tl_options() {
  tl::CompileOptions o;
  o.cache_dir = TESSERA_TL_TEST_CACHE;
  return o;
}

// The location tests give nodes, so error messages have a known file:line.
inline tl::Loc test_loc(int line) {
  return tl::Loc::make("kernel.py", line);
}

template <class T>
TensorView view(std::vector<T>& v, DType dt, std::initializer_list<int64_t> shape) {
  return TensorView(v.data(), dt, shape);
}

inline std::vector<float> random_floats(Rng& rng, size_t n, double scale = 1.0) {
  std::vector<float> v(n);
  for (float& x : v) x = float(rng.normal() * scale);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

// x rounded to t's precision (round to nearest even), as a float.
inline float round_to(tl::DataType t, float x) {
  switch (t) {
    case tl::DataType::kBFloat16:
      return bf16_to_f32(f32_to_bf16(x));
    case tl::DataType::kFloat16:
      return f16_to_f32(f32_to_f16(x));
    case tl::DataType::kFloat8E4M3:
      return e4m3_to_f32(f32_to_e4m3(x));
    case tl::DataType::kFloat8E5M2:
      return e5m2_to_f32(f32_to_e5m2(x));
    default:
      return x;
  }
}

// v stored as t's bytes (round to nearest even; fp32 as is).
inline std::vector<uint8_t> store_as(tl::DataType t, const std::vector<float>& v) {
  const size_t es = size_t(tl::type_bytes(t));
  std::vector<uint8_t> out(v.size() * es);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = 0;
    switch (t) {
      case tl::DataType::kFloat32:
        std::memcpy(&out[i * 4], &v[i], 4);
        break;
      case tl::DataType::kBFloat16:
        h = f32_to_bf16(v[i]);
        std::memcpy(&out[i * 2], &h, 2);
        break;
      case tl::DataType::kFloat16:
        h = f32_to_f16(v[i]);
        std::memcpy(&out[i * 2], &h, 2);
        break;
      case tl::DataType::kFloat8E4M3:
        out[i] = f32_to_e4m3(v[i]);
        break;
      default:
        out[i] = f32_to_e5m2(v[i]);
        break;
    }
  }
  return out;
}

// The library dtype of a tile-language dtype (fp32 for the others).
inline DType dtype_of(tl::DataType t) {
  switch (t) {
    case tl::DataType::kBFloat16:
      return DType::kBF16;
    case tl::DataType::kFloat16:
      return DType::kF16;
    case tl::DataType::kFloat8E4M3:
      return DType::kF8E4M3;
    case tl::DataType::kFloat8E5M2:
      return DType::kF8E5M2;
    default:
      return DType::kF32;
  }
}

}  // namespace tessera::test
