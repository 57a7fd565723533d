// fp8_fp4_mega_moe and bf16_mega_moe: validate, publish this rank's token count, wait for every rank,
// run the (expert, token block) items, wait again, then sum each token's top-k outputs into y.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/registry.h"
#include "moe/mega_moe_experts.h"
#include "moe/mega_moe_routing.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/mega_moe.h"

namespace tessera::mega_moe {
namespace {

using detail::BlockJob;
using detail::ExpertWeights;

// Most tokens per work item: every item packs its expert's weights for its GEMMs, so items should be
// large, yet a few heavily loaded experts must still give every thread work.
constexpr int64_t kMaxBlockTokens = 256;

void check_options(const char* fn, const Options& o, bool fp8) {
  TESSERA_CHECK(o.activation == "swiglu", fn, ": argument 'activation' must be 'swiglu', got '", o.activation, "'");
  if (o.activation_clamp)
    TESSERA_CHECK(*o.activation_clamp >= 0.0f, fn, ": argument 'activation_clamp' must be >= 0 or None, got ",
                  *o.activation_clamp);
  if (fp8)
    TESSERA_CHECK(o.recipe[0] == 1 && o.recipe[1] == 1 && o.recipe[2] == 32, fn,
                  ": argument 'recipe' must be (1, 1, 32), got (", o.recipe[0], ", ", o.recipe[1], ", ", o.recipe[2],
                  ")");
}

void check_y(const char* fn, const TensorView& y, const BufferShape& s) {
  check_defined(fn, "y", y);
  check_dtype(fn, "y", y, {DType::kBF16});
  check_ndim(fn, "y", y, {2});
  check_dim(fn, "y", y, 1, s.hidden, "hidden");
  TESSERA_CHECK(y.size(0) <= s.num_max_tokens_per_rank, fn, ": argument 'y' has ", y.size(0),
                " rows, more than the buffer's num_max_tokens_per_rank = ", s.num_max_tokens_per_rank);
  check_row_major(fn, "y", y);
}

// A weight tensor [E_local, n, k] of `dtypes` with any strides.
void check_weight(const char* fn, const char* arg, const TensorView& w, std::initializer_list<DType> dtypes,
                  int64_t experts, int64_t n, int64_t k) {
  check_defined(fn, arg, w);
  check_dtype(fn, arg, w, dtypes);
  check_ndim(fn, arg, w, {3});
  check_dim(fn, arg, w, 0, experts, "experts per rank");
  check_dim(fn, arg, w, 1, n, "rows");
  check_dim(fn, arg, w, 2, k, "columns");
}

// Scale factors per 32 along k: int32 packed UE8M0 [E, n, k / 128] or float32 [E, n, k / 32].
void check_weight_sf(const char* fn, const char* arg, const TensorView& sf, int64_t experts, int64_t n, int64_t k) {
  check_defined(fn, arg, sf);
  check_dtype(fn, arg, sf, {DType::kI32, DType::kF32});
  check_weight(fn, arg, sf, {sf.dtype}, experts, n, sf.dtype == DType::kI32 ? k / 128 : k / 32);
}

void check_stats(const char* fn, const TensorView* stats, int64_t experts) {
  if (!stats) return;
  check_dtype(fn, "cumulative_local_expert_recv_stats", *stats, {DType::kI32});
  check_ndim(fn, "cumulative_local_expert_recv_stats", *stats, {1});
  check_dim(fn, "cumulative_local_expert_recv_stats", *stats, 0, experts, "experts per rank");
  check_contiguous(fn, "cumulative_local_expert_recv_stats", *stats);
}

std::vector<BlockJob> block_jobs(const std::vector<std::vector<detail::Slot>>& routes) {
  std::vector<BlockJob> jobs;
  for (size_t e = 0; e < routes.size(); ++e) {
    const int64_t n = int64_t(routes[e].size());
    if (n == 0) continue;
    // Near-equal blocks: a 65-token expert becomes 33 + 32, not 64 + 1 (each block packs the weights).
    const int64_t blocks = (n + kMaxBlockTokens - 1) / kMaxBlockTokens;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t begin = n * b / blocks, end = n * (b + 1) / blocks;
      jobs.push_back({int(e), routes[e].data() + begin, end - begin});
    }
  }
  return jobs;
}

// Items are pulled one at a time; each runs its GEMMs on the thread that pulled it. With fewer items
// than threads they run one after another and each GEMM uses the whole pool instead. Either way every
// output row is computed by the same GEMM call shape, so the bits do not depend on the thread count.
void run_jobs(const SymmBuffer& buffer, const ExpertWeights& weights, const std::vector<BlockJob>& jobs,
              std::optional<float> clamp) {
  if (int64_t(jobs.size()) < num_threads()) {
    for (const BlockJob& job : jobs) detail::run_expert_block(buffer, weights, job, clamp);
    return;
  }
  std::atomic<size_t> next{0};
  parallel_shares([&](int, int) {
    for (size_t i = next.fetch_add(1); i < jobs.size(); i = next.fetch_add(1))
      detail::run_expert_block(buffer, weights, jobs[i], clamp);
  });
}

// y[t] = bf16(sum over the used slots k of token t, in slot order, of its expert output): the ep slot's
// reduce_bf16 (fp32 sum from +0, rounded to nearest even; a NaN result is 0x7FC0).
void combine(const SymmBuffer& buffer, const TensorView& y) {
  const BufferShape& s = buffer.shape();
  const BufferLayout& l = buffer.layout();
  const int64_t h = s.hidden, topk = s.num_topk;
  const auto* idx = reinterpret_cast<const int64_t*>(buffer.data() + l.topk_idx);
  const auto* parts = reinterpret_cast<const uint16_t*>(buffer.data() + l.combine);
  const auto& kernels = *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "mega_moe combine"));
  parallel_for(y.size(0), [&](int64_t t0, int64_t t1) {
    std::vector<const uint16_t*> rows(static_cast<size_t>(topk));
    for (int64_t t = t0; t < t1; ++t) {
      int used = 0;
      for (int64_t k = 0; k < topk; ++k)
        if (idx[t * topk + k] >= 0) rows[size_t(used++)] = parts + (t * topk + k) * h;
      auto* row = reinterpret_cast<uint16_t*>(static_cast<char*>(y.data) + t * y.stride(0) * 2);
      kernels.reduce_bf16(row, rows.data(), used, nullptr, nullptr, h, 0);
    }
  });
}

