// The experimental DeepEP v2 primitives: pipeline-parallel send/recv to ring neighbours (FIFO order,
// in-flight limit, both directions, sizes, errors) and all-gather sessions (gathered values from every
// rank, batched and in-place gathers, several sessions reusing the space, errors). Runs in every
// launch shape of the ep tests, so pretend nodes exercise the MPI paths.
#include <cstring>
#include <functional>

#include "ep_test_util.h"

namespace tessera::ep::test {
namespace {

// Value j of message m from rank r: distinct for every (r, m, j).
float value(int r, int m, int64_t j) { return float(r * 100000 + m * 1000) + float(j % 997); }

ElasticBufferConfig small_config() {
  ElasticBufferConfig cfg;
  cfg.num_max_tokens_per_rank = 8;
  cfg.hidden = 64;
  cfg.num_topk = 2;
  cfg.num_cpu_timeout_secs = 60;
  return cfg;
}

void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ElasticPp, FifoToBothNeighbours) {
  const int R = world_group().size(), me = world_group().rank();
  const int next = (me + 1) % R, prev = (me + R - 1) % R;
  ElasticBuffer buf(world_ptr(), small_config());
  const int inflight = 3;
  const int64_t max_elems = 1000;
  buf.pp_set_config(max_elems * 4, inflight);
  EXPECT_EQ(ElasticBuffer::get_pp_buffer_size_hint(max_elems * 4, inflight), 4000 * 3 * 4);
  // Rounds: `inflight` tensors of different sizes to the next rank (no receive needed first: they fit
  // the ring), then the same number received from the previous rank, in order; then the other way.
  for (int dir = 0; dir < 2; ++dir) {
    const int to = dir == 0 ? next : prev, from = dir == 0 ? prev : next;
    for (int round = 0; round < 3; ++round) {
      for (int m = 0; m < inflight; ++m) {
        std::vector<float> t(size_t(1 + (m * 389 + round * 97) % max_elems));
        for (size_t j = 0; j < t.size(); ++j) t[j] = value(me, round * 10 + m, int64_t(j));
        buf.pp_send(TensorView(t.data(), DType::kF32, {int64_t(t.size())}), to);
        std::fill(t.begin(), t.end(), -1.0f);  // the tensor may be reused as soon as pp_send returns
      }
      for (int m = 0; m < inflight; ++m) {
        std::vector<float> got(size_t(1 + (m * 389 + round * 97) % max_elems), -2.0f);
        buf.pp_recv(TensorView(got.data(), DType::kF32, {int64_t(got.size())}), from);
        for (size_t j = 0; j < got.size(); ++j)
          ASSERT_EQ(got[j], value(from, round * 10 + m, int64_t(j))) << "rank " << me << " dir " << dir << " round "
                                                                     << round << " message " << m << " value " << j;
      }
    }
  }
  world_group().barrier();
}

TEST(ElasticPp, ErrorsNameTheArgument) {
  const int R = world_group().size(), me = world_group().rank();
  ElasticBuffer buf(world_ptr(), small_config());
  std::vector<float> t(64, 1.0f);
  const TensorView v(t.data(), DType::kF32, {64});
  expect_error([&] { buf.pp_send(v, (me + 1) % R); }, "pp_set_config");
  buf.pp_set_config(128, 2);
  expect_error([&] { buf.pp_send(v, (me + 1) % R); }, "num_max_tensor_bytes=128");
  if (R > 3) expect_error([&] { buf.pp_send(TensorView(t.data(), DType::kF32, {8}), (me + 2) % R); }, "dst_rank_idx");
  const TensorView strided(t.data(), DType::kF32, {8}, {2});
  expect_error([&] { buf.pp_recv(strided, (me + 1) % R); }, "contiguous");
  expect_error([&] { buf.pp_set_config(0, 2); }, "num_max_tensor_bytes");
  world_group().barrier();
}

TEST(ElasticAgrs, GathersEveryRanksTensors) {
  const int R = world_group().size(), me = world_group().rank();
  ElasticBuffer buf(world_ptr(), small_config());
  const int64_t a_elems = 24, b_rows = 5, b_cols = 16;
  buf.agrs_set_config(int64_t(R) * (a_elems * 4 + b_rows * b_cols * 2 + 4 * 64 + 64), 3);
  EXPECT_EQ(ElasticBuffer::get_agrs_buffer_size_hint(world_group(), 12345), 12345);
  for (int session = 0; session < 3; ++session) {  // later sessions reuse (overwrite) the space
    buf.create_agrs_session();
    // 1) one fp32 tensor
    std::vector<float> a(static_cast<size_t>(a_elems));
    for (int64_t j = 0; j < a_elems; ++j) a[size_t(j)] = value(me, session, j);
    AllGatherResult ra = buf.all_gather({TensorView(a.data(), DType::kF32, {a_elems})});
    // 2) batched: a bf16 matrix and, through the in-place slots, 64 bytes
    std::vector<OwnedTensor> slots = buf.agrs_get_inplace_tensor({b_rows * b_cols * 2, 64});
    ASSERT_EQ(slots.size(), 2u);
    std::vector<uint16_t> b(static_cast<size_t>(b_rows * b_cols));
    for (size_t j = 0; j < b.size(); ++j) b[j] = uint16_t(me * 1000 + session * 100 + int(j));
    uint8_t* small = slots[1].view.ptr<uint8_t>();
    for (int j = 0; j < 64; ++j) small[j] = uint8_t(me * 7 + session * 3 + j);
    std::memcpy(slots[0].view.data, b.data(), b.size() * 2);
    AllGatherResult rb = buf.all_gather({TensorView(slots[0].view.data, DType::kBF16, {b_rows, b_cols}),
                                         TensorView(small, DType::kU8, {64})});
    ra.event.wait();
    rb.event.wait();
    ASSERT_EQ(ra.gathered.size(), 1u);
    ASSERT_EQ(rb.gathered.size(), 2u);
    const TensorView& ga = ra.gathered[0].view;
    ASSERT_EQ(ga.ndim, 2);
    EXPECT_EQ(ga.shape[0], R);
    EXPECT_EQ(ga.shape[1], a_elems);
    EXPECT_EQ(ga.dtype, DType::kF32);
    const TensorView& gb = rb.gathered[0].view;
    ASSERT_EQ(gb.ndim, 3);
    EXPECT_EQ(gb.shape[1], b_rows);
    EXPECT_EQ(gb.shape[2], b_cols);
    for (int r = 0; r < R; ++r) {
      for (int64_t j = 0; j < a_elems; ++j)
        ASSERT_EQ(ga.ptr<float>()[r * a_elems + j], value(r, session, j)) << "rank " << me << " from " << r;
      for (int64_t j = 0; j < b_rows * b_cols; ++j)
        ASSERT_EQ(gb.ptr<uint16_t>()[r * b_rows * b_cols + j], uint16_t(r * 1000 + session * 100 + int(j)))
            << "rank " << me << " from " << r;
      for (int j = 0; j < 64; ++j)
        ASSERT_EQ(rb.gathered[1].view.ptr<uint8_t>()[r * 64 + j], uint8_t(r * 7 + session * 3 + j))
            << "rank " << me << " from " << r;
    }
    buf.destroy_agrs_session();
  }
  world_group().barrier();
}

TEST(ElasticAgrs, ErrorsNameTheRule) {
  const int R = world_group().size();
  ElasticBuffer buf(world_ptr(), small_config());
  std::vector<float> a(8, 1.0f);
  const TensorView v(a.data(), DType::kF32, {8});
  expect_error([&] { buf.create_agrs_session(); }, "agrs_set_config");
  buf.agrs_set_config(int64_t(R) * 64, 1);
  expect_error([&] { buf.all_gather({v}); }, "no AGRS session");
  buf.create_agrs_session();
  expect_error([&] { buf.create_agrs_session(); }, "already active");
  expect_error([&] { buf.all_gather({TensorView(a.data(), DType::kF32, {7})}); }, "multiple of 32");
  expect_error([&] { buf.all_gather({TensorView(a.data(), DType::kF32, {2, 4}, {8, 1})}); }, "contiguous");
  std::vector<float> big(64, 0.0f);
  expect_error([&] { buf.all_gather({TensorView(big.data(), DType::kF32, {64})}); }, "num_max_session_bytes");
  AllGatherResult ok = buf.all_gather({TensorView(a.data(), DType::kF32, {8})});
  ok.event.wait();
  expect_error([&] { buf.all_gather({v}); }, "num_max_all_gathers_per_session=1");
  buf.destroy_agrs_session();
  expect_error([&] { buf.destroy_agrs_session(); }, "no AGRS session");
  world_group().barrier();
}

}  // namespace
}  // namespace tessera::ep::test
