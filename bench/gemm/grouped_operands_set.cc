#include "gemm/grouped_operands_set.h"

#include <cstring>

namespace tessera::bench {

namespace {

TensorView view3(const void* data, DType type, int64_t a, int64_t b, int64_t c) {
  return TensorView(const_cast<void*>(data), type, {a, b, c});
}
TensorView view2(const void* data, DType type, int64_t a, int64_t b) {
  return TensorView(const_cast<void*>(data), type, {a, b});
}

}  // namespace

GroupedWeights::GroupedWeights(GroupedType type, int64_t groups, int64_t n, int64_t k, uint64_t seed)
    : type_(type), groups_(groups), n_(n), k_(k) {
  switch (type) {
    case GroupedType::kBf16:
      plain_.push_back(random_bf16_operand(groups * n, k, seed));
      break;
    case GroupedType::kFp8:
      plain_.push_back(random_fp8_operand(groups * n, k, 128, seed));
      break;
    case GroupedType::kFp8Fp4:
      mx_.push_back(random_mx_operand(groups * n, k, true, 32, seed));
      break;
  }
}

void GroupedWeights::add_copies_beyond(int64_t total) {
  while (int64_t(copies()) * bytes() <= total) {
    if (type_ == GroupedType::kFp8Fp4) {
      mx_.push_back(clone_mx_operand(mx_[0]));
    } else {
      plain_.push_back(clone_operand(plain_[0]));
    }
  }
}

TensorView GroupedWeights::data(int c) const {
  if (type_ == GroupedType::kFp8Fp4) return mx_[size_t(c)].data_view(groups_, n_);
  return view3(plain_[size_t(c)].data.get(), plain_[0].dtype, groups_, n_, k_);
}

TensorView GroupedWeights::scale(int c) const {
  if (type_ == GroupedType::kFp8Fp4) return mx_[size_t(c)].scale_view(groups_, n_);
  const GemmOperand& op = plain_[size_t(c)];
  return view3(op.scale.get(), DType::kF32, groups_, n_ / 128, op.scale_cols());
}

gemm::ScaledTensor GroupedWeights::group(int c, int64_t g) const {
  if (type_ == GroupedType::kFp8Fp4) {
    const MxOperand& op = mx_[size_t(c)];
    return {view2(op.data.get() + g * n_ * op.row_bytes(), DType::kI8, n_, op.row_bytes()),
            view2(op.scale.get() + g * n_ * op.scale_words(), DType::kI32, n_, op.scale_words())};
  }
  const GemmOperand& op = plain_[size_t(c)];
  const int64_t sf_rows = n_ / 128;
  return {view2(op.data.get() + g * n_ * k_, DType::kF8E4M3, n_, k_),
          view2(op.scale.get() + g * sf_rows * op.scale_cols(), DType::kF32, sf_rows, op.scale_cols())};
}

TensorView GroupedWeights::group_data(int c, int64_t g) const {
  return view2(plain_[size_t(c)].data.get() + g * n_ * k_ * 2, DType::kBF16, n_, k_);
}

RowValues GroupedWeights::row_values() const {
  if (type_ == GroupedType::kFp8Fp4) return [this](int64_t r, float* out) { mx_[0].row_values(r, out); };
  return [this](int64_t r, float* out) { plain_[0].row_values(r, out); };
}

int64_t GroupedWeights::data_bytes() const {
  return type_ == GroupedType::kFp8Fp4 ? mx_[0].data_bytes() : plain_[0].data_bytes();
}

int64_t GroupedWeights::bytes() const {
  return type_ == GroupedType::kFp8Fp4 ? mx_[0].data_bytes() + mx_[0].scale_bytes() : plain_[0].bytes();
}

GroupedActivations::GroupedActivations(GroupedType type, int64_t rows, int64_t k, uint64_t seed)
    : type_(type), rows_(rows), k_(k) {
  switch (type) {
    case GroupedType::kBf16:
      plain_ = random_bf16_operand(rows, k, seed);
      break;
    case GroupedType::kFp8:
      plain_ = random_fp8_operand(rows, k, 1, seed);
      break;
    case GroupedType::kFp8Fp4:
      mx_ = random_mx_operand(rows, k, false, 128, seed);
      break;
  }
}

void GroupedActivations::zero_rows(int64_t r0, int64_t r1) {
  if (r1 <= r0) return;
  if (type_ == GroupedType::kFp8Fp4) {
    std::memset(mx_.data.get() + r0 * mx_.row_bytes(), 0, size_t((r1 - r0) * mx_.row_bytes()));
  } else {
    const int64_t es = dtype_storage_bytes(plain_.dtype);
    std::memset(plain_.data.get() + r0 * k_ * es, 0, size_t((r1 - r0) * k_ * es));
  }
}

TensorView GroupedActivations::data(int64_t r0, int64_t rows) const {
  return view2(plain_.data.get() + r0 * k_ * dtype_storage_bytes(plain_.dtype), plain_.dtype, rows, k_);
}

gemm::ScaledTensor GroupedActivations::scaled(int64_t r0, int64_t rows) const {
  if (type_ == GroupedType::kFp8Fp4)
    return {view2(mx_.data.get() + r0 * mx_.row_bytes(), DType::kF8E4M3, rows, k_),
            view2(mx_.scale.get() + r0 * mx_.scale_words(), DType::kI32, rows, mx_.scale_words())};
  return {data(r0, rows), view2(plain_.scale.get() + r0 * plain_.scale_cols(), DType::kF32, rows, plain_.scale_cols())};
}

gemm::ScaledTensor GroupedActivations::scaled_3d(int64_t groups, int64_t rows_per_group) const {
  if (type_ == GroupedType::kFp8Fp4)
    return {mx_.data_view(groups, rows_per_group), mx_.scale_view(groups, rows_per_group)};
  return {data_3d(groups, rows_per_group),
          view3(plain_.scale.get(), DType::kF32, groups, rows_per_group, plain_.scale_cols())};
}

TensorView GroupedActivations::data_3d(int64_t groups, int64_t rows_per_group) const {
  return view3(plain_.data.get(), plain_.dtype, groups, rows_per_group, k_);
}

RowValues GroupedActivations::row_values() const {
  if (type_ == GroupedType::kFp8Fp4) return [this](int64_t r, float* out) { mx_.row_values(r, out); };
  return [this](int64_t r, float* out) { plain_.row_values(r, out); };
}

int64_t GroupedActivations::bytes() const {
  return type_ == GroupedType::kFp8Fp4 ? mx_.data_bytes() + mx_.scale_bytes() : plain_.bytes();
}

gemm::Recipe grouped_recipe(GroupedType type) {
  gemm::Recipe r;
  if (type == GroupedType::kFp8Fp4) {
    r.recipe_a = std::array<int, 2>{1, 128};
    r.recipe_b = std::array<int, 2>{1, 32};
  }
  return r;
}

}  // namespace tessera::bench
