#include "gemm/grouped_runs.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "gemm/grouped_operands_set.h"
#include "tessera/core/memory.h"
#include "tessera/gemm.h"

namespace tessera::bench {
namespace {

constexpr double kTolUlps = 8;  // as the dense bench: bf16 half-ulps of the output
constexpr uint16_t kBf16NaN = 0x7FC0;
// Weights re-read by DRAM-bound cases rotate over copies that together exceed this many L3s
// (see gemm_bench.cc: AMD's L3 keeps part of a re-read set).
constexpr int64_t kRotationOverL3 = 4;

TensorView bf16_view(uint16_t* d, int64_t rows, int64_t n) {
  return TensorView(d, DType::kBF16, {rows, n});
}

// Dense GEMM of rows [r0, r0 + rows) of a with group g of weight copy `copy` into d [rows, N].
void dense_call(GroupedType type, const GroupedActivations& a, int64_t r0, int64_t rows, const GroupedWeights& w,
                int copy, int64_t g, uint16_t* d, int64_t n, const gemm::Recipe& recipe) {
  if (rows == 0) return;
  if (type == GroupedType::kBf16) {
    gemm::bf16_gemm_nt(a.data(r0, rows), w.group_data(copy, g), bf16_view(d, rows, n));
  } else {
    gemm::fp8_fp4_gemm_nt(a.scaled(r0, rows), w.group(copy, g), bf16_view(d, rows, n), nullptr, recipe);
  }
}

class ContiguousRun final : public GroupedRun {
 public:
  ContiguousRun(const GroupedCase& c, uint64_t seed)
      : c_(c), recipe_(grouped_recipe(c.type)), w_(c.type, c.groups, c.n, c.k, seed) {
    const std::vector<int64_t> sizes = grouped_sizes(c, seed);
    const bool psum = c.layout == GroupedLayout::kPsum;
    std::vector<int64_t> starts;
    int64_t start = 0;
    for (int64_t s : sizes) {
      starts.push_back(start);
      start = (start + s + kGroupedAlignment - 1) / kGroupedAlignment * kGroupedAlignment;
    }
    total_rows = start;
    valid_rows = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    row_group_.assign(size_t(total_rows), -1);
    for (size_t g = 0; g < sizes.size(); ++g) {
      std::fill_n(row_group_.begin() + starts[g], sizes[g], int32_t(g));
      if (psum) layout_.push_back(int32_t(starts[g] + sizes[g]));
    }
    if (!psum) layout_ = row_group_;
    a_ = std::make_unique<GroupedActivations>(c.type, total_rows, c.k, seed ^ 0xA11CEull);
    for (size_t g = 0; g < sizes.size(); ++g) {
      const int64_t end = g + 1 < sizes.size() ? starts[g + 1] : total_rows;
      a_->zero_rows(starts[g] + sizes[g], end);  // DeepGEMM: padding / gap rows of A are zero
    }
    d_ = aligned_array<uint16_t>(size_t(total_rows * c.n));
    dense_d_ = aligned_array<uint16_t>(size_t(valid_rows * c.n));
    check_ = std::make_unique<GroupedCheck>(c.groups, c.n, c.k, w_.row_values(), seed ^ 0xC0FFEEull);
    bytes = a_->bytes() + w_.bytes() + 2 * total_rows * c.n;
    weight_data_bytes = w_.data_bytes();
    peer = "tessera dense (1 GEMM)";
  }

  void ours(int64_t) override {
    gemm::ContiguousLayout layout;
    layout.grouped_layout = TensorView(layout_.data(), DType::kI32, {int64_t(layout_.size())});
    layout.use_psum_layout = c_.layout == GroupedLayout::kPsum;
    layout.mk_alignment = int(kGroupedAlignment);
    const TensorView d = bf16_view(d_.get(), total_rows, c_.n);
    if (c_.type == GroupedType::kBf16) {
      gemm::m_grouped_bf16_gemm_nt_contiguous(a_->data(0, total_rows), w_.data(0), d, layout);
    } else {
      gemm::m_grouped_fp8_fp4_gemm_nt_contiguous(a_->scaled(0, total_rows), {w_.data(0), w_.scale(0)}, d, layout,
                                                 recipe_);
    }
  }

  // Call i multiplies by group i % G's weights: like the grouped call, it finds its weights in DRAM,
  // not in the L3 where one matrix re-read by every timed call would stay (8-16 MiB here).
  void dense(int64_t i) override {
    dense_call(c_.type, *a_, 0, valid_rows, w_, 0, i % c_.groups, dense_d_.get(), c_.n, recipe_);
  }

  void poison() override {
    std::fill_n(d_.get(), total_rows * c_.n, kBf16NaN);
    std::fill_n(dense_d_.get(), valid_rows * c_.n, kBf16NaN);
  }

