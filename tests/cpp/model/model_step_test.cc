// Whole-model steps on a tiny random checkpoint: bitwise determinism across thread counts, decode after
// prefill against a prefill of the whole sequence, batching, greedy generation and bad calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "checkpoint_writer.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/model.h"

namespace tessera::model {
namespace {

using testing::make_temp_dir;
using testing::tiny_config;
using testing::write_random_checkpoint;

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> d(0, int32_t(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = d(gen);
  return t;
}

class ModelStep : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir(GetParam() ? "fp8" : "bf16");
    ASSERT_FALSE(dir_.empty());
    config_ = tiny_config(GetParam());
    write_random_checkpoint(dir_, config_, 7);
  }
  void TearDown() override {
    set_num_threads(0);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  Config config_;
};

// Prefill of two prompts (one longer than index_topk), then three decode steps: every logit and hidden
// state bitwise equal with 1 and 2 threads.
TEST_P(ModelStep, BitwiseIdenticalForOneAndTwoThreads) {
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(37, config_.vocab_size, 1),
                                                     random_tokens(5, config_.vocab_size, 2)};
  std::vector<std::vector<float>> runs[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Model m(dir_);
    auto& out = runs[threads - 1];
    StepOutput p = m.prefill({0, 1}, prompts, true, true);
    out.push_back(p.logits);
    out.push_back(p.hidden);
    std::vector<int32_t> next = {3, 9};
    for (int s = 0; s < 3; ++s) {
      StepOutput d = m.decode({0, 1}, next, true);
      out.push_back(d.logits);
      out.push_back(d.hidden);
      next = argmax_rows(d.logits.data(), d.rows, config_.vocab_size);
    }
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    ASSERT_EQ(runs[0][i].size(), runs[1][i].size());
    EXPECT_EQ(0, std::memcmp(runs[0][i].data(), runs[1][i].data(), runs[0][i].size() * 4)) << "output " << i;
  }
}

// Decoding token n after a prefill of tokens [0, n) gives the logits that a prefill of [0, n] gives for
// its last token: the same cache contents; only the GEMMs' row blocking differs (M = 1 against M = n),
// which can move a bf16 rounding by one unit.
TEST_P(ModelStep, DecodeAfterPrefillMatchesWholePrefill) {
  const std::vector<int32_t> tokens = random_tokens(41, config_.vocab_size, 3);
  Model m(dir_);
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 3);
  m.prefill({0}, {head});
  std::vector<std::vector<float>> decoded;
  for (size_t i = head.size(); i < tokens.size(); ++i) decoded.push_back(m.decode({0}, {tokens[i]}).logits);
  EXPECT_EQ(m.seq_len(0), int64_t(tokens.size()));
  const StepOutput whole = m.prefill({1}, {tokens}, true);
  for (size_t j = 0; j < decoded.size(); ++j) {
    const float* ref = whole.logits.data() + (head.size() + j) * size_t(config_.vocab_size);
    double max_ref = 0, max_err = 0;
    for (int64_t v = 0; v < config_.vocab_size; ++v) {
      max_ref = std::max(max_ref, std::fabs(double(ref[v])));
      max_err = std::max(max_err, std::fabs(double(ref[v]) - decoded[j][size_t(v)]));
    }
    EXPECT_GT(max_ref, 0.1);
    EXPECT_LE(max_err, 5e-3 * max_ref) << "decode step " << j;
  }
}

// A batch of prompts gives each prompt the results it gets alone (rows are independent).
TEST_P(ModelStep, BatchedPrefillMatchesSinglePrefill) {
  const std::vector<int32_t> a = random_tokens(20, config_.vocab_size, 4), b = random_tokens(9, config_.vocab_size, 5);
  Model m(dir_);
  const StepOutput both = m.prefill({0, 1}, {a, b});
  const StepOutput alone = m.prefill({2}, {b});
  double max_ref = 0, max_err = 0;
  for (int64_t v = 0; v < config_.vocab_size; ++v) {
    const double ref = alone.logits[size_t(v)];
    max_ref = std::max(max_ref, std::fabs(ref));
    max_err = std::max(max_err, std::fabs(ref - both.logits[size_t(config_.vocab_size + v)]));
  }
  EXPECT_LE(max_err, 2e-2 * max_ref);
}

