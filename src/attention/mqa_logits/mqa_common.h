// Pieces shared by the prefill and paged MQA-logits drivers: argument checks for the Q/KV formats,
// query panels built up front, the cost-balanced split of work items over threads, and logits rows.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "attention/mqa_logits/mqa_operands.h"
#include "tessera/core/memory.h"
#include "tessera/core/tensor.h"

namespace tessera::attention::detail {

bool is_packed_fp4(DType t);
// Head dimension of a q / kv view whose last dimension has `last` entries (FP4: 2 per byte).
int64_t logical_dim(DType t, int64_t last);
// Checks the head dimension rule: {32, 64, 128}, 32 only for FP8.
void check_head_dim(const char* fn, int64_t dim, bool fp4);
// Checks an optional MX scale tensor (int32, the given shape).
void check_q_sf(const char* fn, const TensorView* q_sf, bool fp4, std::initializer_list<int64_t> shape);

// All query panels (in kernel set `k`'s layout) and weights of a call, built in parallel.
struct QueryPanels {
  AlignedPtr<char> panels;
  AlignedPtr<float> weights;
  int64_t panel_bytes = 0, weight_elems = 0;
  const void* panel(int64_t i) const { return panels.get() + i * panel_bytes; }
  const float* weight(int64_t i) const { return weights.get() + i * weight_elems; }
};
QueryPanels build_query_panels(const cpu::MqaLogitsKernels& k, const QuerySource& q, int64_t queries);

// Runs item(i) for every work item, split over the pool in contiguous shares of about equal total
// cost (cost[i] >= 0). Which thread runs an item never changes what the item computes.
void run_items_balanced(const std::vector<int64_t>& cost, const std::function<void(int64_t)>& item);

// Logits storage: float32 or bf16 rows.
struct LogitsOut {
  char* data;
  int64_t row_bytes;
  bool bf16;
  // Stores n fp32 values at (row, col...), rounding to bf16 when needed.
  void store(int64_t row, int64_t col, const float* values, int64_t n) const;
  // Pointer to (row, col) when values can be written in place (fp32), else nullptr.
  float* direct(int64_t row, int64_t col) const;
  // Writes -inf at (row, [c0, c1)).
  void fill_neg_inf(int64_t row, int64_t c0, int64_t c1) const;
};

}  // namespace tessera::attention::detail
