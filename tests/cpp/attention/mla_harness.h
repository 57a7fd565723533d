// Test harness for tessera/flash_mla.h: random problems with NaN-poisoned unused cache slots, float64
// references, and comparisons with the tolerances of FlashMLA's own tests (docs/attention.md)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/flash_mla.h"
#include "test_util.h"

namespace tessera::test {

// Element passes if |err| < abs or |err| / (|ref| + 1e-6) < rel; then calc_diff(got, ref) < cos over the
// finite entries. +-inf and NaN positions must match exactly.
struct Tolerance {
  double abs, rel, cos;
};
constexpr Tolerance kDenseOutTol{8e-4, 2.01 / 128, 5e-6};
constexpr Tolerance kDenseLseTol{1e-6, 8.01 / 65536, 1e-10};
constexpr Tolerance kSparseOutTol{1e-3, 2.01 / 128, 5e-6};
constexpr Tolerance kPrefillOutTol{8e-4, 3.01 / 128, 7e-6};
constexpr Tolerance kPrefillStatTol{1e-6, 2.01 / 65536, 1e-10};

// `slack` (optional, per element) also accepts |err| <= slack[i]: the documented error bound of p rounded
// to bf16 for p.v (see RefRow::slack).
::testing::AssertionResult check_close(const std::string& what, const std::vector<double>& got,
                                       const std::vector<double>& ref, const Tolerance& tol,
                                       const std::vector<double>* slack = nullptr);

// float64 attention of one query row over explicit key rows (V = first d_v values); no rows -> out 0,
// lse +inf, max -inf. The sink factor 1/(1+exp(sink-lse)) scales out when given.
// slack[c] bounds the error of the kernels' documented numerics: p rounded to bf16 (unit roundoff 2^-8)
// before p.v gives |err| <= 2^-8 * sum_t w_t |v_tc|, plus the bf16 rounding of out. FlashMLA's tolerances
// (absolute, relative) hold for most elements; an output that cancels to a small value can pass them
// only by the bound (one element of a 300-token dense decode row: err 8.1e-4 against 8e-4 and 1.6%;
// the x86 bf16 sets reach 94% of those tolerances on the same case). The checks accept either.
struct RefRow {
  std::vector<double> out, slack;
  double lse, max_logit;
};
RefRow reference_row(const std::vector<double>& q, const std::vector<const double*>& keys, int d_v, double scale,
                     std::optional<double> sink = std::nullopt);

// A typed buffer and a view of it.
struct Buffer {
  std::vector<uint8_t> bytes;
  TensorView view;
};
// shape with row-major strides, or with the last dim padded to `padded_last` elements (non-contiguous rows).
Buffer make_buffer(DType dtype, std::vector<int64_t> shape, int64_t padded_last = 0);
std::vector<double> to_doubles(const Buffer& b);  // logical order
uint16_t to_bits(double x, DType t);              // bf16 / fp16 encodings
double from_bits(uint16_t bits, DType t);
void fill_normal(Buffer* b, Rng& rng, double stddev = 1.0);  // bf16/fp16/f32 buffers, logical elements
int64_t element_offset(const TensorView& v, const std::vector<int64_t>& idx);

// ---- dense decode problem ----
struct DenseProblem {
  int b = 1, s_q = 1, h_q = 16, h_k = 1, d = 576, d_v = 512, block_size = 64;
  std::vector<int> lens;
  bool causal = false;
  DType dtype = DType::kBF16;
  bool strided_q = false;
  // filled by build()
  Buffer q, k_cache, block_table, seqlens, out, lse;
  std::vector<std::vector<double>> keys;  // per (request, kv head, token) row, as doubles
  void build(Rng& rng);
  flash_mla::KvcacheInputs inputs() const;
  // Checks out/lse against float64; the scale is d^-0.5.
  ::testing::AssertionResult check() const;
};

// ---- FP8 sparse decode problem ----
struct SparseProblem {
  int b = 1, s_q = 1, h_q = 64, topk = 128, num_blocks = 8, block_size = 64;
  flash_mla::KvCacheLayout layout = flash_mla::KvCacheLayout::kV32;
  bool with_topk_length = false, with_sink = false, with_extra = false, strided_q = false, strided_indices = false;
  int extra_topk = 256, extra_blocks = 3, extra_block_size = 32;  // blocks grow to 2 slots per entry
  double invalid_fraction = 0.25;     // share of index entries that are -1, negative or out of range
  std::vector<int> all_invalid_rows;  // (b * s_q + s) lists made entirely of invalid indices
  bool short_lists = false;           // edge cases with lists of a few tokens
  // filled by build()
  Buffer q, cache, indices, topk_length, extra_cache, extra_indices, extra_topk_length, sink, out, lse;
  std::vector<double> main_rows, extra_rows;  // dequantised K rows (slot-major), NaN for unreferenced slots
  void build(Rng& rng);
  flash_mla::KvcacheInputs inputs() const;
  ::testing::AssertionResult check() const;
  int d() const { return layout == flash_mla::KvCacheLayout::kV32 ? 576 : 512; }
};

// ---- sparse prefill problem ----
struct PrefillProblem {
  int s_q = 3, s_kv = 300, h_q = 64, h_kv = 1, d = 576, d_v = 512, topk = 256;
  bool with_topk_length = false, with_sink = false, strided_q = false;
  double invalid_fraction = 0.2;
  std::vector<int> all_invalid_queries;
  bool short_lists = false;  // edge cases with lists of a few tokens
  Buffer q, kv, indices, topk_length, sink, out, max_logits, lse;
  double sm_scale = 0;
  void build(Rng& rng);
  flash_mla::SparsePrefillInputs inputs() const;
  ::testing::AssertionResult check() const;
};

}  // namespace tessera::test
