// Work partition and determinism: the old get_mla_metadata form, FlashMLASchedMeta's recorded config,
// schedule validation, and bitwise-identical results for 1/2/3 threads, repeated calls and schedules made
// at another thread count.
#include <gtest/gtest.h>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

using flash_mla::SchedMeta;
using flash_mla::Schedule;

std::vector<uint8_t> snapshot(const Buffer& out, const Buffer& lse) {
  std::vector<uint8_t> s = out.bytes;
  s.insert(s.end(), lse.bytes.begin(), lse.bytes.end());
  return s;
}

TEST(MlaSchedule, OldFormDescribesEveryItemOnce) {
  std::vector<int32_t> lens = {0, 100, 5000, 700};
  const TensorView seqlens(lens.data(), DType::kI32, {4});
  NumThreadsScope threads(3);
  const Schedule s = flash_mla::get_mla_metadata(seqlens, 16, 1);
  ASSERT_EQ(s.num_splits.size(), 5u);
  EXPECT_EQ(s.num_splits[0], 0);
  for (int i = 0; i < 4; ++i) EXPECT_GE(s.num_splits[size_t(i + 1)] - s.num_splits[size_t(i)], 1);
  EXPECT_GT(s.num_splits[3] - s.num_splits[2], 1) << "the 5000-token request should be split";
  ASSERT_GE(s.parts, 1);
  ASSERT_LE(s.parts, 3);
  int32_t covered = 0;
  for (int64_t p = 0; p < s.parts; ++p) {
    const int32_t* row = s.tile_scheduler_metadata.data() + p * 8;
    EXPECT_EQ(row[4], covered);
    covered = row[5];
    EXPECT_EQ(row[6], s.num_splits[4]);
  }
  EXPECT_EQ(covered, s.num_splits[4]);
}

TEST(MlaSchedule, OldAndCurrentFormsGiveIdenticalBits) {
  Rng rng = Rng::for_current_test();
  DenseProblem p;
  p.b = 3;
  p.h_q = 16;
  p.lens = {1800, 0, 700};
  p.causal = true;
  p.s_q = 2;
  p.build(rng);
  SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  const std::vector<uint8_t> current = snapshot(p.out, p.lse);
  const Schedule old = flash_mla::get_mla_metadata(p.seqlens.view, p.s_q * p.h_q / p.h_k, p.h_k);
  EXPECT_EQ(old.num_splits, meta.schedule.num_splits);
  flash_mla::flash_mla_with_kvcache(p.inputs(), old, p.out.view, p.lse.view);
  EXPECT_EQ(snapshot(p.out, p.lse), current);
}

TEST(MlaSchedule, SparseOldFormMatchesTheFirstCallsPlan) {
  Rng rng = Rng::for_current_test();
  SparseProblem p;
  p.b = 1;
  p.s_q = 2;
  p.topk = 2048;
  p.build(rng);
  SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  std::vector<int32_t> lens = {0};
  const TensorView seqlens(lens.data(), DType::kI32, {1});
  const Schedule old = flash_mla::get_mla_metadata(seqlens, p.s_q * p.h_q, 1, p.h_q, true, p.topk);
  EXPECT_EQ(old.num_splits, meta.schedule.num_splits);
}

// Runs `run` at 1, 2 and 3 threads and 3 more times; every result must equal the first bit for bit.
void expect_deterministic(const char* what, const std::function<std::vector<uint8_t>()>& run) {
  std::vector<uint8_t> first;
  for (int threads : {1, 2, 3, 2, 1}) {
    NumThreadsScope scope(threads);
    const std::vector<uint8_t> got = run();
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_TRUE(got == first) << what << ": " << threads << " threads differ from 1 thread";
    }
  }
}

class MlaDeterminism : public ::testing::TestWithParam<Isa> {};

