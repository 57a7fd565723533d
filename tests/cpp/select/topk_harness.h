// Test harness of tessera::select::topk: row data in several distributions, an independent reference
// (a stable sort of the row by value, -0 below +0, ties by index), and a runner that poisons the
// outputs and checks every contract point with a message naming the case and the first bad entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/select.h"
#include "test_util.h"

namespace tessera::test {

enum class Dist {
  kNormal,       // standard normal values
  kScaled,       // normal x 1e4 + 100 (large magnitudes, few exact ties)
  kFewValues,    // 8 distinct values: heavy ties
  kSignedZeros,  // only +0 and -0
  kInfinities,   // normal with +-inf sprinkled in
  kRawBits,      // random bit patterns with NaNs removed (subnormals, huge values)
};
const char* dist_name(Dist d);

struct TopkCase {
  int64_t rows = 1, cols = 1;
  int k = 1;
  bool bf16 = false;
  bool idx64 = true;
  bool with_values = true;
  bool sorted = false, sorted_index = false;
  bool use_begin = false, use_end = false, use_offset = false;
  int64_t row_pad = 0;  // extra elements between input rows (row stride = cols + pad)
  Dist dist = Dist::kNormal;
  int64_t idx_fill = 2147483647;
  float value_fill = -INFINITY;
  bool abort_on_nan = true;
  std::string str() const;
};

// Inputs of one case, generated from a seed.
struct TopkInputs {
  std::vector<uint8_t> data;  // rows x (cols + pad) elements of 2 or 4 bytes
  std::vector<int32_t> begin, end, offset;
};
TopkInputs make_inputs(const TopkCase& c, Rng& rng);
// Puts a NaN (sign from `negative`) at column `col` of row r.
void put_nan(const TopkCase& c, TopkInputs* in, int64_t r, int64_t col, bool negative);

struct TopkOutputs {
  std::vector<uint8_t> values;   // rows x k, input dtype (empty without values)
  std::vector<uint8_t> indices;  // rows x k, int32 or int64
};
// Runs topk on poisoned outputs (row stride k + out_pad).
TopkOutputs run_topk(const TopkCase& c, const TopkInputs& in, int64_t out_pad = 0);

// Checks every contract point against the reference; rows listed in nan_rows must be marked rows.
::testing::AssertionResult check_topk(const TopkCase& c, const TopkInputs& in, const TopkOutputs& out,
                                      const std::vector<int64_t>& nan_rows = {});

// Index of output entry j of row r.
int64_t output_index(const TopkCase& c, const TopkOutputs& out, int64_t r, int64_t j);

}  // namespace tessera::test
