// flash_mla_sparse_fwd against float64: out, max_logits and lse with invalid and short index lists,
// all-invalid queries (out 0, max -inf, lse +inf), topk_length, attn_sink, h_kv > 1, strided q. Main
// cases attend to hundreds of tokens; the short-list case also accepts the documented bound of bf16 p.
#include <gtest/gtest.h>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

struct PrefillCase {
  const char* name;
  int s_q, s_kv, h_q, h_kv, d, d_v, topk;
  bool topk_length, sink, strided;
  std::vector<int> all_invalid;
  bool short_lists = false;
};

const PrefillCase kCases[] = {
    {"h64 d576 with an all-invalid query", 3, 900, 64, 1, 576, 512, 768, false, false, false, {2}},
    {"h128 d512 topk_length and sink", 2, 1000, 128, 1, 512, 512, 1024, true, true, false, {}},
    {"h_kv=2, 16 heads each, strided q", 2, 900, 32, 2, 576, 512, 768, false, true, true, {}},
    {"single long list (split)", 1, 3000, 64, 1, 576, 512, 2048, false, false, false, {}},
    {"short lists", 4, 90, 64, 1, 576, 512, 48, true, true, false, {1}, true},
};

class SparsePrefill : public ::testing::TestWithParam<Isa> {};

TEST_P(SparsePrefill, MatchesFloat64Reference) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  for (const PrefillCase& c : kCases) {
    PrefillProblem p;
    p.s_q = c.s_q;
    p.s_kv = c.s_kv;
    p.h_q = c.h_q;
    p.h_kv = c.h_kv;
    p.d = c.d;
    p.d_v = c.d_v;
    p.topk = c.topk;
    p.with_topk_length = c.topk_length;
    p.with_sink = c.sink;
    p.strided_q = c.strided;
    p.all_invalid_queries = c.all_invalid;
    p.short_lists = c.short_lists;
    p.build(rng);
    flash_mla::flash_mla_sparse_fwd(p.inputs(), p.out.view, p.max_logits.view, p.lse.view);
    EXPECT_TRUE(p.check()) << c.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SparsePrefill, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

}  // namespace
}  // namespace tessera::test
