// Bad input to ElasticBuffer: every rank makes the same mistake, gets a clear Error(kInvalidArgument)
// before any communication, and the buffer stays usable.
#include <functional>

#include "ep_test_util.h"

namespace tessera::ep::test {
namespace {

void expect_invalid(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

class ElasticErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    R = world_group().size();
    me = world_group().rank();
    c.seed = 31;
    in = all_inputs(c, R);
    ElasticBufferConfig cfg;
    cfg.num_max_tokens_per_rank = c.num_max;
    cfg.hidden = c.hidden;
    cfg.num_topk = c.num_topk;
    cfg.num_cpu_timeout_secs = 60;
    buf = std::make_unique<ElasticBuffer>(world_ptr(), cfg);
  }
  DispatchArgs args() const {
    DispatchArgs a;
    a.x = view_x(in[size_t(me)]);
    a.topk_idx = view_idx(in[size_t(me)]);
    a.topk_weights = view_w(in[size_t(me)]);
    a.num_experts = in[0].E;
    return a;
  }
  int R = 1, me = 0;
  Config c;
  std::vector<RankInputs> in;
  std::unique_ptr<ElasticBuffer> buf;
};

TEST_F(ElasticErrors, RejectsBadInputAndStaysUsable) {
  // More tokens than num_max_tokens_per_rank.
  std::vector<uint16_t> big(size_t(c.num_max + 1) * c.hidden, 0);
  std::vector<int64_t> big_idx(size_t(c.num_max + 1) * c.num_topk, -1);
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.x = TensorView(big.data(), DType::kBF16, {int64_t(c.num_max + 1), int64_t(c.hidden)});
        a.topk_idx = TensorView(big_idx.data(), DType::kI64, {int64_t(c.num_max + 1), int64_t(c.num_topk)});
        a.topk_weights = TensorView();
        buf->dispatch(a);
      },
      "num_max_tokens_per_rank");
  // Experts not divisible by the ranks.
  if (R > 1)
    expect_invalid(
        [&] {
          DispatchArgs a = args();
          a.num_experts = in[0].E + 1;
          buf->dispatch(a);
        },
        "divisible");
  // The same expert twice in a token.
  RankInputs dup = in[size_t(me)];
  dup.idx[1] = dup.idx[0] = 3;
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.topk_idx = view_idx(dup);
        buf->dispatch(a);
      },
      "twice");
  // Expert out of range.
  RankInputs far = in[size_t(me)];
  far.idx[0] = far.E;
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.topk_idx = view_idx(far);
        buf->dispatch(a);
      },
      "topk_idx");
  // Wrong dtypes: float32 x, int32 topk_idx, float64 weights.
  std::vector<float> xf(in[size_t(me)].x.size());
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.x = TensorView(xf.data(), DType::kF32, {in[size_t(me)].T, int64_t(c.hidden)});
        buf->dispatch(a);
      },
      "'x'");
  std::vector<int32_t> idx32(in[size_t(me)].idx.size(), 0);
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.topk_idx = TensorView(idx32.data(), DType::kI32, {in[size_t(me)].T, int64_t(c.num_topk)});
        buf->dispatch(a);
      },
      "topk_idx");
  std::vector<double> w64(in[size_t(me)].w.size());
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.topk_weights = TensorView(w64.data(), DType::kF64, {in[size_t(me)].T, int64_t(c.num_topk)});
        buf->dispatch(a);
      },
      "topk_weights");
  // FP8 without scale factors; bf16 with them.
  expect_invalid(
      [&] {
        DispatchArgs a = args();
        a.x = view_x8(in[size_t(me)]);
        buf->dispatch(a);
      },
      "scale");
  // Combine: wrong row count and dtype.
  const DispatchResult d = buf->dispatch(args());
  expect_invalid(
      [&] {
        CombineArgs ca;
        ca.x = TensorView(xf.data(), DType::kF32, {1, int64_t(c.hidden)});
        buf->combine(ca, *d.handle);
      },
      "'x'");
  // Still usable: a correct dispatch matches the reference row count.
  const DispatchResult ok = buf->dispatch(args());
  EXPECT_EQ(ok.handle->num_recv_tokens, int64_t(ref_rows(in, me, R).size()));
}

TEST(ElasticConfig, RejectsBadSizes) {
  ElasticBufferConfig cfg;
  expect_invalid([&] { ElasticBuffer b(world_ptr(), cfg); }, "num_max_tokens_per_rank");
  cfg.num_bytes = 12345;
  expect_invalid([&] { ElasticBuffer b(world_ptr(), cfg); }, "2 MiB");
  EXPECT_EQ(ElasticBuffer::get_buffer_size_hint(world_group(), 128, 256, 6) % (2 << 20), 0);
}

}  // namespace
}  // namespace tessera::ep::test