  double check_ours() const override {
    std::vector<CheckedRow> rows;
    for (int64_t r = 0; r < total_rows; ++r) {
      const int32_t g = row_group_[size_t(r)];
      if (g >= 0) {
        rows.push_back({r, r, g});
        continue;
      }
      for (int64_t j = 0; j < c_.n; ++j)  // padding and gap rows must hold zeros
        if (d_[size_t(r * c_.n + j)] != 0) return std::numeric_limits<double>::infinity();
    }
    return check_->error(a_->row_values(), rows, d_.get(), c_.n, kTolUlps);
  }

  double check_dense() const override {
    std::vector<CheckedRow> rows;
    for (int64_t r = 0; r < valid_rows; ++r) rows.push_back({r, r, 0});
    return check_->error(a_->row_values(), rows, dense_d_.get(), c_.n, kTolUlps);
  }

 private:
  GroupedCase c_;
  gemm::Recipe recipe_;
  GroupedWeights w_;
  std::unique_ptr<GroupedActivations> a_;
  std::vector<int32_t> layout_, row_group_;
  AlignedPtr<uint16_t> d_, dense_d_;
  std::unique_ptr<GroupedCheck> check_;
};

class MaskedRun final : public GroupedRun {
 public:
  MaskedRun(const GroupedCase& c, const MachineLimits& limits, uint64_t seed)
      : c_(c), recipe_(grouped_recipe(c.type)), w_(c.type, c.groups, c.n, c.k, seed) {
    for (int64_t s : grouped_sizes(c, seed)) masked_m_.push_back(int32_t(s));
    w_.add_copies_beyond(kRotationOverL3 * limits.l3_bytes);
    total_rows = c.groups * c.max_m;
    valid_rows = std::accumulate(masked_m_.begin(), masked_m_.end(), int64_t(0));
    a_ = std::make_unique<GroupedActivations>(c.type, total_rows, c.k, seed ^ 0xA11CEull);
    d_ = aligned_array<uint16_t>(size_t(total_rows * c.n));
    dense_d_ = aligned_array<uint16_t>(size_t(total_rows * c.n));
    check_ = std::make_unique<GroupedCheck>(c.groups, c.n, c.k, w_.row_values(), seed ^ 0xC0FFEEull);
    bytes = a_->bytes() + w_.bytes() + 2 * total_rows * c.n;
    weight_data_bytes = w_.data_bytes();
    peer = "tessera dense (1 GEMM per group)";
  }

  void ours(int64_t i) override {
    const int copy = int(i % w_.copies());
    const TensorView masked(masked_m_.data(), DType::kI32, {c_.groups});
    const TensorView d(d_.get(), DType::kBF16, {c_.groups, c_.max_m, c_.n});
    if (c_.type == GroupedType::kBf16) {
      gemm::m_grouped_bf16_gemm_nt_masked(a_->data_3d(c_.groups, c_.max_m), w_.data(copy), d, masked,
                                          c_.rows_per_group);
    } else {
      gemm::m_grouped_fp8_fp4_gemm_nt_masked(a_->scaled_3d(c_.groups, c_.max_m), {w_.data(copy), w_.scale(copy)}, d,
                                             masked, c_.rows_per_group, recipe_);
    }
  }

  void dense(int64_t i) override {
    const int copy = int(i % w_.copies());
    for (int64_t g = 0; g < c_.groups; ++g)
      dense_call(c_.type, *a_, g * c_.max_m, masked_m_[size_t(g)], w_, copy, g, dense_d_.get() + g * c_.max_m * c_.n,
                 c_.n, recipe_);
  }

  void poison() override {
    std::fill_n(d_.get(), total_rows * c_.n, kBf16NaN);
    std::fill_n(dense_d_.get(), total_rows * c_.n, kBf16NaN);
  }

  double check_ours() const override { return check(d_.get()); }
  double check_dense() const override { return check(dense_d_.get()); }

 private:
  double check(const uint16_t* d) const {
    std::vector<CheckedRow> rows;
    for (int64_t g = 0; g < c_.groups; ++g)
      for (int64_t r = 0; r < masked_m_[size_t(g)]; ++r) rows.push_back({g * c_.max_m + r, g * c_.max_m + r, g});
    return check_->error(a_->row_values(), rows, d, c_.n, kTolUlps);
  }

  GroupedCase c_;
  gemm::Recipe recipe_;
  GroupedWeights w_;
  std::vector<int32_t> masked_m_;
  std::unique_ptr<GroupedActivations> a_;
  AlignedPtr<uint16_t> d_, dense_d_;
  std::unique_ptr<GroupedCheck> check_;
};

}  // namespace

std::unique_ptr<GroupedRun> prepare_grouped_run(const GroupedCase& c, const MachineLimits& limits, uint64_t seed) {
  if (c.layout == GroupedLayout::kMasked) return std::make_unique<MaskedRun>(c, limits, seed);
  return std::make_unique<ContiguousRun>(c, seed);
}

}  // namespace tessera::bench
