// flash_attn_varlen_fwd (dense MHA prefill forward) against float64: varlen requests (zero-length ones
// included), causal bottom-right with more queries than keys, MHA and GQA, (d_qk, d_v) = (192, 128) and
// (128, 128), fp16, strided q; bitwise determinism across thread counts; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

struct VarlenProblem {
  std::vector<int> q_lens, kv_lens;
  int h_q = 16, h_kv = 16, d_qk = 192, d_v = 128;
  bool causal = true, strided_q = false;
  DType dtype = DType::kBF16;
  Buffer q, k, v, cu_q, cu_kv, out, lse;
  int total_q = 0, total_kv = 0;

  void build(Rng& rng) {
    total_q = std::accumulate(q_lens.begin(), q_lens.end(), 0);
    total_kv = std::accumulate(kv_lens.begin(), kv_lens.end(), 0);
    q = make_buffer(dtype, {total_q, h_q, d_qk}, strided_q ? d_qk + 8 : 0);
    k = make_buffer(dtype, {total_kv, h_kv, d_qk});
    v = make_buffer(dtype, {total_kv, h_kv, d_v});
    fill_normal(&q, rng);
    fill_normal(&k, rng);
    fill_normal(&v, rng);
    const int b = int(q_lens.size());
    cu_q = make_buffer(DType::kI32, {b + 1});
    cu_kv = make_buffer(DType::kI32, {b + 1});
    int32_t* cq = reinterpret_cast<int32_t*>(cu_q.bytes.data());
    int32_t* ck = reinterpret_cast<int32_t*>(cu_kv.bytes.data());
    for (int i = 0; i < b; ++i) {
      cq[i + 1] = cq[i] + q_lens[size_t(i)];
      ck[i + 1] = ck[i] + kv_lens[size_t(i)];
    }
    out = make_buffer(dtype, {total_q, h_q, d_v});
    lse = make_buffer(DType::kF32, {total_q, h_q});
    fill_poison(&out.bytes, DType::kBF16);
    fill_poison(&lse.bytes, DType::kF32);
  }

  flash_mla::VarlenInputs inputs() const {
    flash_mla::VarlenInputs in;
    in.q = q.view;
    in.k = k.view;
    in.v = v.view;
    in.cu_seqlens_qo = cu_q.view;
    in.cu_seqlens_kv = cu_kv.view;
    in.max_seqlen_qo = *std::max_element(q_lens.begin(), q_lens.end());
    in.max_seqlen_kv = *std::max_element(kv_lens.begin(), kv_lens.end());
    in.causal = causal;
    return in;
  }

  ::testing::AssertionResult check() const {
    const std::vector<double> qd = to_doubles(q), kd = to_doubles(k), vd = to_doubles(v);
    std::vector<double> ref_out(size_t(total_q) * h_q * d_v), ref_lse(size_t(total_q) * h_q), slack(ref_out.size());
    std::vector<double> kv_rows;
    for (size_t i = 0, q0 = 0, k0 = 0; i < q_lens.size(); q0 += size_t(q_lens[i]), k0 += size_t(kv_lens[i]), ++i)
      for (int j = 0; j < q_lens[i]; ++j)
        for (int h = 0; h < h_q; ++h) {
          const int g = h / (h_q / h_kv), n = kv_lens[i];
          const int limit = causal ? std::clamp(n - q_lens[i] + j + 1, 0, n) : n;
          // Rows [k | v] so reference_row's V is the second part: key c < d_qk, value c >= d_qk.
          kv_rows.assign(size_t(limit) * (d_qk + d_v), 0.0);
          std::vector<const double*> keys;
          for (int t = 0; t < limit; ++t) {
            double* row = kv_rows.data() + size_t(t) * (d_qk + d_v);
            for (int c = 0; c < d_qk; ++c)
              row[c] = kd[((k0 + size_t(t)) * size_t(h_kv) + size_t(g)) * size_t(d_qk) + size_t(c)];
            for (int c = 0; c < d_v; ++c)
              row[d_qk + c] = vd[((k0 + size_t(t)) * size_t(h_kv) + size_t(g)) * size_t(d_v) + size_t(c)];
            keys.push_back(row);
          }
          const std::vector<double> qrow(
              qd.begin() + long(((q0 + size_t(j)) * size_t(h_q) + size_t(h)) * size_t(d_qk)),
              qd.begin() + long(((q0 + size_t(j)) * size_t(h_q) + size_t(h) + 1) * size_t(d_qk)));
          std::vector<double> q_ext = qrow;
          q_ext.resize(size_t(d_qk + d_v), 0.0);  // zeros against the value part: scores use keys only
          RefRow r = reference_row(q_ext, keys, d_qk + d_v, 1.0 / std::sqrt(double(d_qk)));
          const size_t at = ((q0 + size_t(j)) * size_t(h_q) + size_t(h));
          for (int c = 0; c < d_v; ++c) {
            ref_out[at * size_t(d_v) + size_t(c)] = r.out[size_t(d_qk + c)];
            slack[at * size_t(d_v) + size_t(c)] = r.slack[size_t(d_qk + c)];
          }
          ref_lse[at] = r.lse;
        }
    auto a = check_close("out", to_doubles(out), ref_out, kDenseOutTol, &slack);
    if (!a) return a;
    return check_close("lse", to_doubles(lse), ref_lse, kDenseLseTol);
  }
};

