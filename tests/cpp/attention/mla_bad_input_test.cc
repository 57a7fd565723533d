// Bad input to every public FlashMLA entry point: a clear error naming the function, the argument and
// the rule, and outputs left exactly as they were.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

using flash_mla::KvcacheInputs;

// Views and integer arrays a case creates, alive until the call returns.
struct Keep {
  std::deque<TensorView> views;
  std::deque<std::vector<int32_t>> ints;
  // A copy of `v` (to modify) whose data, when `values` is given, is a new int32 array.
  TensorView* copy(const TensorView& v, std::vector<int32_t> values = {}) {
    views.push_back(v);
    if (!values.empty()) {
      ints.push_back(std::move(values));
      views.back().data = ints.back().data();
    }
    return &views.back();
  }
};

struct BadCase {
  const char* name;
  std::function<void(KvcacheInputs&, Keep&)> mutate;
  std::vector<std::string> needles;
};

void expect_refused(const char* kind, const std::vector<BadCase>& cases, const std::function<KvcacheInputs()>& fresh,
                    Buffer* out, Buffer* lse) {
  const std::vector<uint8_t> out_before = out->bytes, lse_before = lse->bytes;
  for (const BadCase& c : cases) {
    KvcacheInputs in = fresh();
    Keep keep;
    c.mutate(in, keep);
    flash_mla::SchedMeta meta;
    try {
      flash_mla::flash_mla_with_kvcache(in, meta, out->view, lse->view);
      ADD_FAILURE() << kind << " / " << c.name << ": did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << kind << " / " << c.name << ": " << e.what();
      for (const std::string& n : c.needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << kind << " / " << c.name << ": " << e.what();
    }
    EXPECT_TRUE(out->bytes == out_before && lse->bytes == lse_before) << kind << " / " << c.name << ": outputs written";
  }
}

TEST(MlaBadInput, DenseDecode) {
  Rng rng = Rng::for_current_test();
  DenseProblem p;
  p.b = 2;
  p.lens = {70, 10};
  p.build(rng);
  const std::vector<BadCase> cases = {
      {"q int32", [](KvcacheInputs& in, Keep&) { in.q.dtype = DType::kI32; }, {"'q'", "dtype"}},
      {"q 3-D", [](KvcacheInputs& in, Keep&) { in.q.ndim = 3; }, {"'q'"}},
      {"k_cache fp16 with bf16 q",
       [](KvcacheInputs& in, Keep&) { in.k_cache.dtype = DType::kF16; },
       {"'k_cache'", "dtype"}},
      {"head_dim mismatch", [](KvcacheInputs& in, Keep&) { in.k_cache.shape[3] = 512; }, {"'k_cache'", "head_dim"}},
      {"h_q not a multiple of h_k", [](KvcacheInputs& in, Keep&) { in.k_cache.shape[2] = 3; }, {"num_heads_k"}},
      {"head_dim_v too large", [](KvcacheInputs& in, Keep&) { in.head_dim_v = 600; }, {"'head_dim_v'"}},
      {"no block_table", [](KvcacheInputs& in, Keep&) { in.block_table = nullptr; }, {"'block_table'"}},
      {"cache_seqlens too long",
       [](KvcacheInputs& in, Keep& keep) {
         in.cache_seqlens = keep.copy(*in.cache_seqlens, {70, INT32_MAX});
       },
       {"cache_seqlens[1]", "max_num_blocks"}},
      {"negative cache_seqlens",
       [](KvcacheInputs& in, Keep& keep) {
         in.cache_seqlens = keep.copy(*in.cache_seqlens, {-1, 10});
       },
       {"cache_seqlens[0]"}},
      {"block id out of range",
       [](KvcacheInputs& in, Keep& keep) {
         const int32_t* bt = static_cast<const int32_t*>(in.block_table->data);
         std::vector<int32_t> copy(bt, bt + in.block_table->numel());
         copy[1] = 1000;  // request 0, block 1: holds tokens 64..69
         in.block_table = keep.copy(*in.block_table, copy);
       },
       {"block_table[0, 1] = 1000"}},
      {"sparse-only argument", [&](KvcacheInputs& in, Keep&) { in.attn_sink = &p.lse.view; }, {"'attn_sink'", "dense"}},
      {"NaN softmax_scale", [](KvcacheInputs& in, Keep&) { in.softmax_scale = std::nan(""); }, {"'softmax_scale'"}},
  };
  expect_refused(
      "dense", cases, [&] { return p.inputs(); }, &p.out, &p.lse);

  // Output checks: wrong shape, wrong dtype, aliasing q.
  const std::vector<uint8_t> before = p.out.bytes;
  TensorView small = p.out.view;
  small.shape[3] = 256;
  flash_mla::SchedMeta meta;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(p.inputs(), meta, small, p.lse.view); },
                             {"'out'", "head_dim_v"}));
  TensorView aliased = p.q.view;
  aliased.shape[3] = 512;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_mla_with_kvcache(p.inputs(), meta, aliased, p.lse.view); },
                             {"'out'", "'q'"}));
  EXPECT_TRUE(p.out.bytes == before);

  KvcacheInputs fp8 = p.inputs();
  fp8.is_fp8_kvcache = true;
  EXPECT_TRUE(throws_error([&] { flash_mla::flash_mla_with_kvcache(fp8, meta, p.out.view, p.lse.view); },
                           ErrorCode::kNotImplemented, {"FP8"}));
}

