// The register-only peak-rate loop behind peak_kernels.h's ComputePeakFn, written once over the vector
// width V (a folder's traits, f32_vec.h) and the step one accumulator takes per iteration (FmaStep
// below, or a folder's own, e.g. avx512bf16's vdpbf16ps). Internal linkage throughout (README.md,
// "Width templates").
#pragma once

#include <stdint.h>

namespace tessera::cpu {
namespace {

// vfmadd231ps: acc = acc * x + y with x < 1 converges to y / (1 - x), so values stay normal however
// long the loop runs.
template <class V>
struct FmaStep {
  static constexpr int kFlopsPerLane = 2;
  struct Operands {
    typename V::Vec x, y;
  };
  static Operands operands(float seed) { return {V::set1(0.999f + seed * 1e-9f), V::set1(1e-3f)}; }
  static typename V::Vec step(typename V::Vec acc, const Operands& o) { return V::fma(acc, o.x, o.y); }
};

// kAcc independent accumulators, each advanced by Step once per iteration, all operands in registers;
// returns the floating-point operations executed.
template <class V, class Step, int kAcc>
double peak_loop(int64_t iters, float* sink) {
  // Operands come from *sink (a run-time value) so the compiler cannot fold the loop away.
  const float seed = *static_cast<volatile float*>(sink);
  const typename Step::Operands operands = Step::operands(seed);
  typename V::Vec acc[kAcc];
#pragma GCC unroll 32
  for (int j = 0; j < kAcc; ++j) acc[j] = V::set1(seed + float(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int j = 0; j < kAcc; ++j) acc[j] = Step::step(acc[j], operands);
  }
  typename V::Vec total = acc[0];
  for (int j = 1; j < kAcc; ++j) total = V::add(total, acc[j]);
  *sink = V::reduce_add(total);
  return double(iters) * kAcc * V::kLanes * Step::kFlopsPerLane;
}

}  // namespace
}  // namespace tessera::cpu
