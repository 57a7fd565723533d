// One grouped benchmark case ready to run: the grouped call, the dense call doing the same work, and
// the checks of both outputs. Contiguous layouts (ids or psum) compare with one dense GEMM over all
// valid rows; masked layouts (small groups, each with its own weights) with one dense GEMM per group.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gemm/grouped_cases.h"
#include "tessera/info.h"

namespace tessera::bench {

class GroupedRun {
 public:
  virtual ~GroupedRun() = default;
  // Call i uses weight copy i % copies (copy 0 for i == 0).
  virtual void ours(int64_t i) = 0;
  virtual void dense(int64_t i) = 0;
  // Fill the outputs with NaN, so an element left unwritten fails the check.
  virtual void poison() = 0;
  // Worst check error / tolerance (<= 1 passes) of the output of the last call.
  virtual double check_ours() const = 0;
  virtual double check_dense() const = 0;

  std::string peer;               // what dense() runs
  int64_t valid_rows = 0;         // rows that are multiplied (FLOPs = 2 * valid_rows * N * K)
  int64_t total_rows = 0;         // rows of a and d (the JSON m)
  int64_t bytes = 0;              // bytes of a, b (all groups, with scales) and d
  int64_t weight_data_bytes = 0;  // bytes of b's data alone (packed FP4 counts its packed bytes)
};

std::unique_ptr<GroupedRun> prepare_grouped_run(const GroupedCase& c, const MachineLimits& limits, uint64_t seed);

}  // namespace tessera::bench