TEST(MlaBadInput, SparseDecode) {
  Rng rng = Rng::for_current_test();
  SparseProblem p;
  p.b = 2;
  p.topk = 64;
  p.with_extra = true;
  p.with_topk_length = true;
  p.build(rng);
  const std::vector<BadCase> cases = {
      {"not fp8", [](KvcacheInputs& in, Keep&) { in.is_fp8_kvcache = false; }, {"'is_fp8_kvcache'"}},
      {"causal", [](KvcacheInputs& in, Keep&) { in.causal = true; }, {"'causal'"}},
      {"bytes per token", [](KvcacheInputs& in, Keep&) { in.k_cache.shape[3] = 600; }, {"'k_cache'", "656"}},
      {"two kv heads", [](KvcacheInputs& in, Keep&) { in.k_cache.shape[2] = 2; }, {"'k_cache'", "num_heads_k"}},
      {"q head_dim for V32", [](KvcacheInputs& in, Keep&) { in.q.shape[3] = 512; }, {"'q'", "576"}},
      {"q fp16", [](KvcacheInputs& in, Keep&) { in.q.dtype = DType::kF16; }, {"'q'", "dtype"}},
      {"indices int64",
       [](KvcacheInputs& in, Keep& keep) {
         TensorView* v = keep.copy(*in.indices);
         v->dtype = DType::kI64;
         in.indices = v;
       },
       {"'indices'", "dtype"}},
      {"indices batch",
       [](KvcacheInputs& in, Keep& keep) {
         TensorView* v = keep.copy(*in.indices);
         v->shape[0] = 1;
         in.indices = v;
       },
       {"'indices'", "batch_size"}},
      {"topk_length above topk",
       [](KvcacheInputs& in, Keep& keep) {
         in.topk_length = keep.copy(*in.topk_length, {3, 65});
       },
       {"topk_length[1] = 65"}},
      {"extra cache without indices",
       [](KvcacheInputs& in, Keep&) { in.extra_indices_in_kvcache = nullptr; },
       {"'extra_k_cache'", "together"}},
      {"extra cache in the other layout",
       [](KvcacheInputs& in, Keep& keep) {
         TensorView* v = keep.copy(*in.extra_k_cache);
         v->shape[3] = 584;
         v->strides[1] = 584;
         in.extra_k_cache = v;
       },
       {"'extra_k_cache'", "layout"}},
      {"attn_sink shape", [&](KvcacheInputs& in, Keep&) { in.attn_sink = &p.lse.view; }, {"'attn_sink'"}},
      {"head_dim_v", [](KvcacheInputs& in, Keep&) { in.head_dim_v = 256; }, {"'head_dim_v'", "512"}},
  };
  expect_refused(
      "sparse", cases, [&] { return p.inputs(); }, &p.out, &p.lse);
}

TEST(MlaBadInput, SparsePrefill) {
  Rng rng = Rng::for_current_test();
  PrefillProblem p;
  p.s_q = 2;
  p.s_kv = 50;
  p.topk = 16;
  p.build(rng);
  const std::vector<uint8_t> before = p.out.bytes;
  auto run = [&](const flash_mla::SparsePrefillInputs& in) {
    flash_mla::flash_mla_sparse_fwd(in, p.out.view, p.max_logits.view, p.lse.view);
  };
  flash_mla::SparsePrefillInputs in = p.inputs();
  in.kv.shape[2] = 512;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"flash_mla_sparse_fwd", "'kv'", "d_qk"}));
  in = p.inputs();
  in.indices.shape[1] = 2;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"'indices'", "h_kv"}));
  in = p.inputs();
  in.d_v = 1000;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"'d_v'"}));
  in = p.inputs();
  in.sm_scale = INFINITY;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"'sm_scale'"}));
  TensorView lse_wrong = p.lse.view;
  lse_wrong.dtype = DType::kBF16;
  EXPECT_TRUE(throws_invalid(
      [&] { flash_mla::flash_mla_sparse_fwd(p.inputs(), p.out.view, p.max_logits.view, lse_wrong); }, {"'lse'"}));
  EXPECT_TRUE(p.out.bytes == before);
}

TEST(MlaBadInput, Quantiser) {
  Rng rng = Rng::for_current_test();
  Buffer k = make_buffer(DType::kBF16, {2, 4, 1, 576});
  fill_normal(&k, rng);
  std::vector<uint8_t> out(2 * 4 * 656, 0x5A);
  const std::vector<uint8_t> before = out;
  const TensorView ov(out.data(), DType::kU8, {2, 4, 1, 656});
  EXPECT_TRUE(throws_invalid([&] { flash_mla::quantize_k_cache(k.view, flash_mla::KvCacheLayout::kModel1, ov); },
                             {"quantize_k_cache", "'input_k_cache'", "512"}));
  const TensorView short_out(out.data(), DType::kU8, {1, 4, 1, 656});
  EXPECT_TRUE(throws_invalid([&] { flash_mla::quantize_k_cache(k.view, flash_mla::KvCacheLayout::kV32, short_out); },
                             {"num_blocks"}));
  TensorView f32_in = k.view;
  f32_in.dtype = DType::kF32;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::quantize_k_cache(f32_in, flash_mla::KvCacheLayout::kV32, ov); },
                             {"'input_k_cache'", "dtype"}));
  EXPECT_TRUE(out == before);
}

}  // namespace
}  // namespace tessera::test
