// Helpers of the tile-language tests: compile options that share one kernel cache per build folder
// (every ctest process reuses what an earlier one compiled), and small array utilities.
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

}  // namespace tessera::test
