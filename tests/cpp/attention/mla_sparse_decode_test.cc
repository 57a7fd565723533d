// Sparse decode over the FP8 caches (V32 656-byte and MODEL1 584-byte layouts) against float64 over the
// dequantised tokens: invalid indices (-1, negative, out of range) skipped, unreferenced slots full of
// NaN bytes, all-invalid lists, topk_length (including 0), attn_sink (with +-inf), the extra cache,
// strided q and indices, h_q 64/128 and s_q 1/2. Main cases attend to hundreds of tokens (the regime of
// the spec's tolerances); the short-list edge cases also accept the documented bound of bf16 p.
#include <gtest/gtest.h>

#include <cmath>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

using flash_mla::KvCacheLayout;

struct SparseCase {
  const char* name;
  KvCacheLayout layout;
  int b, s_q, h_q, topk;
  bool topk_length, sink, extra, strided;
  std::vector<int> all_invalid;
  bool short_lists = false;
};

const SparseCase kCases[] = {
    {"V32 h64 s_q=2 with an all-invalid list", KvCacheLayout::kV32, 2, 2, 64, 768, false, false, false, false, {1}},
    {"V32 h128 topk_length (one 0) and sink", KvCacheLayout::kV32, 2, 1, 128, 1024, true, true, false, false, {}},
    {"V32 extra cache, strided q and indices", KvCacheLayout::kV32, 1, 2, 64, 768, true, false, true, true, {}},
    {"MODEL1 h64 s_q=2", KvCacheLayout::kModel1, 2, 2, 64, 768, false, false, false, false, {2}},
    {"MODEL1 h128 everything", KvCacheLayout::kModel1, 2, 1, 128, 1024, true, true, true, true, {}},
    {"V32 odd head count", KvCacheLayout::kV32, 1, 1, 20, 768, false, true, false, false, {}},
    {"V32 short lists", KvCacheLayout::kV32, 3, 2, 64, 64, true, true, true, false, {0}, true},
    {"MODEL1 short lists", KvCacheLayout::kModel1, 3, 1, 64, 64, true, false, false, true, {}, true},
};

class SparseDecode : public ::testing::TestWithParam<Isa> {};

TEST_P(SparseDecode, MatchesFloat64Reference) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  for (const SparseCase& c : kCases) {
    SparseProblem p;
    p.layout = c.layout;
    p.b = c.b;
    p.s_q = c.s_q;
    p.h_q = c.h_q;
    p.topk = c.topk;
    p.with_topk_length = c.topk_length;
    p.with_sink = c.sink;
    p.with_extra = c.extra;
    p.strided_q = p.strided_indices = c.strided;
    p.all_invalid_rows = c.all_invalid;
    p.short_lists = c.short_lists;
    if (c.short_lists) p.extra_topk = 32;
    p.build(rng);
    flash_mla::SchedMeta meta;
    flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
    EXPECT_TRUE(p.check()) << c.name;
  }
}

TEST_P(SparseDecode, SplitTopk2048SingleQuery) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  SparseProblem p;
  p.b = 1;
  p.s_q = 1;
  p.h_q = 64;
  p.topk = 2048;
  p.num_blocks = 40;
  p.invalid_fraction = 0.1;
  p.build(rng);
  flash_mla::SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  EXPECT_EQ(meta.schedule.num_splits[1], 4);  // 2048 / kMinSplitTokens
  EXPECT_TRUE(p.check());
}

TEST(SparseDecodeEdges, EmptyShapesAndZeroTopk) {
  Rng rng = Rng::for_current_test();
  SparseProblem p;
  p.b = 2;
  p.s_q = 1;
  p.topk = 64;
  p.build(rng);
  flash_mla::KvcacheInputs in = p.inputs();
  // topk == 0: every row sees nothing -> out 0, lse +inf.
  TensorView no_indices = p.indices.view;
  no_indices.shape[2] = 0;
  in.indices = &no_indices;
  flash_mla::SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(in, meta, p.out.view, p.lse.view);
  for (double v : to_doubles(p.out)) ASSERT_EQ(v, 0.0);
  for (double v : to_doubles(p.lse)) ASSERT_TRUE(std::isinf(v) && v > 0);
  // s_q == 0 and b == 0: valid empty calls that write nothing.
  TensorView q0 = p.q.view, i0 = p.indices.view, o0 = p.out.view, l0 = p.lse.view;
  q0.shape[1] = i0.shape[1] = o0.shape[1] = l0.shape[2] = 0;
  in.q = q0;
  in.indices = &i0;
  flash_mla::SchedMeta meta0;
  flash_mla::flash_mla_with_kvcache(in, meta0, o0, l0);
  q0.shape[0] = i0.shape[0] = o0.shape[0] = l0.shape[0] = 0;
  q0.shape[1] = i0.shape[1] = o0.shape[1] = l0.shape[2] = 1;
  in.q = q0;
  flash_mla::SchedMeta meta1;
  flash_mla::flash_mla_with_kvcache(in, meta1, o0, l0);
}

INSTANTIATE_TEST_SUITE_P(Isas, SparseDecode, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

}  // namespace
}  // namespace tessera::test