TEST_P(MlaDeterminism, SameBitsForAnyThreadCount) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  DenseProblem dense;
  dense.b = 2;
  dense.h_q = 16;
  dense.lens = {2500, 900};
  dense.s_q = 2;
  dense.causal = true;
  dense.build(rng);
  expect_deterministic("dense decode", [&] {
    SchedMeta meta;  // a fresh plan at every thread count
    flash_mla::flash_mla_with_kvcache(dense.inputs(), meta, dense.out.view, dense.lse.view);
    return snapshot(dense.out, dense.lse);
  });
  SparseProblem sparse;
  sparse.b = 1;
  sparse.s_q = 2;
  sparse.topk = 2048;
  sparse.with_extra = true;
  sparse.with_sink = true;
  sparse.build(rng);
  expect_deterministic("sparse decode", [&] {
    SchedMeta meta;
    flash_mla::flash_mla_with_kvcache(sparse.inputs(), meta, sparse.out.view, sparse.lse.view);
    return snapshot(sparse.out, sparse.lse);
  });
  PrefillProblem prefill;
  prefill.s_q = 2;
  prefill.s_kv = 3000;
  prefill.topk = 2048;
  prefill.build(rng);
  expect_deterministic("sparse prefill", [&] {
    flash_mla::flash_mla_sparse_fwd(prefill.inputs(), prefill.out.view, prefill.max_logits.view, prefill.lse.view);
    std::vector<uint8_t> s = snapshot(prefill.out, prefill.lse);
    s.insert(s.end(), prefill.max_logits.bytes.begin(), prefill.max_logits.bytes.end());
    return s;
  });
}

INSTANTIATE_TEST_SUITE_P(Isas, MlaDeterminism, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

TEST(MlaSchedMeta, LaterCallsMustMatchTheRecordedConfig) {
  Rng rng = Rng::for_current_test();
  SparseProblem p;
  p.b = 2;
  p.topk = 128;
  p.build(rng);
  SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  ASSERT_TRUE(meta.have_initialized);
  EXPECT_EQ(meta.config.b, 2);
  EXPECT_EQ(meta.config.topk, 128);
  // Same object, fewer indices: topk differs from the recorded config.
  flash_mla::KvcacheInputs in = p.inputs();
  TensorView shorter = p.indices.view;
  shorter.shape[2] = 64;
  in.indices = &shorter;
  const std::vector<uint8_t> before = snapshot(p.out, p.lse);
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(in, meta, p.out.view, p.lse.view); },
                             {"flash_mla_with_kvcache", "sched_meta.config.topk", "recorded 128, got 64"}));
  // A batch of 1 (q, indices and outputs sliced).
  flash_mla::KvcacheInputs one = p.inputs();
  TensorView q1 = p.q.view, i1 = p.indices.view, o1 = p.out.view, l1 = p.lse.view;
  q1.shape[0] = i1.shape[0] = o1.shape[0] = l1.shape[0] = 1;
  one.q = q1;
  one.indices = &i1;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(one, meta, o1, l1); },
                             {"sched_meta.config.b", "batch_size"}));
  EXPECT_TRUE(snapshot(p.out, p.lse) == before) << "a refused call wrote its outputs";
}

TEST(MlaSchedMeta, DenseConfigRecordsCausalAndBlockSize) {
  Rng rng = Rng::for_current_test();
  DenseProblem p;
  p.b = 1;
  p.lens = {100};
  p.build(rng);
  SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  flash_mla::KvcacheInputs in = p.inputs();
  in.causal = true;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(in, meta, p.out.view, p.lse.view); },
                             {"sched_meta.config.causal"}));
}

TEST(MlaSchedule, MalformedOldFormIsRefused) {
  Rng rng = Rng::for_current_test();
  DenseProblem p;
  p.b = 2;
  p.lens = {100, 200};
  p.build(rng);
  const std::vector<uint8_t> before = snapshot(p.out, p.lse);
  Schedule s = flash_mla::get_mla_metadata(p.seqlens.view, p.h_q, 1);
  Schedule short_splits = s;
  short_splits.num_splits.pop_back();
  EXPECT_TRUE(
      throws_invalid([&] { flash_mla::flash_mla_with_kvcache(p.inputs(), short_splits, p.out.view, p.lse.view); },
                     {"num_splits", "batch_size + 1"}));
  Schedule bad_rows = s;
  bad_rows.tile_scheduler_metadata[5] += 1;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(p.inputs(), bad_rows, p.out.view, p.lse.view); },
                             {"tile_scheduler_metadata"}));
  Schedule zero_split = s;
  zero_split.num_splits[1] = 0;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(p.inputs(), zero_split, p.out.view, p.lse.view); },
                             {"num_splits", "split counts"}));
  EXPECT_TRUE(snapshot(p.out, p.lse) == before);
}

}  // namespace
}  // namespace tessera::test
