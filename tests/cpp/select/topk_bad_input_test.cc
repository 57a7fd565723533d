// Bad arguments: a clear error naming the argument and the rule, and untouched outputs.
#include <gtest/gtest.h>

#include <functional>

#include "tessera/select.h"
#include "test_util.h"

namespace tessera::test {
namespace {

struct Buffers {
  std::vector<float> in = std::vector<float>(4 * 64, 1.0f);
  std::vector<int32_t> begin = std::vector<int32_t>(4, 0), end = std::vector<int32_t>(4, 64);
  std::vector<int64_t> idx = std::vector<int64_t>(4 * 8, -7);
  std::vector<float> val = std::vector<float>(4 * 8, -7.0f);
  TensorView input() { return TensorView(in.data(), DType::kF32, {4, 64}); }
  TensorView idx_view() { return TensorView(idx.data(), DType::kI64, {4, 8}); }
  TensorView val_view() { return TensorView(val.data(), DType::kF32, {4, 8}); }
  bool untouched() const {
    for (int64_t v : idx)
      if (v != -7) return false;
    for (float v : val)
      if (v != -7.0f) return false;
    return true;
  }
};

void expect_rejected(const std::function<void(Buffers&)>& call, std::initializer_list<std::string> needles) {
  Buffers b;
  EXPECT_TRUE(throws_invalid([&] { call(b); }, needles));
  EXPECT_TRUE(b.untouched()) << "outputs were written before the error";
}

TEST(TopkBadInput, ClearErrorsAndUntouchedOutputs) {
  expect_rejected([](Buffers& b) { select::topk(b.input(), 0, nullptr, nullptr, nullptr, b.idx_view(), nullptr); },
                  {"'topk'", "[1, 4096]"});
  expect_rejected([](Buffers& b) { select::topk(b.input(), 4097, nullptr, nullptr, nullptr, b.idx_view(), nullptr); },
                  {"'topk'"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView in(b.in.data(), DType::kI32, {4, 64});
        select::topk(in, 8, nullptr, nullptr, nullptr, b.idx_view(), nullptr);
      },
      {"'input'", "dtype"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView in(b.in.data(), DType::kF32, {4, 32}, {64, 2});
        select::topk(in, 8, nullptr, nullptr, nullptr, b.idx_view(), nullptr);
      },
      {"'input'", "stride(1) == 1"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView idx(b.idx.data(), DType::kI64, {4, 7});
        select::topk(b.input(), 8, nullptr, nullptr, nullptr, idx, nullptr);
      },
      {"'output_idx'", "topk"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView idx(b.idx.data(), DType::kF32, {4, 8});
        select::topk(b.input(), 8, nullptr, nullptr, nullptr, idx, nullptr);
      },
      {"'output_idx'", "dtype"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView val(b.val.data(), DType::kBF16, {4, 8});
        const TensorView idx = b.idx_view();
        select::topk(b.input(), 8, nullptr, nullptr, &val, idx, nullptr);
      },
      {"'output_val'", "dtype"});
  expect_rejected(
      [](Buffers& b) {
        b.end[2] = 65;
        const TensorView end(b.end.data(), DType::kI32, {4});
        select::topk(b.input(), 8, nullptr, &end, nullptr, b.idx_view(), nullptr);
      },
      {"'end'", "end[2] = 65"});
  expect_rejected(
      [](Buffers& b) {
        b.begin[1] = 10;
        b.end[1] = 5;
        const TensorView begin(b.begin.data(), DType::kI32, {4}), end(b.end.data(), DType::kI32, {4});
        select::topk(b.input(), 8, &begin, &end, nullptr, b.idx_view(), nullptr);
      },
      {"'begin'", "begin[1] = 10"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView end(b.end.data(), DType::kI32, {3});
        select::topk(b.input(), 8, nullptr, &end, nullptr, b.idx_view(), nullptr);
      },
      {"'end'", "dimension 0"});
  expect_rejected(
      [](Buffers& b) {
        select::TopkOptions o;
        o.sorted = o.sorted_index = true;
        const TensorView val = b.val_view();
        select::topk(b.input(), 8, nullptr, nullptr, &val, b.idx_view(), nullptr, o);
      },
      {"'sorted'", "'sorted_index'"});
  expect_rejected(
      [](Buffers& b) {
        select::TopkOptions o;
        o.sorted = true;
        select::topk(b.input(), 8, nullptr, nullptr, nullptr, b.idx_view(), nullptr, o);
      },
      {"'sorted'", "values"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView idx(b.in.data(), DType::kI64, {4, 8});  // aliases the input
        select::topk(b.input(), 8, nullptr, nullptr, nullptr, idx, nullptr);
      },
      {"'output_idx'", "overlap"});
  expect_rejected(
      [](Buffers& b) {
        const TensorView idx(b.idx.data(), DType::kI32, {4, 8});
        select::TopkOptions o;
        o.idx_oob_fill_value = int64_t(1) << 40;
        select::topk(b.input(), 8, nullptr, nullptr, nullptr, idx, nullptr, o);
      },
      {"'idx_oob_fill_value'", "int32"});
}

}  // namespace
}  // namespace tessera::test
