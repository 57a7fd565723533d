// The Model's ExpertExchange contract without MPI: a one-rank loopback exchange (grouping the lanes by
// expert in reverse token order, as a receiving rank may order them differently) must give the same
// bits as the built-in one-rank path; empty steps, the exchange's token limit and option mismatches.
// The multi-rank runs are tests/mpi/model_ep_test.sh.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "checkpoint_writer.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/model.h"

namespace tessera::model {
namespace {

using testing::make_temp_dir;
using testing::tiny_config;
using testing::write_random_checkpoint;

class LoopbackExchange final : public ExpertExchange {
 public:
  explicit LoopbackExchange(int64_t max_tokens, int ranks = 1) : max_tokens_(max_tokens), ranks_(ranks) {}
  int rank() const override { return 0; }
  int ranks() const override { return ranks_; }
  int64_t max_tokens() const override { return max_tokens_; }

  void exchange(const RoutedTokens& t, const LocalExperts& run_local, uint16_t* out) override {
    ++calls;
    rows_seen.push_back(t.rows);
    const int64_t dim = t.dim, sk = dim / 128, lanes = t.rows * t.topk;
    ExpertRows r;
    r.rows = lanes;
    r.dim = dim;
    r.begin.assign(size_t(t.num_experts + 1), 0);
    std::vector<int64_t> lane_of_row;
    for (int64_t e = 0; e < t.num_experts; ++e) {
      for (int64_t i = lanes - 1; i >= 0; --i)
        if (t.experts[i] == e) lane_of_row.push_back(i);
      r.begin[size_t(e) + 1] = int64_t(lane_of_row.size());
    }
    std::vector<uint8_t> codes(size_t(lanes * dim));
    std::vector<float> scales(size_t(lanes * sk)), weights(static_cast<size_t>(lanes));
    std::vector<uint16_t> bf16(size_t(lanes * dim)), y(size_t(lanes * dim));
    std::vector<int64_t> row_of_lane(static_cast<size_t>(lanes));
    for (int64_t row = 0; row < lanes; ++row) {
      const int64_t lane = lane_of_row[size_t(row)], tok = lane / t.topk;
      row_of_lane[size_t(lane)] = row;
      weights[size_t(row)] = t.weights[lane];
      if (t.codes) {
        std::copy_n(t.codes + tok * dim, dim, codes.data() + row * dim);
        std::copy_n(t.scales + tok * sk, sk, scales.data() + row * sk);
      } else {
        std::copy_n(t.bf16 + tok * dim, dim, bf16.data() + row * dim);
      }
    }
    r.codes = t.codes ? codes.data() : nullptr;
    r.scales = t.codes ? scales.data() : nullptr;
    r.bf16 = t.codes ? nullptr : bf16.data();
    r.weights = weights.data();
    r.out = y.data();
    run_local(r);
    for (int64_t tok = 0; tok < t.rows; ++tok)
      for (int64_t j = 0; j < dim; ++j) {
        float acc = 0.0f;
        for (int64_t k = 0; k < t.topk; ++k)
          acc += bf16_to_f32(y[size_t(row_of_lane[size_t(tok * t.topk + k)] * dim + j)]);
        out[tok * dim + j] = f32_to_bf16(acc);
      }
  }

  int calls = 0;
  std::vector<int64_t> rows_seen;

 private:
  int64_t max_tokens_;
  int ranks_;
};

std::vector<int32_t> tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = int32_t(gen() % uint64_t(vocab));
  return t;
}

template <class Fn>
void expect_error(Fn&& fn, const char* needle, ErrorCode code) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class ModelExchange : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir(GetParam() ? "xfp8" : "xbf16");
    ASSERT_FALSE(dir_.empty());
    config_ = tiny_config(GetParam());
    config_.n_layers = 3;          // two MoE layers
    config_.n_limited_groups = 2;  // experts of both groups
    write_random_checkpoint(dir_, config_, 11, 1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  Config config_;
};

// Prefill of 3 prompts (one longer than index_topk) and 2 decode steps: logits and hidden states equal
// bit for bit with and without the loopback exchange, which runs once per MoE layer and step.
TEST_P(ModelExchange, LoopbackMatchesOneRank) {
  const std::vector<std::vector<int32_t>> prompts = {
      tokens(21, config_.vocab_size, 1), tokens(4, config_.vocab_size, 2), tokens(9, config_.vocab_size, 3)};
  std::vector<std::vector<float>> runs[2];
  auto loopback = std::make_shared<LoopbackExchange>(64);
  for (int with : {0, 1}) {
    ModelOptions opt;
    if (with) opt.exchange = loopback;
    Model m(dir_, opt);
    StepOutput s = m.prefill({0, 1, 2}, prompts, false, true);
    runs[with] = {s.logits, s.hidden};
    for (int step = 0; step < 2; ++step) {
      s = m.decode({0, 1, 2}, argmax_rows(s.logits.data(), s.rows, config_.vocab_size), true);
      runs[with].push_back(s.logits);
      runs[with].push_back(s.hidden);
    }
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    ASSERT_EQ(runs[0][i].size(), runs[1][i].size());
    EXPECT_EQ(std::memcmp(runs[0][i].data(), runs[1][i].data(), runs[0][i].size() * 4), 0) << "output " << i;
  }
  EXPECT_EQ(loopback->calls, 3 * 2);  // 3 steps x 2 MoE layers
  EXPECT_EQ(loopback->rows_seen.front(), 21 + 4 + 9);
  EXPECT_EQ(loopback->rows_seen.back(), 3);
}

// An expert-parallel rank without sequences still joins every MoE layer's exchange, with zero tokens.
TEST_P(ModelExchange, EmptyStepJoinsTheExchange) {
  auto loopback = std::make_shared<LoopbackExchange>(64);
  ModelOptions opt;
  opt.exchange = loopback;
  Model m(dir_, opt);
  const StepOutput p = m.prefill({}, {});
  EXPECT_EQ(p.rows, 0);
  EXPECT_TRUE(m.generate({}, 3).empty());
  EXPECT_EQ(loopback->calls, 2 + 3 * 2);  // the prefill, then generate's prefill and 2 decode steps
  for (int64_t rows : loopback->rows_seen) EXPECT_EQ(rows, 0);
  Model plain(dir_);
  expect_error([&] { plain.prefill({}, {}); }, "'seq_ids' must not be empty", ErrorCode::kInvalidArgument);
}

TEST_P(ModelExchange, BadOptionsAndStepsNameTheRule) {
  ModelOptions opt;
  opt.exchange = std::make_shared<LoopbackExchange>(4);
  Model m(dir_, opt);
  expect_error([&] { m.prefill({0}, {tokens(5, config_.vocab_size, 4)}); },
               "exceeds the expert exchange's max_tokens = 4", ErrorCode::kInvalidArgument);
  opt.ranks = 2;
  expect_error([&] { Model(dir_, opt); }, "differs from the exchange's 1 ranks", ErrorCode::kInvalidArgument);
  opt.ranks = 1;
  opt.exchange = std::make_shared<LoopbackExchange>(4, 3);  // 8 experts over 3 ranks
  expect_error([&] { Model(dir_, opt); }, "must be a multiple of the expert-parallel ranks (3)",
               ErrorCode::kInvalidArgument);
  opt.exchange = nullptr;
  opt.ranks = 2;
  expect_error([&] { Model(dir_, opt); }, "without an expert exchange", ErrorCode::kNotImplemented);
}

INSTANTIATE_TEST_SUITE_P(Weights, ModelExchange, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "fp8" : "bf16"; });

}  // namespace
}  // namespace tessera::model
