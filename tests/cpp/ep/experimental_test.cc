// The experimental DeepEP v2 primitives: pipeline-parallel send/recv to ring neighbours (FIFO order,
// in-flight limit, both directions, sizes, errors), all-gather sessions (gathered values from every
// rank, batched and in-place gathers, several sessions reusing the space, errors) and Engram storage
// (fetched entries and scale packs from every rank, re-writes, errors). Runs in every launch shape of
// the ep tests, so pretend nodes exercise the MPI paths (and Engram's not-implemented error there).
#include <cstring>
#include <functional>

#include "ep_test_util.h"

namespace tessera::ep::test {
namespace {

// Value j of message m from rank r: distinct for every (r, m, j).
float value(int r, int m, int64_t j) {
  return float(r * 100000 + m * 1000) + float(j % 997);
}

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
          ASSERT_EQ(got[j], value(from, round * 10 + m, int64_t(j)))
              << "rank " << me << " dir " << dir << " round " << round << " message " << m << " value " << j;
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
    AllGatherResult rb = buf.all_gather(
        {TensorView(slots[0].view.data, DType::kBF16, {b_rows, b_cols}), TensorView(small, DType::kU8, {64})});
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

uint16_t entry_value(int rank, int64_t e, int64_t h, int round) {
  return uint16_t(rank * 4099 + e * 131 + h * 7 + round);
}

TEST(ElasticEngram, FetchesEntriesOfEveryRank) {
  const int R = world_group().size(), me = world_group().rank();
  const bool one_node = world_group().topology().num_nodes == 1;
  ElasticBuffer buf(world_ptr(), small_config());
  std::vector<int32_t> idx0 = {0};
  expect_error([&] { buf.engram_fetch(TensorView(idx0.data(), DType::kI32, {1})); }, "engram_write");
  EXPECT_EQ(ElasticBuffer::get_engram_storage_size_hint(100, 7168, 64), (7168 * 2) * 164);
  EXPECT_EQ(ElasticBuffer::get_engram_storage_size_hint(100, 7168, 64, DType::kF8E4M3), (7168 + 224 * 4) * 164);
  for (int round = 0; round < 2; ++round) {  // the second round writes another shape (new segments)
    const int64_t E = 10 + round, H = 48 + 16 * round, packs = 2;
    std::vector<uint16_t> storage(static_cast<size_t>(E * H));
    std::vector<int32_t> sf(static_cast<size_t>(E * packs));
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t h = 0; h < H; ++h) storage[size_t(e * H + h)] = entry_value(me, e, h, round);
      for (int64_t p = 0; p < packs; ++p) sf[size_t(e * packs + p)] = int32_t(me * 1000 + e * 10 + p + round);
    }
    const TensorView sv(storage.data(), DType::kBF16, {E, H}), fv(sf.data(), DType::kI32, {E, packs});
    if (!one_node) {
      try {
        buf.engram_write(sv, fv);
        ADD_FAILURE() << "engram_write across nodes should be not implemented";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kNotImplemented) << e.what();
      }
      break;
    }
    buf.engram_write(sv, fv);
    const int64_t T = 7, P = 3;
    std::vector<int32_t> idx(static_cast<size_t>(T * P));
    for (size_t i = 0; i < idx.size(); ++i)
      idx[i] = int32_t((i * 37 + size_t(me) * 11 + size_t(round)) % size_t(E * R));
    const EngramFetchResult got = buf.engram_fetch(TensorView(idx.data(), DType::kI32, {T, P}));
    ASSERT_EQ(got.data.view.shape[0], T);
    ASSERT_EQ(got.data.view.shape[1], P * H);
    ASSERT_TRUE(got.sf.defined());
    for (int64_t i = 0; i < T; ++i)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t g = idx[size_t(i * P + p)], owner = g / E, e = g % E;
        for (int64_t h = 0; h < H; ++h)
          ASSERT_EQ(got.data.view.ptr<uint16_t>()[(i * P + p) * H + h], entry_value(int(owner), e, h, round))
              << "rank " << me << " token " << i << " entry " << g;
        for (int64_t q = 0; q < packs; ++q)
          ASSERT_EQ(got.sf.view.ptr<int32_t>()[(i * P + p) * packs + q], int32_t(owner * 1000 + e * 10 + q + round));
      }
    // One entry per token ([T] indices), and bad indices.
    std::vector<int32_t> one = {int32_t(E * R - 1), 0};
    const EngramFetchResult single = buf.engram_fetch(TensorView(one.data(), DType::kI32, {2}));
    EXPECT_EQ(single.data.view.shape[1], H);
    EXPECT_EQ(single.data.view.ptr<uint16_t>()[0], entry_value(R - 1, E - 1, 0, round));
    std::vector<int32_t> bad = {int32_t(E * R)};
    expect_error([&] { buf.engram_fetch(TensorView(bad.data(), DType::kI32, {1})); }, "indices");
  }
  // Ranks that disagree on the shape all get the error.
  std::vector<uint16_t> storage(size_t(16 * (me == 0 ? 9 : 8)), 0);
  const TensorView sv(storage.data(), DType::kBF16, {me == 0 ? 9 : 8, 16});
  if (R > 1) expect_error([&] { buf.engram_write(sv); }, "same shape");
  world_group().barrier();
}

}  // namespace
}  // namespace tessera::ep::test
