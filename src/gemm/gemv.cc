// Decode path (M <= 8, K-contiguous weights): the weights are streamed once at memory speed by the
// kernel set's GEMV; threads split N (each converts the few activation rows for itself).
#include "gemm/gemv.h"

#include <algorithm>

#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {

const char* gemv_refusal(const GemmProblem& p) {
  if (p.m > kGemvMaxM) return "M > 8";
  if (p.b.stride_k != 1) return "weights (B) are not K-contiguous";
  if (p.b.type != cpu::GemmSrcType::kBF16 && p.b.type != cpu::GemmSrcType::kE4M3) return "weights are not bf16/e4m3";
  if (p.a.type != p.b.type) return "activations and weights differ in type";
  if (p.a.stride_k != 1 && p.m > 1) return "activations (A) are not K-contiguous";
  if (p.group > 0 && p.group % 64 != 0) return "scale group is not a multiple of 64";
  return nullptr;
}

void run_gemv(const GemmProblem& p, cpu::GemvFn gemv) {
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  auto out = aligned_array<float>(size_t(p.m) * p.n);

  // Scales: the activations' expanded to [groups][m]; the weights' used in place when their K
  // granularity is the common group, else re-indexed to one entry per common group.
  const int64_t groups = scale_groups(p);
  AlignedPtr<float> a_scale, w_scale;
  const float* w_scale_data = p.sb.data;
  int64_t w_scale_stride = p.sb.stride_g;
  if (p.group > 0) {
    a_scale = aligned_array<float>(size_t(groups) * kGemvMaxM);
    expand_scales(p.sa, 0, groups, 0, p.m, a_scale.get(), kGemvMaxM);
    if (p.sb.g_div != 1) {
      w_scale = aligned_array<float>(size_t(groups) * p.sb.stride_g);
      for (int64_t g = 0; g < groups; ++g)
        std::copy_n(p.sb.data + (g / p.sb.g_div) * p.sb.stride_g, p.sb.stride_g, w_scale.get() + g * p.sb.stride_g);
      w_scale_data = w_scale.get();
    }
  }

  // Chunks of 16 columns keep every thread's share of D on its own cache lines.
  const int64_t chunks = (p.n + 15) / 16;
  parallel_for(chunks, [&](int64_t c0, int64_t c1) {
    cpu::GemvArgs g{};
    g.a = p.a.data;
    g.a_stride = p.m > 1 ? p.a.stride_r : 0;
    g.m = int(p.m);
    g.w = p.b.data;
    g.w_type = p.b.type;
    g.ldw = p.b.stride_r;
    g.k = p.k;
    g.group = p.group > 0 ? p.group : int(k_pad);
    g.a_scale = p.group > 0 ? a_scale.get() : nullptr;
    g.a_scale_stride = kGemvMaxM;
    g.w_scale = w_scale_data;
    g.w_scale_stride = w_scale_stride;
    g.w_scale_rows = p.sb.r_div;
    g.out = out.get();
    g.ldo = p.n;
    g.n0 = c0 * 16;
    g.n1 = std::min(p.n, c1 * 16);
    g.scratch = thread_scratch(5, size_t(p.m) * k_pad * 2);
    gemv(g);
    finalize_tile(p, out.get() + g.n0, p.n, false, 0, p.m, g.n0, g.n1 - g.n0);
  });
}

}  // namespace tessera::gemm
