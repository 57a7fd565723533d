#include "gemm/gemm_cases.h"

namespace tessera::bench {

const std::vector<std::string>& gemm_ops() {
  static const std::vector<std::string> ops = {"bf16_gemm_nt", "fp8_gemm_nt"};
  return ops;
}

const std::vector<GemmShapeNK>& gemm_nk_shapes() {
  static const std::vector<GemmShapeNK> shapes = {{2112, 7168},  {576, 7168},  {24576, 1536}, {32768, 512},
                                                  {7168, 16384}, {4096, 7168}, {7168, 2048}};
  return shapes;
}

const std::vector<int64_t>& gemm_ms() {
  static const std::vector<int64_t> ms = {1, 4, 64, 128, 1024};
  return ms;
}

bool gemm_case_selected(int64_t m, int64_t n, int64_t k, bool full, double quick_scale) {
  if (full) return true;
  if (m == 64) return false;
  const double seconds = 2.0 * double(m) * double(n) * double(k) / (kQuickAssumedGflops * quick_scale * 1e9);
  return seconds <= kQuickMaxCallSeconds;
}

}  // namespace tessera::bench
