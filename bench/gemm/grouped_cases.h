// The grouped GEMM cases of `tessera bench gemm`: DeepGEMM's MoE test shapes scaled
// to a 2-core CPU - fewer rows per group, (N, K) from DeepGEMM's list - plus FP4-weight
// decode. JSON `op` names say the dtype and the layout.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::bench {

enum class GroupedType { kBf16, kFp8, kFp8Fp4 };  // kFp8: (1,128) x (128,128) fp32 scales; kFp8Fp4: MX, FP4 B
enum class GroupedLayout { kContiguous, kPsum, kMasked };

struct GroupedCase {
  const char* op;
  GroupedType type;
  GroupedLayout layout;
  int64_t groups, rows_per_group;  // expected rows of each group
  bool uneven;                     // rows per group drawn from [0.7, 1.3] x rows_per_group (DeepGEMM's jitter)
  int64_t n, k;
  int64_t max_m;  // masked layout: rows per group in a and d
  bool quick;     // part of the default (quick) suite
};

const std::vector<GroupedCase>& grouped_cases();

// The rows of each group for a case (deterministic: the jitter comes from a fixed seed per case).
std::vector<int64_t> grouped_sizes(const GroupedCase& c, uint64_t seed);

// Contiguous layouts align every group to this many rows (DeepGEMM's default); padding rows are zero.
constexpr int64_t kGroupedAlignment = 128;
// Masked cases with at most this many rows per group are decode: judged against DRAM read bandwidth.
constexpr int64_t kGroupedDecodeMaxM = 4;

}  // namespace tessera::bench
