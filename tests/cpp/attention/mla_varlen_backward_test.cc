// flash_attn_varlen_bwd (dense MHA prefill backward) against float64 gradients: varlen requests with odd
// lengths (a zero-length one included), causal bottom-right (more queries than keys too) and not, MHA and
// GQA, bf16 and fp16, fp32 gradient outputs, strided q, dlse, head dims off the AMX K step, rows long
// enough that P and dP are recomputed instead of kept (at the SIMD levels); every case both with the key pass
// reading the row pass's stored P and dS and, on the same inputs, with it recomputing them (store limit 0); bitwise
// determinism across thread counts on both paths; the registry's choice per level; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "attention/flash_mla/mla_bwd_store_limit.h"
#include "attention/mla_harness.h"
#include "backends/cpu/mla_bwd_kernel_set.h"
#include "backends/cpu/registry.h"

namespace tessera::test {
namespace {

// Gradient tolerances (docs/attention.md): FlashMLA's own FMHA backward check (abs 1e-3, rel 8/128,
// cosine 7e-6) for gradients in the input dtype; fp32 gradients only carry fp32 sums and the bf16 out
// that delta = rowsum(dO * O) reads.
constexpr Tolerance kGradTol{1e-3, 8.01 / 128, 7e-6};
constexpr Tolerance kGradF32Tol{1e-3, 8.01 / 128, 1e-6};
// Levels whose products take bf16 operands (amx, avx512bf16: P and dS rounded to bf16, as FlashMLA's GPU
// kernels do) keep FlashMLA's relative and cosine bounds for every gradient dtype. Its abs 1e-3 is set for
// inputs drawn at randn/10, where dq and dk are ~1e-3 and dv ~1e-1 of their size for the unit-normal inputs
// here. At unit scale (gradients of rms 1-3) rounding dS leaves errors of rms ~1e-3 of the gradient's
// scale on every element, so near-zero elements need abs 1e-2 (about 3 sigma at the largest scale here).
constexpr Tolerance kGradBf16OperandTol{1e-2, 8.01 / 128, 7e-6};

// Sets the backward's store limit for a scope (0: the key pass recomputes P and dS).
class StoreLimitScope {
 public:
  explicit StoreLimitScope(size_t bytes) : previous_(flash_mla::set_bwd_store_limit(bytes)) {}
  ~StoreLimitScope() { flash_mla::set_bwd_store_limit(previous_); }

 private:
  size_t previous_;
};

// Whether the active level's backward rounds the operands of bf16 inputs to bf16.
bool bf16_operands() {
  const auto& set = cpu::kernels_for<cpu::MlaBwdKernelSet>(cpu::Slot::kMlaBwd, "backward test");
  return set.gemm && set.gemm->elem_bytes == 2;
}

struct BwdProblem {
  std::vector<int> q_lens, kv_lens;
  int h_q = 4, h_kv = 4, d_qk = 64, d_v = 64;
  bool causal = true, strided_q = false, with_dlse = false;
  DType dtype = DType::kBF16, grad_dtype = DType::kBF16;
  double scale = 0;  // 0: the default d_qk^-0.5
  Buffer q, k, v, cu_q, cu_kv, out, lse, dout, dlse, dq, dk, dv;
  int total_q = 0, total_kv = 0;

  void build(Rng& rng) {
    total_q = std::accumulate(q_lens.begin(), q_lens.end(), 0);
    total_kv = std::accumulate(kv_lens.begin(), kv_lens.end(), 0);
    q = make_buffer(dtype, {total_q, h_q, d_qk}, strided_q ? d_qk + 8 : 0);
    k = make_buffer(dtype, {total_kv, h_kv, d_qk});
    v = make_buffer(dtype, {total_kv, h_kv, d_v});
    dout = make_buffer(dtype, {total_q, h_q, d_v});
    dlse = make_buffer(DType::kF32, {total_q, h_q});
    fill_normal(&q, rng);
    fill_normal(&k, rng);
    fill_normal(&v, rng);
    fill_normal(&dout, rng);
    fill_normal(&dlse, rng);
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
    dq = make_buffer(grad_dtype, {total_q, h_q, d_qk});
    dk = make_buffer(grad_dtype, {total_kv, h_kv, d_qk});
    dv = make_buffer(grad_dtype, {total_kv, h_kv, d_v});
    for (Buffer* g : {&dq, &dk, &dv}) fill_poison(&g->bytes, grad_dtype);
    flash_mla::flash_attn_varlen_fwd(inputs(), out.view, lse.view);
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
    if (scale) in.softmax_scale = scale;
    return in;
  }

