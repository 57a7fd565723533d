// Bad arguments to the MQA logits: a clear error naming the argument and rule, and untouched logits.
#include <gtest/gtest.h>

#include <functional>

#include "tessera/mqa_logits.h"
#include "test_util.h"

namespace tessera::test {
namespace {

constexpr int64_t S = 4, SKV = 40, H = 8, D = 64;

struct Prefill {
  std::vector<uint8_t> q = std::vector<uint8_t>(S * H * D, 0x38), kv = std::vector<uint8_t>(SKV * D, 0x38);
  std::vector<float> kv_sf = std::vector<float>(SKV, 1.0f), w = std::vector<float>(S * H, 1.0f);
  std::vector<int32_t> ks = std::vector<int32_t>(S, 0), ke = std::vector<int32_t>(S, SKV);
  std::vector<float> out = std::vector<float>(S * SKV, -7.0f);
  TensorView qv() { return TensorView(q.data(), DType::kF8E4M3, {S, H, D}); }
  TensorView kvv() { return TensorView(kv.data(), DType::kF8E4M3, {SKV, D}); }
  TensorView sfv() { return TensorView(kv_sf.data(), DType::kF32, {SKV}); }
  TensorView wv() { return TensorView(w.data(), DType::kF32, {S, H}); }
  TensorView ksv() { return TensorView(ks.data(), DType::kI32, {S}); }
  TensorView kev() { return TensorView(ke.data(), DType::kI32, {S}); }
  TensorView outv() { return TensorView(out.data(), DType::kF32, {S, SKV}); }
  void run(const TensorView& q_, const TensorView& kv_, const TensorView& sf_, const TensorView& w_,
           const TensorView& out_, bool clean = true, int64_t max_k = 0) {
    attention::fp8_fp4_mqa_logits(q_, nullptr, kv_, sf_, w_, ksv(), kev(), out_, clean, max_k);
  }
  bool untouched() const {
    for (float v : out)
      if (v != -7.0f) return false;
    return true;
  }
};

void expect_rejected(const std::function<void(Prefill&)>& call, std::initializer_list<std::string> needles) {
  Prefill p;
  EXPECT_TRUE(throws_invalid([&] { call(p); }, needles));
  EXPECT_TRUE(p.untouched()) << "logits were written before the error";
}

TEST(MqaBadInput, Prefill) {
  expect_rejected(
      [](Prefill& p) {
        p.run(TensorView(p.q.data(), DType::kF8E4M3, {S, H, 96}), p.kvv(), p.sfv(), p.wv(), p.outv());
      },
      {"'q'", "head_dim"});
  expect_rejected(
      [](Prefill& p) {
        p.run(TensorView(p.q.data(), DType::kBF16, {S, H, D}), p.kvv(), p.sfv(), p.wv(), p.outv());
      },
      {"'q'", "dtype"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), TensorView(p.kv.data(), DType::kF8E4M3, {SKV, 32}), p.sfv(), p.wv(), p.outv());
      },
      {"'kv'", "head_dim"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), TensorView(p.kv.data(), DType::kF8E4M3, {SKV / 2, D}, {D, 2}), p.sfv(), p.wv(), p.outv());
      },
      {"'kv'", "stride(1) == 1"});
  expect_rejected(
      [](Prefill& p) { p.run(p.qv(), p.kvv(), TensorView(p.kv_sf.data(), DType::kI32, {SKV}), p.wv(), p.outv()); },
      {"'kv_sf'", "dtype"});
  expect_rejected(
      [](Prefill& p) { p.run(p.qv(), p.kvv(), TensorView(p.kv_sf.data(), DType::kF32, {SKV - 1}), p.wv(), p.outv()); },
      {"'kv_sf'"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), p.kvv(), p.sfv(), TensorView(p.w.data(), DType::kF32, {S, H - 1}), p.outv());
      },
      {"'weights'", "num_heads"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), p.kvv(), p.sfv(), TensorView(p.w.data(), DType::kBF16, {S, H}), p.outv());
      },
      {"'weights'", "bfloat16"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), p.kvv(), p.sfv(), p.wv(), TensorView(p.out.data(), DType::kF32, {S, SKV - 1}));
      },
      {"'logits'", "seq_len_kv"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), p.kvv(), p.sfv(), p.wv(), TensorView(p.out.data(), DType::kF32, {S, 10}), true, 10);
      },
      {"'clean_logits'", "compressed"});
  expect_rejected(
      [](Prefill& p) {
        p.ke[2] = 20;  // range 20 > max_seqlen_k 10
        p.run(p.qv(), p.kvv(), p.sfv(), p.wv(), TensorView(p.out.data(), DType::kF32, {S, 10}), false, 10);
      },
      {"compressed", "ke[0] = 40"});
  expect_rejected(
      [](Prefill& p) {
        p.run(p.qv(), p.kvv(), p.sfv(), p.wv(), TensorView(p.q.data(), DType::kF32, {S, SKV}));
      },
      {"'logits'", "overlap"});
  expect_rejected(
      [](Prefill& p) {
        attention::fp8_fp4_mqa_logits(TensorView(p.q.data(), DType::kI8, {S, H, D / 2}), nullptr,
                                      TensorView(p.kv.data(), DType::kI8, {SKV, D / 2}), p.sfv(), p.wv(), p.ksv(),
                                      p.kev(), p.outv(), true, 0);
      },
      {"'q'", "FP4", "q_sf"});
}

