#include "quick_scale.h"

#include <algorithm>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/tensor.h"
#include "tessera/gemm.h"
#include "timing.h"

namespace tessera::bench {

double probe_gemm_gflops() {
  constexpr int64_t m = 256, n = 256, k = 1024;
  std::vector<uint16_t> a(size_t(m * k)), b(size_t(n * k)), d(size_t(m * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = f32_to_bf16(float(i % 7) * 0.25f - 0.75f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(float(i % 5) * 0.5f - 1.0f);
  const TensorView av(a.data(), DType::kBF16, {m, k}), bv(b.data(), DType::kBF16, {n, k});
  const TensorView dv(d.data(), DType::kBF16, {m, n});
  // Short budgets: this sizes the run, it is not a result. The best of three medians, because a
  // peer's spinning worker threads or a frequency ramp can halve one of them (seen: 58-163 GFLOP/s
  // from one median on a quiet two-core host), and the sizes should follow the machine, not the moment.
  settle_threads();
  double best_ms = 0;
  for (int i = 0; i < 3; ++i) {
    const double ms = time_median([&](int64_t) { gemm::bf16_gemm_nt(av, bv, dv); }, 0.02, 3).median_ms;
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  return 2.0 * double(m * n * k) / (best_ms * 1e-3) * 1e-9;
}

double quick_scale_for(double gflops, bool full) {
  if (full || !(gflops > 0)) return 1.0;
  return std::min(1.0, gflops / kQuickReferenceGflops);
}

int64_t scaled_size(int64_t size, double scale, int64_t step, int64_t min_size) {
  const int64_t scaled = int64_t(double(size) * scale) / step * step;
  return std::min(size, std::max(min_size, scaled));
}

}  // namespace tessera::bench
