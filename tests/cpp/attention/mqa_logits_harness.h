// Test harness of the MQA logits (tessera/mqa_logits.h): quantised operands in the three
// formats (FP8 + fp32 token scales, MX FP8, MX FP4), a float64 reference on the dequantised values,
// and comparisons that check the exact -inf / unwritten positions and the calc_diff bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/mqa_logits.h"
#include "test_util.h"

namespace tessera::test {

enum class QkFormat { kFp8, kMxFp8, kMxFp4 };
const char* format_name(QkFormat f);

// Rows of D quantised values with their scales, and the dequantised values in float64.
struct QuantRows {
  int64_t rows = 0, dim = 0;
  QkFormat format = QkFormat::kFp8;
  std::vector<uint8_t> data;      // rows x row_bytes (+ padding per row: row stride = stride bytes)
  int64_t stride = 0;             // bytes between rows
  std::vector<float> sf_f32;      // kFp8: one scale per row
  std::vector<int32_t> sf_words;  // MX: one UE8M0 word per row
  std::vector<double> deq;        // rows x dim
  int64_t row_bytes() const { return format == QkFormat::kMxFp4 ? dim / 2 : dim; }
};
// FP8 without scales (DeepGEMM's q: the scale is folded into the weights) when `with_scale` is false.
QuantRows quantize_rows(const std::vector<float>& x, int64_t rows, int64_t dim, QkFormat f, bool with_scale,
                        int64_t pad_bytes = 0);

// DeepGEMM's calc_diff over the entries where `mask` is set.
double masked_calc_diff(const std::vector<double>& ref, const std::vector<double>& got, const std::vector<char>& mask);

// A prefill problem and its float64 reference logits [S, S_kv] (-inf outside the ranges).
struct PrefillCase {
  int64_t s = 1, s_kv = 1, heads = 1, dim = 128;
  QkFormat format = QkFormat::kFp8;
  bool bf16_logits = false, bf16_weights = false;
  bool clean = true;
  int64_t max_seqlen_k = 0;                                  // > 0: compressed mode
  bool transposed_q = false;                                 // q stored [H, S, D] and viewed as [S, H, D]
  int64_t kv_pad = 0;                                        // extra bytes per kv row
  int64_t logits_pad = 0;                                    // extra entries per logits row
  enum Ranges { kCausal, kRandom, kWild } ranges = kCausal;  // kWild: ks < 0, ke > S_kv, ke < ks
  std::string str() const;
};

struct PrefillProblem {
  PrefillCase c;
  QuantRows q, kv;  // q: S*H rows of D
  std::vector<float> weights;
  std::vector<int32_t> ks, ke;
  std::vector<double> ref;  // [S, S_kv]
};
PrefillProblem make_prefill(const PrefillCase& c, Rng& rng);

// Runs fp8_fp4_mqa_logits on poisoned logits; returns them as float64 [S, cols] (cols = S_kv or
// max_seqlen_k) plus the raw bits (for determinism checks).
struct LogitsResult {
  std::vector<double> values;
  std::vector<uint8_t> bits;
  int64_t cols = 0;
};
LogitsResult run_prefill(const PrefillProblem& p);
// Every check: -inf exactly where the reference has it (clean), untouched poison where unwritten,
// calc_diff bound on the rest.
::testing::AssertionResult check_prefill(const PrefillProblem& p, const LogitsResult& r);

// A paged decode problem.
struct PagedCase {
  int64_t batch = 1, next_n = 1, heads = 64, dim = 128, block_kv = 64;
  QkFormat format = QkFormat::kFp8;
  bool lens_2d = true;
  bool clean = false;
  bool bf16_logits = false;
  bool transposed_q = false;
  std::vector<int64_t> lens;  // per request (1-D) or per query (2-D); empty = random
  std::string str() const;
};
struct PagedProblem {
  PagedCase c;
  QuantRows q;
  std::vector<uint8_t> cache;  // num_blocks pages of block_kv * (row_bytes + 4) bytes
  int64_t num_blocks = 0, max_blocks = 0, max_context_len = 0;
  std::vector<float> weights;
  std::vector<int32_t> lens, block_table;
  std::vector<int64_t> query_len;  // per (b, j)
  std::vector<double> ref;         // [B * next_n, max_context_len]
};
// Unreferenced pages and slots past each request's length are filled with NaN bytes and NaN scales.
PagedProblem make_paged(const PagedCase& c, Rng& rng);
LogitsResult run_paged(const PagedProblem& p);
::testing::AssertionResult check_paged(const PagedProblem& p, const LogitsResult& r);

}  // namespace tessera::test
