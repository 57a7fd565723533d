// Dense decode (flash_mla_with_kvcache without indices) against float64, on the bf16 fast path and the
// scalar reference path: varlen and zero-length requests, causal s_q > 1, GQA, fp16, strided q, d 576/512,
// NaN in every unused cache slot and garbage in every unused block_table entry. The main cases use
// contexts of hundreds of tokens (the regime of the spec's tolerances); the short-context edge cases also
// accept the documented bound of bf16 p (mla_harness.h, RefRow::slack).
#include <gtest/gtest.h>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

struct DenseCase {
  const char* name;
  int b, s_q, h_q, h_k, d, d_v;
  std::vector<int> lens;
  bool causal;
  DType dtype;
  bool strided_q;
};

const DenseCase kCases[] = {
    {"varlen with a zero-length request", 3, 1, 16, 1, 576, 512, {0, 700, 1100}, false, DType::kBF16, false},
    {"causal s_q=2, h_q=32", 2, 2, 32, 1, 576, 512, {600, 901}, true, DType::kBF16, false},
    {"GQA h_q=8 over h_k=2, strided q", 2, 1, 8, 2, 576, 512, {520, 800}, false, DType::kBF16, true},
    {"d=512, 7 heads, causal s_q=2", 2, 2, 7, 1, 512, 512, {777, 513}, true, DType::kBF16, false},
    {"fp16 cache and q", 2, 1, 16, 1, 576, 512, {600, 650}, false, DType::kF16, false},
    {"small dims use the reference path", 1, 2, 5, 1, 72, 40, {600}, true, DType::kBF16, true},
    {"short contexts: 1, 2, 37 tokens", 4, 1, 16, 1, 576, 512, {1, 2, 37, 0}, false, DType::kBF16, false},
    {"causal s_q=3 longer than the cache", 1, 3, 16, 1, 512, 512, {2}, true, DType::kBF16, false},
};

class DenseDecode : public ::testing::TestWithParam<Isa> {};

TEST_P(DenseDecode, MatchesFloat64Reference) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  for (const DenseCase& c : kCases) {
    DenseProblem p;
    p.b = c.b;
    p.s_q = c.s_q;
    p.h_q = c.h_q;
    p.h_k = c.h_k;
    p.d = c.d;
    p.d_v = c.d_v;
    p.lens = c.lens;
    p.causal = c.causal;
    p.dtype = c.dtype;
    p.strided_q = c.strided_q;
    p.build(rng);
    flash_mla::SchedMeta meta;
    flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
    EXPECT_TRUE(p.check()) << c.name;
  }
}

TEST_P(DenseDecode, LongSequenceIsSplitAndCombinedExactly) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  DenseProblem p;
  p.b = 1;
  p.h_q = 16;
  p.lens = {3000};  // 16 target units over one request: split into parts of >= 512 tokens
  p.causal = true;
  p.s_q = 2;
  p.build(rng);
  flash_mla::SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  EXPECT_GT(meta.schedule.num_splits[1], 1);
  EXPECT_TRUE(p.check());
}

INSTANTIATE_TEST_SUITE_P(Isas, DenseDecode, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

}  // namespace
}  // namespace tessera::test
