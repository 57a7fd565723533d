// tf32_hc_prenorm_gemm (DeepGEMM's API, docs/gemm.md): the hyper-connection pre-norm GEMM with the
// squared sums of A's rows, optionally split along K.
#include <cstring>
#include <vector>

#include "gemm/operands.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm_grouped.h"

namespace tessera::gemm {

void tf32_hc_prenorm_gemm(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView& sqr_sum,
                          int num_splits) {
  const char* fn = "tf32_hc_prenorm_gemm";
  const OperandInfo ai = check_operand(fn, "a", a, true, {DType::kBF16});
  const OperandInfo bi = check_operand(fn, "b", b, true, {DType::kF32});
  const int64_t m = ai.rows, n = bi.rows, k = ai.k;
  TESSERA_CHECK(bi.k == k, fn, ": 'a' and 'b' must share K, got ", a.shape_str(), " and ", b.shape_str());
  TESSERA_CHECK(k % 64 == 0, fn, ": K = ", k, " must be a multiple of 64");
  TESSERA_CHECK(n % 8 == 0 && n <= 128, fn, ": N = ", n, " must be a multiple of 8 and <= 128");
  TESSERA_CHECK(num_splits >= 0, fn, ": argument 'num_splits' must be >= 0 (0 = no split), got ", num_splits);
  const int64_t splits = num_splits == 0 ? 1 : num_splits, blocks = k / 64;
  check_dtype(fn, "d", d, {DType::kF32});
  check_dtype(fn, "sqr_sum", sqr_sum, {DType::kF32});
  check_defined(fn, "sqr_sum", sqr_sum);
  if (num_splits == 0) {
    check_ndim(fn, "d", d, {2});
    check_ndim(fn, "sqr_sum", sqr_sum, {1});
    check_dim(fn, "sqr_sum", sqr_sum, 0, m, "M");
  } else {
    check_ndim(fn, "d", d, {3});
    check_dim(fn, "d", d, 0, splits, "num_splits");
    check_ndim(fn, "sqr_sum", sqr_sum, {2});
    TESSERA_CHECK(sqr_sum.shape[0] == splits && sqr_sum.shape[1] == m, fn, ": argument 'sqr_sum' must have shape [",
                  splits, ", ", m, "], got ", sqr_sum.shape_str());
  }
  const TensorView d0 = num_splits == 0 ? d : slice0(d, 0);
  TESSERA_CHECK(d0.shape[0] == m && d0.shape[1] == n, fn, ": argument 'd' must have [M, N] = [", m, ", ", n,
                "] per split, got ", d.shape_str());
  for (const auto& [arg, t] : {std::pair<const char*, const TensorView*>{"d", &d}, {"sqr_sum", &sqr_sum}}) {
    check_no_overlap(fn, arg, *t, "a", a);
    check_no_overlap(fn, arg, *t, "b", b);
  }
  check_no_overlap(fn, "d", d, "sqr_sum", sqr_sum);
  std::vector<GemmProblem> problems;
  std::vector<int64_t> k_begin;
  const int64_t q = blocks / splits, rem = blocks % splits;
  for (int64_t s = 0; s < splits; ++s) {
    const int64_t kb = (s * q + std::min(s, rem)) * 64, kn = (q + (s < rem ? 1 : 0)) * 64;
    GemmProblem p;
    p.fn = fn;
    p.m = m;
    p.n = n;
    p.k = kn;
    p.a = ai.src;
    p.b = bi.src;
    p.a.data = static_cast<const char*>(ai.src.data) + kb * ai.src.stride_k * 2;
    p.b.data = static_cast<const char*>(bi.src.data) + kb * bi.src.stride_k * 4;
    check_output(fn, num_splits == 0 ? d : slice0(d, s), nullptr, m, n, {}, &p);
    k_begin.push_back(kb);
    problems.push_back(p);
  }
  // sqr_sum: fp32 sums in k order, rows split over threads.
  parallel_for(m, [&](int64_t r0, int64_t r1) {
    for (int64_t s = 0; s < splits; ++s)
      for (int64_t r = r0; r < r1; ++r) {
        float acc = 0.0f;
        for (int64_t kk = k_begin[s]; kk < k_begin[s] + problems[s].k; ++kk) {
          const float v = bf16_to_f32(a.ptr<const uint16_t>()[r * ai.src.stride_r + kk * ai.src.stride_k]);
          acc += v * v;
        }
        float* out = sqr_sum.ptr<float>() +
                     (num_splits == 0 ? r * sqr_sum.strides[0] : s * sqr_sum.strides[0] + r * sqr_sum.strides[1]);
        *out = acc;
      }
  });
  std::vector<GemmProblem> nonempty;
  for (const GemmProblem& p : problems) (p.k == 0 ? (void)handle_empty_k(p) : nonempty.push_back(p));
  run_gemm_batch(nonempty.data(), int64_t(nonempty.size()));
}

}  // namespace tessera::gemm
