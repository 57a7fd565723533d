#include "select/select_peer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"

namespace tessera::bench {
namespace {

float value_at(const SelectBatch& b, int64_t r, int64_t c) {
  if (b.bf16) {
    uint16_t h;
    std::memcpy(&h, static_cast<const char*>(b.data) + 2 * (r * b.cols + c), 2);
    return bf16_to_f32(h);
  }
  float f;
  std::memcpy(&f, static_cast<const char*>(b.data) + 4 * (r * b.cols + c), 4);
  return f;
}

}  // namespace

void std_topk(const SelectBatch& batch, int k, int32_t* indices) {
  parallel_for(batch.rows, [&](int64_t r0, int64_t r1) {
    std::vector<std::pair<float, int32_t>> pairs(size_t(batch.cols));
    const auto greater = [](const auto& a, const auto& b) { return a.first > b.first; };
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < batch.cols; ++c) pairs[size_t(c)] = {value_at(batch, r, c), int32_t(c)};
      std::nth_element(pairs.begin(), pairs.begin() + (k - 1), pairs.end(), greater);
      std::sort(pairs.begin(), pairs.begin() + k, greater);
      for (int j = 0; j < k; ++j) indices[r * k + j] = pairs[size_t(j)].second;
    }
  });
}

std::string check_topk_result(const SelectBatch& batch, int k, const int32_t* indices, const void* values) {
  const int es = batch.bf16 ? 2 : 4;
  std::vector<char> seen(static_cast<size_t>(batch.cols));
  for (int64_t r = 0; r < batch.rows; ++r) {
    std::fill(seen.begin(), seen.end(), 0);
    float min_selected = 0;
    for (int j = 0; j < k; ++j) {
      const int32_t c = indices[r * k + j];
      if (c < 0 || c >= batch.cols || seen[size_t(c)]++) return "row " + std::to_string(r) + ": bad or repeated index";
      if (values && std::memcmp(static_cast<const char*>(values) + (r * k + j) * es,
                                static_cast<const char*>(batch.data) + (r * batch.cols + c) * es, size_t(es)))
        return "row " + std::to_string(r) + ": value is not a copy of the input";
      const float v = value_at(batch, r, c);
      min_selected = j == 0 ? v : std::min(min_selected, v);
    }
    for (int64_t c = 0; c < batch.cols; ++c)
      if (!seen[size_t(c)] && value_at(batch, r, c) > min_selected)
        return "row " + std::to_string(r) + ": an unselected element is larger than a selected one";
  }
  return "";
}

}  // namespace tessera::bench