struct Paged {
  static constexpr int64_t B = 2, BLK = 8, NB = 6;
  std::vector<uint8_t> q = std::vector<uint8_t>(B * H * D, 0x38), cache = std::vector<uint8_t>(NB * BLK * (D + 4), 0);
  std::vector<float> w = std::vector<float>(B * H, 1.0f);
  std::vector<int32_t> lens = {10, 3}, table = {0, 1, 2, 3};
  std::vector<int32_t> meta = {0, 0, 0, 1, 2, 0};  // get_paged_mqa_logits_metadata(lens, BLK, 2)
  std::vector<float> out = std::vector<float>(B * 16, -7.0f);
  void run(int64_t max_len = 16, const TensorView* indices = nullptr) {
    attention::fp8_fp4_paged_mqa_logits(
        TensorView(q.data(), DType::kF8E4M3, {B, 1, H, D}), nullptr,
        TensorView(cache.data(), DType::kU8, {NB, BLK, 1, D + 4}), TensorView(w.data(), DType::kF32, {B, H}),
        TensorView(lens.data(), DType::kI32, {B}), TensorView(table.data(), DType::kI32, {B, 2}),
        TensorView(meta.data(), DType::kI32, {3, 2}), TensorView(out.data(), DType::kF32, {B, max_len}), max_len, true,
        indices);
  }
  bool untouched() const {
    for (float v : out)
      if (v != -7.0f) return false;
    return true;
  }
};

TEST(MqaBadInput, Paged) {
  {
    Paged p;
    p.table[1] = 6;  // page 1 of request 0 is read (10 tokens, block 8) and is out of range
    EXPECT_TRUE(throws_invalid([&] { p.run(); }, {"'block_table'", "[0, 1] = 6"}));
    EXPECT_TRUE(p.untouched());
  }
  {
    Paged p;
    p.table[3] = -1;  // request 1 needs one page: entry [1, 1] is never read, so it may hold anything
    p.run();
    EXPECT_FALSE(p.untouched());
  }
  {
    Paged p;
    p.lens[0] = 17;  // needs 3 pages, the table has 2 columns
    EXPECT_TRUE(throws_invalid([&] { p.run(32); }, {"'block_table'", "needs 3 pages"}));
  }
  {
    Paged p;
    p.lens[1] = -2;
    EXPECT_TRUE(throws_invalid([&] { p.run(); }, {"'context_lens'", ">= 0"}));
    EXPECT_TRUE(p.untouched());
  }
  {
    Paged p;
    EXPECT_TRUE(throws_invalid([&] { p.run(8); }, {"max_context_len"}));
  }
  {
    Paged p;
    p.meta[3] = 0;  // a schedule computed for other lengths
    EXPECT_TRUE(
        throws_invalid([&] { p.run(); }, {"'schedule_meta' does not match", "entry 1 is (0, 0), expected (0, 1)"}));
    EXPECT_TRUE(p.untouched());
  }
  {
    Paged p;
    std::vector<int32_t> idx = {0, 1};
    const TensorView iv(idx.data(), DType::kI32, {2});
    EXPECT_TRUE(throws_error([&] { p.run(16, &iv); }, ErrorCode::kNotImplemented, {"'indices'"}));
    EXPECT_TRUE(p.untouched());
  }
  {
    std::vector<int32_t> lens = {4, 4};
    std::vector<int32_t> meta(4);
    EXPECT_TRUE(throws_invalid(
        [&] {
          attention::get_paged_mqa_logits_metadata(TensorView(lens.data(), DType::kI32, {2}), 8, 2,
                                                   TensorView(meta.data(), DType::kI32, {2, 2}));
        },
        {"'out'", "num_sms + 1"}));
  }
}

}  // namespace
}  // namespace tessera::test
