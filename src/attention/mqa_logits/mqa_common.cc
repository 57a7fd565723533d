#include "attention/mqa_logits/mqa_common.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"

namespace tessera::attention::detail {

bool is_packed_fp4(DType t) {
  return t == DType::kF4E2M1 || t == DType::kI8 || t == DType::kU8;
}

int64_t logical_dim(DType t, int64_t last) {
  return is_packed_fp4(t) ? 2 * last : last;
}

void check_head_dim(const char* fn, int64_t dim, bool fp4) {
  TESSERA_CHECK(dim == 64 || dim == 128 || (dim == 32 && !fp4), fn,
                ": argument 'q' must have head_dim in {32, 64, 128} (32 only for FP8), got ", dim,
                fp4 ? " (packed FP4: twice the last dimension)" : "");
}

void check_q_sf(const char* fn, const TensorView* q_sf, bool fp4, std::initializer_list<int64_t> shape) {
  TESSERA_CHECK(q_sf || !fp4, fn, ": argument 'q' in packed FP4 needs its scale factors (q_sf, int32 UE8M0)");
  if (!q_sf) return;
  check_defined(fn, "q_sf", *q_sf);
  check_dtype(fn, "q_sf", *q_sf, {DType::kI32});
  check_ndim(fn, "q_sf", *q_sf, {int(shape.size())});
  int d = 0;
  for (int64_t s : shape) check_dim(fn, "q_sf", *q_sf, d++, s, "the matching q dimension");
}

QueryPanels build_query_panels(const cpu::MqaLogitsKernels& k, const QuerySource& q, int64_t queries) {
  QueryPanels p;
  p.panel_bytes = k.panel_bytes(q.heads, q.dim);
  p.weight_elems = q.weight_elems();
  p.panels = aligned_array<char>(size_t(queries * p.panel_bytes));
  p.weights = aligned_array<float>(size_t(queries * p.weight_elems));
  parallel_for(queries, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      build_query_panel(k, q, i, p.panels.get() + i * p.panel_bytes, p.weights.get() + i * p.weight_elems);
  });
  return p;
}

void run_items_balanced(const std::vector<int64_t>& cost, const std::function<void(int64_t)>& item) {
  const int64_t n = int64_t(cost.size());
  std::vector<int64_t> prefix(size_t(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + cost[size_t(i)];
  const int64_t total = prefix.back();
  parallel_shares([&](int t, int threads) {
    // Share t takes the items whose cost prefix starts in [total*t/T, total*(t+1)/T).
    auto first_at = [&](int share) {
      if (share >= threads) return n;
      const int64_t target = total / threads * share + total % threads * share / threads;
      return int64_t(std::lower_bound(prefix.begin(), prefix.end() - 1, target) - prefix.begin());
    };
    const int64_t i1 = total == 0 ? (t == 0 ? n : 0) : first_at(t + 1);
    for (int64_t i = total == 0 ? 0 : first_at(t); i < i1; ++i) item(i);
  });
}

void LogitsOut::store(int64_t row, int64_t col, const float* values, int64_t n) const {
  char* dst = data + row * row_bytes;
  if (!bf16) {
    std::memcpy(dst + col * 4, values, size_t(n) * 4);
    return;
  }
  uint16_t* out = reinterpret_cast<uint16_t*>(dst) + col;
  for (int64_t j = 0; j < n; ++j) out[j] = f32_to_bf16(values[j]);
}

float* LogitsOut::direct(int64_t row, int64_t col) const {
  return bf16 ? nullptr : reinterpret_cast<float*>(data + row * row_bytes) + col;
}

void LogitsOut::fill_neg_inf(int64_t row, int64_t c0, int64_t c1) const {
  if (c1 <= c0) return;
  char* dst = data + row * row_bytes;
  if (bf16) {
    std::fill(reinterpret_cast<uint16_t*>(dst) + c0, reinterpret_cast<uint16_t*>(dst) + c1, uint16_t(0xFF80));
  } else {
    std::fill(reinterpret_cast<float*>(dst) + c0, reinterpret_cast<float*>(dst) + c1,
              -std::numeric_limits<float>::infinity());
  }
}

}  // namespace tessera::attention::detail