  void run() const {
    flash_mla::flash_attn_varlen_bwd(inputs(), out.view, lse.view, dout.view, dq.view, dk.view, dv.view,
                                     with_dlse ? &dlse.view : nullptr);
  }

  // float64 gradients of out (and lse with dlse) from the inputs alone.
  ::testing::AssertionResult check() const {
    const std::vector<double> qd = to_doubles(q), kd = to_doubles(k), vd = to_doubles(v), od = to_doubles(dout),
                              ld = to_doubles(dlse);
    std::vector<double> gq(qd.size(), 0.0), gk(kd.size(), 0.0), gv(vd.size(), 0.0);
    const double sc = scale ? scale : 1.0 / std::sqrt(double(d_qk));
    const int hp = h_q / h_kv;
    for (size_t i = 0, q0 = 0, k0 = 0; i < q_lens.size(); q0 += size_t(q_lens[i]), k0 += size_t(kv_lens[i]), ++i)
      for (int j = 0; j < q_lens[i]; ++j)
        for (int h = 0; h < h_q; ++h) {
          const int n = kv_lens[i], g = h / hp;
          const int lim = causal ? std::clamp(n - q_lens[i] + j + 1, 0, n) : n;
          if (lim == 0) continue;
          const size_t row = (q0 + size_t(j)) * size_t(h_q) + size_t(h);
          auto krow = [&](int t) { return &kd[((k0 + size_t(t)) * size_t(h_kv) + size_t(g)) * size_t(d_qk)]; };
          auto vrow = [&](int t) { return &vd[((k0 + size_t(t)) * size_t(h_kv) + size_t(g)) * size_t(d_v)]; };
          const double* qr = &qd[row * size_t(d_qk)];
          const double* dor = &od[row * size_t(d_v)];
          std::vector<double> s(static_cast<size_t>(lim)), dp(static_cast<size_t>(lim));
          double mx = -std::numeric_limits<double>::infinity(), sum = 0, delta = 0;
          for (int t = 0; t < lim; ++t) {
            double a = 0, b = 0;
            for (int c = 0; c < d_qk; ++c) a += qr[c] * krow(t)[c];
            for (int c = 0; c < d_v; ++c) b += dor[c] * vrow(t)[c];
            s[size_t(t)] = a * sc;
            dp[size_t(t)] = b;
            mx = std::max(mx, s[size_t(t)]);
          }
          for (int t = 0; t < lim; ++t) sum += std::exp(s[size_t(t)] - mx);
          for (int t = 0; t < lim; ++t) {
            s[size_t(t)] = std::exp(s[size_t(t)] - mx) / sum;  // p
            delta += s[size_t(t)] * dp[size_t(t)];             // dO . out
          }
          if (with_dlse) delta -= ld[row];
          for (int t = 0; t < lim; ++t) {
            const double p = s[size_t(t)], ds = p * (dp[size_t(t)] - delta);
            const size_t kr = ((k0 + size_t(t)) * size_t(h_kv) + size_t(g));
            for (int c = 0; c < d_qk; ++c) {
              gq[row * size_t(d_qk) + size_t(c)] += sc * ds * krow(t)[c];
              gk[kr * size_t(d_qk) + size_t(c)] += sc * ds * qr[c];
            }
            for (int c = 0; c < d_v; ++c) gv[kr * size_t(d_v) + size_t(c)] += p * dor[c];
          }
        }
    const Tolerance tol = dtype == DType::kBF16 && bf16_operands() ? kGradBf16OperandTol
                          : grad_dtype == DType::kF32              ? kGradF32Tol
                                                                   : kGradTol;
    auto a = check_close("dq", to_doubles(dq), gq, tol);
    if (!a) return a;
    a = check_close("dk", to_doubles(dk), gk, tol);
    if (!a) return a;
    return check_close("dv", to_doubles(dv), gv, tol);
  }
};

struct BwdCase {
  const char* name;
  std::vector<int> q_lens, kv_lens;
  int h_q, h_kv, d_qk, d_v;
  bool causal;
  DType dtype, grad_dtype;
  bool strided_q, with_dlse;
};

const BwdCase kCases[] = {
    {"MHA d 192/128 causal, odd lengths, a zero-length request",
     {37, 0, 71},
     {101, 0, 133},
     4,
     4,
     192,
     128,
     true,
     DType::kBF16,
     DType::kBF16,
     false,
     false},
    {"GQA 6 over 2, d 64, not causal, strided q",
     {33, 65},
     {129, 70},
     6,
     2,
     64,
     64,
     false,
     DType::kBF16,
     DType::kBF16,
     true,
     false},
    {"causal with more queries than keys, GQA 4 over 1",
     {50, 7},
     {20, 7},
     4,
     1,
     128,
     96,
     true,
     DType::kBF16,
     DType::kBF16,
     false,
     false},
    {"fp16 inputs, fp32 gradients, dlse",
     {45, 19},
     {77, 150},
     4,
     2,
     80,
     48,
     true,
     DType::kF16,
     DType::kF32,
     false,
     true},
    {"bf16 inputs, fp32 gradients, not causal",
     {9, 130},
     {200, 65},
     2,
     2,
     128,
     128,
     false,
     DType::kBF16,
     DType::kF32,
     false,
     false},
    {"head dims off the AMX K step, causal over several tiles, GQA 2 over 1",
     {150, 1},
     {300, 64},
     2,
     1,
     72,
     40,
     true,
     DType::kBF16,
     DType::kBF16,
     false,
     true},
    {"a 64-row tile over 16400 keys (SIMD levels: P and dP recomputed)",
     {64},
     {16400},
     1,
     1,
     32,
     32,
     false,
     DType::kBF16,
     DType::kF32,
     false,
     false},
};

class VarlenBackward : public ::testing::TestWithParam<Isa> {};

TEST_P(VarlenBackward, MatchesFloat64Gradients) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), library_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the kernels of " << lower;
  IsaCapScope cap(GetParam());
  Rng rng = Rng::for_current_test();
  for (const BwdCase& c : kCases) {
    BwdProblem p;
    p.q_lens = c.q_lens;
    p.kv_lens = c.kv_lens;
    p.h_q = c.h_q;
    p.h_kv = c.h_kv;
    p.d_qk = c.d_qk;
    p.d_v = c.d_v;
    p.causal = c.causal;
    p.dtype = c.dtype;
    p.grad_dtype = c.grad_dtype;
    p.strided_q = c.strided_q;
    p.with_dlse = c.with_dlse;
    p.build(rng);
    p.run();
    EXPECT_TRUE(p.check()) << c.name << " (key pass on stored P and dS)";
    StoreLimitScope recompute(0);
    p.run();
    EXPECT_TRUE(p.check()) << c.name << " (key pass recomputing P and dS)";
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VarlenBackward, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

TEST(VarlenBackwardRegistry, EveryLevelHasItsSet) {
  const std::pair<Isa, const char*> expect[] = {
      {Isa::kAmx, "mla_bwd_amx"},   {Isa::kAvx512Bf16, "mla_bwd_avx512bf16"}, {Isa::kAvx512, "mla_bwd_avx512"},
      {Isa::kAvx2, "mla_bwd_avx2"}, {Isa::kSve, "mla_bwd_neon_bf16"},         {Isa::kNeonBf16, "mla_bwd_neon_bf16"},
      {Isa::kNeon, "mla_bwd_neon"}, {Isa::kScalar, "mla_bwd_scalar"}};
  for (const auto& [level, name] : expect) {
    if (!isa_supported(level)) continue;
    const cpu::KernelChoice c = cpu::choose_kernel_at(cpu::Slot::kMlaBwd, level, "backward test");
    ASSERT_NE(c.impl, nullptr) << isa_name(level);
    EXPECT_STREQ(c.impl->name, name);
  }
}

TEST(VarlenBackwardThreads, SameBitsForAnyThreadCount) {
  Rng rng = Rng::for_current_test();
  BwdProblem p;
  p.q_lens = {3, 77};
  p.kv_lens = {300, 91};
  p.h_q = 4;
  p.h_kv = 2;
  p.scale = 0.07;
  p.build(rng);
  for (const size_t limit : {flash_mla::bwd_store_limit(), size_t(0)}) {
    StoreLimitScope store(limit);
    std::vector<uint8_t> first;
    for (int threads : {1, 2, 3}) {
      NumThreadsScope scope(threads);
      p.run();
      std::vector<uint8_t> got = p.dq.bytes;
      got.insert(got.end(), p.dk.bytes.begin(), p.dk.bytes.end());
      got.insert(got.end(), p.dv.bytes.begin(), p.dv.bytes.end());
      if (first.empty()) {
        first = got;
        EXPECT_TRUE(p.check());
      } else {
        EXPECT_TRUE(got == first) << threads << " threads differ from 1 thread (store limit " << limit << ")";
      }
    }
  }
}

TEST(VarlenBackwardBadInput, ClearErrorsAndUntouchedOutputs) {
  Rng rng = Rng::for_current_test();
  BwdProblem p;
  p.q_lens = {5, 6};
  p.kv_lens = {9, 10};
  p.build(rng);
  const std::vector<uint8_t> before = p.dq.bytes;
  const flash_mla::VarlenInputs in = p.inputs();
  auto run = [&](const flash_mla::VarlenInputs& x, const TensorView& dout, const TensorView& dq, const TensorView& dk) {
    flash_mla::flash_attn_varlen_bwd(x, p.out.view, p.lse.view, dout, dq, dk, p.dv.view);
  };
  flash_mla::VarlenInputs bad = in;
  bad.max_seqlen_qo = 5;
  EXPECT_TRUE(throws_invalid([&] { run(bad, p.dout.view, p.dq.view, p.dk.view); },
                             {"flash_attn_varlen_bwd", "'cu_seqlens_qo'", "request 1 has 6 tokens", "max_seqlen_qo"}));
  TensorView dq16 = p.dq.view;
  dq16.dtype = DType::kF16;
  EXPECT_TRUE(throws_invalid([&] { run(in, p.dout.view, dq16, p.dk.view); }, {"flash_attn_varlen_bwd", "'dq'"}));
  TensorView dk_short = p.dk.view;
  dk_short.shape[0] = 18;
  EXPECT_TRUE(throws_invalid([&] { run(in, p.dout.view, p.dq.view, dk_short); }, {"'dk'", "total_kv"}));
  TensorView dout_heads = p.dout.view;
  dout_heads.shape[1] = 2;
  EXPECT_TRUE(throws_invalid([&] { run(in, dout_heads, p.dq.view, p.dk.view); }, {"'dout'", "num_heads"}));
  EXPECT_TRUE(throws_invalid([&] { run(in, p.dout.view, p.dq.view, p.dq.view); }, {"'dk'"}));
  TensorView dq_over_out = p.dq.view;
  dq_over_out.data = p.dout.view.data;
  dq_over_out.dtype = p.dout.view.dtype;
  dq_over_out.shape[2] = p.dout.view.shape[2];
  EXPECT_TRUE(
      throws_invalid([&] { run(in, p.dout.view, dq_over_out, p.dk.view); }, {"'dq'", "must not overlap", "'dout'"}));
  EXPECT_TRUE(p.dq.bytes == before);
}

}  // namespace
}  // namespace tessera::test