struct VarlenCase {
  const char* name;
  std::vector<int> q_lens, kv_lens;
  int h_q, h_kv, d_qk, d_v;
  bool causal;
  DType dtype;
  bool strided_q;
};

const VarlenCase kCases[] = {
    {"MHA d 192/128 causal, a zero-length request",
     {40, 0, 70},
     {600, 0, 900},
     8,
     8,
     192,
     128,
     true,
     DType::kBF16,
     false},
    {"GQA 8 over 2, d 128, not causal, strided q", {33, 50}, {512, 700}, 8, 2, 128, 128, false, DType::kBF16, true},
    {"fp16 (reference path)", {20, 30}, {500, 640}, 4, 4, 128, 128, true, DType::kF16, false},
    {"causal with more queries than keys", {50, 7}, {20, 7}, 4, 1, 192, 128, true, DType::kBF16, false},
};

class VarlenPrefill : public ::testing::TestWithParam<Isa> {};

TEST_P(VarlenPrefill, MatchesFloat64Reference) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  for (const VarlenCase& c : kCases) {
    VarlenProblem p;
    p.q_lens = c.q_lens;
    p.kv_lens = c.kv_lens;
    p.h_q = c.h_q;
    p.h_kv = c.h_kv;
    p.d_qk = c.d_qk;
    p.d_v = c.d_v;
    p.causal = c.causal;
    p.dtype = c.dtype;
    p.strided_q = c.strided_q;
    p.build(rng);
    flash_mla::flash_attn_varlen_fwd(p.inputs(), p.out.view, p.lse.view);
    EXPECT_TRUE(p.check()) << c.name;
  }
}

TEST_P(VarlenPrefill, SameBitsForAnyThreadCount) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  VarlenProblem p;
  p.q_lens = {3, 40};
  p.kv_lens = {2000, 800};  // few rows, a long list: split
  p.build(rng);
  std::vector<uint8_t> first;
  for (int threads : {1, 2, 3}) {
    NumThreadsScope scope(threads);
    flash_mla::flash_attn_varlen_fwd(p.inputs(), p.out.view, p.lse.view);
    std::vector<uint8_t> got = p.out.bytes;
    got.insert(got.end(), p.lse.bytes.begin(), p.lse.bytes.end());
    if (first.empty()) {
      first = got;
      EXPECT_TRUE(p.check());
    } else {
      EXPECT_TRUE(got == first) << threads << " threads differ from 1 thread";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VarlenPrefill, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

TEST(VarlenPrefillBadInput, ClearErrorsAndUntouchedOutputs) {
  Rng rng = Rng::for_current_test();
  VarlenProblem p;
  p.q_lens = {5, 6};
  p.kv_lens = {9, 10};
  p.build(rng);
  const std::vector<uint8_t> before = p.out.bytes;
  auto run = [&](const flash_mla::VarlenInputs& in) { flash_mla::flash_attn_varlen_fwd(in, p.out.view, p.lse.view); };
  flash_mla::VarlenInputs in = p.inputs();
  in.v.dtype = DType::kF16;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"flash_attn_varlen_func", "'q', 'k' and 'v'"}));
  in = p.inputs();
  in.max_seqlen_kv = 9;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"'cu_seqlens_kv'", "request 1 has 10 tokens", "max_seqlen_kv"}));
  in = p.inputs();
  in.k.shape[1] = 3;
  in.v.shape[1] = 3;
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"multiple of num_heads of k"}));
  std::vector<int32_t> bad_cu = {0, 5, 12};
  in = p.inputs();
  in.cu_seqlens_qo = TensorView(bad_cu.data(), DType::kI32, {3});
  EXPECT_TRUE(throws_invalid([&] { run(in); }, {"'cu_seqlens_qo'", "from 0 to 11"}));
  TensorView small = p.out.view;
  small.shape[2] = 64;
  EXPECT_TRUE(throws_invalid([&] { flash_mla::flash_attn_varlen_fwd(p.inputs(), small, p.lse.view); }, {"'out'"}));
  EXPECT_TRUE(p.out.bytes == before);
}

}  // namespace
}  // namespace tessera::test
