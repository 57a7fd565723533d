// The GEMM benchmark suite: DeepGEMM's dense (N, K) test shapes (DeepGEMM's API, docs/gemm.md) with
// M in {1, 4, 64, 128, 1024}, for bf16_gemm_nt and fp8_gemm_nt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

struct GemmShapeNK {
  int64_t n, k;
};

const std::vector<std::string>& gemm_ops();
const std::vector<GemmShapeNK>& gemm_nk_shapes();
const std::vector<int64_t>& gemm_ms();

// The quick suite skips M = 64 (no target line reads it) and cases whose single call would take longer
// than kQuickMaxCallSeconds at kQuickAssumedGflops x quick_scale (Options): at scale 1, M = 1024 with
// the three largest (N, K) shapes; on slower levels more of the large-M cases. `full` keeps every case.
constexpr double kQuickAssumedGflops = 800.0;
constexpr double kQuickMaxCallSeconds = 0.05;
bool gemm_case_selected(int64_t m, int64_t n, int64_t k, bool full, double quick_scale);

// Decode rows are judged against DRAM read bandwidth (weight bytes), the others against bf16 peak.
constexpr int64_t kGemmDecodeMaxM = 4;

}  // namespace tessera::bench