void run(const char* fn, const TensorView& y, const ExpertWeights& weights, const TensorView* stats, SymmBuffer& buffer,
         const Options& options) {
  detail::check_topk_idx(fn, buffer, y.size(0));
  detail::published_num_tokens(buffer.data(), buffer.layout()) = y.size(0);
  buffer.barrier();  // every rank published its inputs
  const auto routes = detail::route_local_experts(buffer);
  run_jobs(buffer, weights, block_jobs(routes), options.activation_clamp);
  buffer.barrier();  // every expert output is in its combine area
  combine(buffer, y);
  if (stats)
    for (size_t e = 0; e < routes.size(); ++e) stats->ptr<int32_t>()[e] += int32_t(routes[e].size());
}

}  // namespace

void fp8_fp4_mega_moe(const TensorView& y, const gemm::ScaledTensor& l1, const gemm::ScaledTensor& l2,
                      const TensorView* stats, SymmBuffer& buffer, const Options& options) {
  const char* fn = "fp8_fp4_mega_moe";
  const BufferShape& s = buffer.shape();
  TESSERA_CHECK(s.mma_type == MmaType::kFp8xFp4, fn,
                ": argument 'sym_buffer' was made with mma_type='bf16xbf16'; use bf16_mega_moe or a buffer made "
                "with mma_type='fp8xfp4'");
  check_options(fn, options, true);
  check_y(fn, y, s);
  const int64_t e = s.num_experts / s.num_ranks, h = s.hidden, inter = s.intermediate_hidden;
  const auto fp4 = {DType::kI8, DType::kU8, DType::kF4E2M1};
  check_weight(fn, "l1_weights[0]", l1.data, fp4, e, 2 * inter, h / 2);
  check_weight_sf(fn, "l1_weights[1]", l1.scale, e, 2 * inter, h);
  check_weight(fn, "l2_weights[0]", l2.data, fp4, e, h, inter / 2);
  check_weight_sf(fn, "l2_weights[1]", l2.scale, e, h, inter);
  for (const auto* w : {&l1.data, &l2.data})
    TESSERA_CHECK(w->stride(2) == 1, fn, ": the weights must be K-major (stride(-1) == 1), got strides ",
                  w->strides_str());
  check_stats(fn, stats, e);
  run(fn, y, ExpertWeights{l1, l2}, stats, buffer, options);
}

void bf16_mega_moe(const TensorView& y, const TensorView& l1, const TensorView& l2, const TensorView* stats,
                   SymmBuffer& buffer, const Options& options) {
  const char* fn = "bf16_mega_moe";
  const BufferShape& s = buffer.shape();
  TESSERA_CHECK(s.mma_type == MmaType::kBf16xBf16, fn,
                ": argument 'sym_buffer' was made with mma_type='fp8xfp4'; use fp8_fp4_mega_moe or a buffer made "
                "with mma_type='bf16xbf16'");
  check_options(fn, options, false);
  check_y(fn, y, s);
  const int64_t e = s.num_experts / s.num_ranks, h = s.hidden, inter = s.intermediate_hidden;
  check_weight(fn, "l1_weights", l1, {DType::kBF16}, e, 2 * inter, h);
  check_weight(fn, "l2_weights", l2, {DType::kBF16}, e, h, inter);
  check_stats(fn, stats, e);
  run(fn, y, ExpertWeights{{l1, TensorView()}, {l2, TensorView()}}, stats, buffer, options);
}

}  // namespace tessera::mega_moe