TEST_P(ModelStep, GenerateIsGreedyDecode) {
  Model m(dir_);
  const std::vector<int32_t> prompt = random_tokens(12, config_.vocab_size, 6);
  const auto gen = m.generate({prompt}, 4);
  ASSERT_EQ(gen.size(), 1u);
  ASSERT_EQ(gen[0].size(), 4u);
  m.reset(0);
  StepOutput s = m.prefill({0}, {prompt});
  std::vector<int32_t> expect;
  for (int i = 0; i < 4; ++i) {
    expect.push_back(argmax_rows(s.logits.data(), 1, config_.vocab_size)[0]);
    if (i < 3) s = m.decode({0}, {expect.back()});
  }
  EXPECT_EQ(gen[0], expect);
  const StepTimes& t = m.last_step_times();
  EXPECT_GT(t.total(), 0.0);
  EXPECT_GT(t.seconds[int(Component::kAttention)], 0.0);
}

TEST_P(ModelStep, BadCallsNameTheRule) {
  ModelOptions opt;
  opt.max_batch_size = 2;
  opt.max_seq_len = 64;
  Model m(dir_, opt);
  auto expect_error = [](auto&& fn, const char* needle) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one containing: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { m.prefill({2}, {{1, 2}}); }, "slot 2 is outside [0, max_batch_size = 2)");
  expect_error([&] { m.prefill({0, 0}, {{1}, {2}}); }, "appears twice");
  expect_error([&] { m.prefill({0}, {{}}); }, "tokens[0] must not be empty");
  expect_error([&] { m.prefill({0}, {{int32_t(config_.vocab_size)}}); }, "outside [0, vocab_size");
  expect_error([&] { m.decode({1}, {3}); }, "is empty; prefill it first");
  expect_error([&] { m.prefill({0}, {std::vector<int32_t>(65, 1)}); }, "more than max_seq_len = 64");
  ModelOptions two_ranks;
  two_ranks.ranks = 2;
  expect_error([&] { Model(dir_, two_ranks); }, "expert parallelism");
}

INSTANTIATE_TEST_SUITE_P(Weights, ModelStep, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "fp8" : "bf16"; });

}  // namespace
}  // namespace tessera::model

namespace tessera::model {
namespace {

// Experts stored at a constant stride (one file, written in order) run on the M-grouped GEMMs; dealt
// over five files (six tensors per expert) they are not evenly spaced and run one GEMM each. Both paths round the same
// values to bf16, so the logits agree.
TEST(ModelExperts, GroupedAndPerExpertPathsAgree) {
  const Config c = tiny_config(true);
  const std::string one = make_temp_dir("grouped"), two = make_temp_dir("single");
  write_random_checkpoint(one, c, 11, 1);
  write_random_checkpoint(two, c, 11, 5);
  {
    const TensorStore s1(one), s2(two);
    EXPECT_TRUE(bind_weights(s1, c).layers[1].bank.grouped);
    EXPECT_FALSE(bind_weights(s2, c).layers[1].bank.grouped);
  }
  const std::vector<int32_t> prompt = random_tokens(30, c.vocab_size, 12);
  std::vector<std::vector<float>> logits;
  for (const std::string& dir : {one, two}) {
    Model m(dir);
    logits.push_back(m.prefill({0, 1}, {prompt, {5, 6, 7}}).logits);
    const StepOutput d = m.decode({0, 1}, {1, 2});
    logits.back().insert(logits.back().end(), d.logits.begin(), d.logits.end());
  }
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(logits[1][i])));
    max_err = std::max(max_err, std::fabs(double(logits[0][i]) - logits[1][i]));
  }
  EXPECT_GT(max_ref, 0.1);
  EXPECT_LE(max_err, 1e-3 * max_ref);
  std::filesystem::remove_all(one);
  std::filesystem::remove_all(two);
}

}  // namespace
}  // namespace tessera::model
