// MQA logits against a float64 reference on the dequantised operands: every format, odd head counts
// and sizes, causal / random / out-of-range key ranges, clean and unclean, compressed mode, bf16
// logits and weights, non-contiguous q, padded rows; paged decode with random block tables, lengths
// 0/1/odd, 1-D and 2-D context lengths, NaN in every unreferenced slot; determinism across runs,
// thread counts and every ISA level.
#include <gtest/gtest.h>

#include "attention/mqa_logits_harness.h"

namespace tessera::test {
namespace {

class MqaPrefill : public ::testing::TestWithParam<Isa> {};

TEST_P(MqaPrefill, MatchesReference) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  std::vector<PrefillCase> cases;
  auto add = [&](int64_t s, int64_t s_kv, int64_t h, int64_t d, QkFormat f) {
    PrefillCase c;
    c.s = s;
    c.s_kv = s_kv;
    c.heads = h;
    c.dim = d;
    c.format = f;
    cases.push_back(c);
    return &cases.back();
  };
  add(7, 300, 64, 128, QkFormat::kFp8);
  add(5, 97, 16, 32, QkFormat::kFp8)->ranges = PrefillCase::kWild;
  add(9, 150, 12, 64, QkFormat::kFp8)->clean = false;
  add(6, 200, 128, 128, QkFormat::kFp8)->ranges = PrefillCase::kRandom;
  add(3, 70, 1, 128, QkFormat::kFp8)->bf16_logits = true;
  {
    PrefillCase* c = add(11, 129, 20, 64, QkFormat::kFp8);
    c->bf16_logits = c->bf16_weights = true;
    c->transposed_q = true;
    c->kv_pad = 16;
    c->logits_pad = 3;
  }
  {
    PrefillCase* c = add(13, 260, 8, 128, QkFormat::kFp8);
    c->clean = false;
    c->ranges = PrefillCase::kRandom;
    c->max_seqlen_k = 100;
  }
  add(6, 111, 32, 128, QkFormat::kMxFp8)->ranges = PrefillCase::kRandom;
  add(5, 90, 64, 64, QkFormat::kMxFp4);
  {
    PrefillCase* c = add(4, 77, 24, 128, QkFormat::kMxFp4);
    c->transposed_q = true;
    c->clean = false;
  }
  for (const PrefillCase& c : cases) {
    const PrefillProblem p = make_prefill(c, rng);
    ASSERT_TRUE(check_prefill(p, run_prefill(p)));
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, MqaPrefill, ::testing::ValuesIn(all_isas()));

class MqaPaged : public ::testing::TestWithParam<Isa> {};

TEST_P(MqaPaged, MatchesReferenceAndNeverReadsUnreferencedSlots) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  std::vector<PagedCase> cases(7);
  cases[0].batch = 5;
  cases[1].batch = 3;
  cases[1].next_n = 2;
  cases[1].block_kv = 16;
  cases[1].clean = true;
  cases[2].batch = 4;
  cases[2].next_n = 3;
  cases[2].lens_2d = false;
  cases[2].clean = true;
  cases[2].lens = {0, 1, 2, 77};
  cases[3].batch = 3;
  cases[3].heads = 20;
  cases[3].dim = 64;
  cases[3].bf16_logits = true;
  cases[3].transposed_q = true;
  cases[4].batch = 2;
  cases[4].next_n = 2;
  cases[4].format = QkFormat::kMxFp8;
  cases[4].block_kv = 32;
  cases[5].batch = 3;
  cases[5].format = QkFormat::kMxFp4;
  cases[5].heads = 16;
  cases[5].clean = true;
  cases[6].batch = 2;
  cases[6].dim = 32;
  cases[6].heads = 8;
  cases[6].block_kv = 1;
  for (const PagedCase& c : cases) {
    const PagedProblem p = make_paged(c, rng);
    ASSERT_TRUE(check_paged(p, run_paged(p)));
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, MqaPaged, ::testing::ValuesIn(all_isas()));

// At every level, 20 repeated calls and 1, 2, 3 threads give the same bits (each logit is computed
// once, in a fixed order, by whichever thread owns it).
class MqaDeterminism : public ::testing::TestWithParam<Isa> {};

TEST_P(MqaDeterminism, RunsAndThreadCounts) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  PrefillCase c;
  c.s = 23;
  c.s_kv = 700;
  c.heads = 64;
  c.ranges = PrefillCase::kRandom;
  const PrefillProblem p = make_prefill(c, rng);
  PagedCase pc;
  pc.batch = 3;
  pc.next_n = 2;
  pc.block_kv = 16;
  pc.clean = true;
  const PagedProblem pp = make_paged(pc, rng);
  LogitsResult first, first_paged;
  {
    NumThreadsScope threads(1);
    first = run_prefill(p);
    first_paged = run_paged(pp);
  }
  ASSERT_TRUE(check_prefill(p, first));
  ASSERT_TRUE(check_paged(pp, first_paged));
  for (int t : {2, 3}) {
    NumThreadsScope threads(t);
    ASSERT_EQ(run_prefill(p).bits, first.bits) << "threads " << t;
    ASSERT_EQ(run_paged(pp).bits, first_paged.bits) << "threads " << t;
  }
  for (int rep = 0; rep < 20; ++rep) {
    ASSERT_EQ(run_prefill(p).bits, first.bits) << "repeat " << rep;
    ASSERT_EQ(run_paged(pp).bits, first_paged.bits) << "repeat " << rep;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, MqaDeterminism, ::testing::ValuesIn(all_isas()));

TEST(MqaMetadata, SplitsPagesEvenly) {
  // Requests need 3, 0, 5, 1 pages of 4 tokens (2-D lengths: the longest query counts).
  std::vector<int32_t> lens = {9, 12, 0, 0, 17, 3, 2, 4};
  const TensorView lv(lens.data(), DType::kI32, {4, 2});
  std::vector<int32_t> meta(10, -1);
  attention::get_paged_mqa_logits_metadata(lv, 4, 4, TensorView(meta.data(), DType::kI32, {5, 2}));
  // 9 pages over 4 workers start at pages 0, 2, 4, 6 of the flattened list, then the end marker.
  const std::vector<int32_t> want = {0, 0, 0, 2, 2, 1, 2, 3, 4, 0};
  EXPECT_EQ(meta, want);
}

}  // namespace
}  // namespace tessera::test
