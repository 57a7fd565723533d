#include "gemm/grouped_cases.h"

#include <algorithm>

namespace tessera::bench {

const std::vector<GroupedCase>& grouped_cases() {
  using T = GroupedType;
  using L = GroupedLayout;
  // clang-format off
  static const std::vector<GroupedCase> kCases = {
      // DeepGEMM contiguous (4, 8192) / (8, 4096) x (N, K): groups of 128-1024 rows here
      {"m_grouped_bf16_contiguous",      T::kBf16,    L::kContiguous, 4,  256, false, 4096, 2048,  0, true},
      {"m_grouped_fp8_contiguous",       T::kFp8,     L::kContiguous, 4,  256, false, 4096, 2048,  0, true},
      {"m_grouped_fp8_contiguous",       T::kFp8,     L::kContiguous, 8,  128, false, 4096, 4096,  0, true},
      {"m_grouped_fp8_contiguous_psum",  T::kFp8,     L::kPsum,       4,  256, true,  4096, 2048,  0, true},
      {"m_grouped_bf16_contiguous_psum", T::kBf16,    L::kPsum,       8,  128, true,  4096, 2048,  0, true},
      {"m_grouped_fp8_contiguous",       T::kFp8,     L::kContiguous, 4, 1024, false, 7168, 3072,  0, false},
      {"m_grouped_fp8_contiguous_psum",  T::kFp8,     L::kPsum,       8,  512, true,  6144, 2048,  0, false},
      // DeepGEMM masked (32, 20) / (6, 20) and (6, 1024): many small groups
      {"m_grouped_bf16_masked",          T::kBf16,    L::kMasked,     8,   20, true,  4096, 2048, 64, true},
      {"m_grouped_fp8_masked",           T::kFp8,     L::kMasked,     8,   20, true,  4096, 2048, 64, true},
      {"m_grouped_fp8_masked",           T::kFp8,     L::kMasked,     6,  192, true,  4096, 2048, 256, false},
      // FP4-weight decode: FP8 activations (1,128) x FP4 weights (1,32), packed UE8M0 scales
      {"m_grouped_fp8_fp4_masked",       T::kFp8Fp4,  L::kMasked,     8,    1, false, 4096, 2048,  4, true},
      {"m_grouped_fp8_fp4_masked",       T::kFp8Fp4,  L::kMasked,     8,    4, false, 4096, 2048,  4, true},
      {"m_grouped_fp8_fp4_masked",       T::kFp8Fp4,  L::kMasked,     8,   64, false, 4096, 2048, 64, false},
  };
  // clang-format on
  return kCases;
}

std::vector<int64_t> grouped_sizes(const GroupedCase& c, uint64_t seed) {
  std::vector<int64_t> sizes(size_t(c.groups), c.rows_per_group);
  if (!c.uneven) return sizes;
  uint64_t state = seed;
  for (int64_t& s : sizes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = double(state >> 11) * 0x1p-53;  // [0, 1)
    s = int64_t(double(c.rows_per_group) * (0.7 + 0.6 * u));
    if (c.layout == GroupedLayout::kMasked) s = std::min(s, c.max_m);
  }
  return sizes;
}

}  // namespace tessera::bench
