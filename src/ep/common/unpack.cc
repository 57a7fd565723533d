#include "ep/common/unpack.h"

#include <cstring>

#include "ep/common/active_kernels.h"
#include "ep/common/parallel_range.h"

namespace tessera::ep::detail {
namespace {

constexpr int kMaxTopk = 32;  // route_topk rejects more

// A range check instead of a division: this runs for every lane of every received token. One unsigned
// compare (-1 and other ranks' experts wrap above the range) and a select: no branch on random experts.
inline int local_expert(int64_t e, int me, int experts_per_rank) {
  const uint64_t d = uint64_t(e) - uint64_t(me) * uint64_t(experts_per_rank);
  return int(int64_t(d) | -int64_t(d >= uint64_t(experts_per_rank)));  // -1 when out of range
}

void copy_sf(const UnpackOut& out, int64_t row, const char* src) {
  if (out.sf_col == 4) {
    std::memcpy(out.sf + row * out.sf_row, src, size_t(out.packs) * 4);
    return;
  }
  for (int64_t p = 0; p < out.packs; ++p) std::memcpy(out.sf + row * out.sf_row + p * out.sf_col, src + p * 4, 4);
}

void zero_sf(const UnpackOut& out, int64_t row) {
  for (int64_t p = 0; p < out.packs; ++p) std::memset(out.sf + row * out.sf_row + p * out.sf_col, 0, 4);
}

// Metadata of token t of group s whose first local lane is `master` (-1: none): column 0 the source
// global index, column 1 s * K + master, the lanes' columns -1.
void write_meta(const UnpackContext& ctx, int s, const TokenRows& rows, int64_t t, int master, int32_t* meta) {
  const int K = ctx.num_topk;
  meta[0] = int32_t(int64_t(s) * ctx.num_max + rows.src_token(t));
  meta[1] = master >= 0 ? s * K + master : -1;
  for (int k = 0; k < K; ++k) meta[2 + k] = -1;
}

void fill_meta(const UnpackContext& ctx, int s, const TokenRows& rows, int64_t t, int32_t* meta) {
  int master = -1;
  for (int k = ctx.num_topk - 1; k >= 0; --k)  // the first local lane, without a branch on random experts
    master = local_expert(rows.idx[t * rows.idx_stride + k], ctx.me, ctx.experts_per_rank) >= 0 ? k : master;
  write_meta(ctx, s, rows, t, master, meta);
}

}  // namespace

RecvLayout layout_of(const std::vector<GroupData>& groups) {
  RecvLayout l;
  for (const GroupData& g : groups) {
    l.base.push_back(l.total);
    l.count.push_back(g.count);
    l.total += g.count;
  }
  return l;
}

ExpertCounts count_local_experts(const std::vector<GroupData>& groups, int num_topk, int me, int experts_per_rank,
                                 int alignment) {
  ExpertCounts c;
  // Bin 0 takes the lanes of other ranks (local expert -1): no branch on random experts (half of them
  // mispredict).
  std::vector<int32_t> bins(size_t(experts_per_rank) + 1, 0);
  for (const GroupData& g : groups) {
    if (!g.rows.idx) continue;
    for (int64_t i = 0; i < g.count; ++i) {
      const int64_t* idx = g.rows.idx + g.token(i) * g.rows.idx_stride;
      for (int k = 0; k < num_topk; ++k) ++bins[size_t(local_expert(idx[k], me, experts_per_rank) + 1)];
    }
  }
  c.unaligned.assign(bins.begin() + 1, bins.end());
  for (int e = 0; e < experts_per_rank; ++e) {
    const int32_t aligned = (c.unaligned[size_t(e)] + alignment - 1) / alignment * alignment;
    c.aligned.push_back(aligned);
    c.start.push_back(int32_t(c.expanded));
    c.expanded += aligned;
  }
  return c;
}

void unpack_non_expand(const UnpackContext& ctx, const std::vector<GroupData>& groups, const RecvLayout& layout,
                       const UnpackOut& out) {
  const cpu::EpKernels& kern = kernels();
  const int K = ctx.num_topk;
  const bool streaming = layout.total * out.hidden_bytes >= int64_t(kStreamingMinBytes);
  for (size_t s = 0; s < groups.size(); ++s) {
    const GroupData& g = groups[s];
    const int64_t base = layout.base[s];
    const bool contiguous = !g.picks && g.rows.x_stride == out.hidden_bytes && out.x_pitch == out.hidden_bytes;
    parallel_range(ctx.threads, g.count, [&](int64_t i0, int64_t i1) {
      // With direct receive (x_in_place) the senders already wrote the rows into the output.
      if (contiguous && !g.x_in_place)
        kern.copy(out.x + (base + i0) * out.x_pitch, g.rows.x + i0 * g.rows.x_stride,
                  size_t((i1 - i0) * out.hidden_bytes), streaming);
      int64_t le[kMaxTopk];
      const int me = ctx.me, epr = ctx.experts_per_rank;  // locals: the output stores may alias ctx
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = g.token(i), row = base + i;
        if (!contiguous && !g.x_in_place)
          kern.copy(out.x + row * out.x_pitch, g.rows.x + t * g.rows.x_stride, size_t(out.hidden_bytes), streaming);
        if (out.sf) copy_sf(out, row, g.rows.sf + t * g.rows.sf_stride);
        // Each lane's local expert once per token, without branches on the (random) experts.
        int master = -1;
        const int64_t* idx = g.rows.idx ? g.rows.idx + t * g.rows.idx_stride : nullptr;
        for (int k = K - 1; k >= 0; --k) {
          le[k] = idx ? local_expert(idx[k], me, epr) : -1;
          master = le[k] >= 0 ? k : master;
        }
        if (out.topk) std::memcpy(out.topk + row * K, le, size_t(K) * sizeof(int64_t));
        if (out.w) {
          const float* w = g.rows.w ? g.rows.w + t * g.rows.meta_stride : nullptr;
          for (int k = 0; k < K; ++k)
            out.w[row * K + k] = (!w || (out.zero_nonlocal_weights && le[k] < 0)) ? 0.0f : w[k];
        }
        if (out.meta) write_meta(ctx, int(s), g.rows, t, master, out.meta + row * (K + 2));
      }
      if (streaming) kern.store_fence();
    });
  }
}

void unpack_expand(const UnpackContext& ctx, const std::vector<GroupData>& groups, const RecvLayout& layout,
                   const ExpertCounts& counts, const UnpackOut& out) {
  const cpu::EpKernels& kern = kernels();
  const int K = ctx.num_topk;
  // Rows per lane, in (source rank, source token, lane) order: sequential and cheap (N x K integers).
  std::vector<int32_t> cursor = counts.start;
  for (size_t s = 0; s < groups.size(); ++s) {
    const GroupData& g = groups[s];
    for (int64_t i = 0; i < g.count; ++i) {
      const int64_t t = g.token(i);
      int32_t* meta = out.meta + (layout.base[s] + i) * (K + 2);
      fill_meta(ctx, int(s), g.rows, t, meta);
      for (int k = 0; k < K; ++k) {
        const int le = local_expert(g.rows.idx[t * g.rows.idx_stride + k], ctx.me, ctx.experts_per_rank);
        if (le >= 0) meta[2 + k] = cursor[size_t(le)]++;
      }
    }
  }
  const bool streaming = counts.expanded * out.hidden_bytes >= int64_t(kStreamingMinBytes);
  for (size_t s = 0; s < groups.size(); ++s) {
    const GroupData& g = groups[s];
    parallel_range(ctx.threads, g.count, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = g.token(i);
        const int32_t* meta = out.meta + (layout.base[s] + i) * (K + 2);
        for (int k = 0; k < K; ++k) {
          const int32_t row = meta[2 + k];
          if (row < 0) continue;
          kern.copy(out.x + row * out.x_pitch, g.rows.x + t * g.rows.x_stride, size_t(out.hidden_bytes), streaming);
          if (out.sf) copy_sf(out, row, g.rows.sf + t * g.rows.sf_stride);
          if (out.w) out.w[row] = g.rows.w ? g.rows.w[t * g.rows.meta_stride + k] : 0.0f;
        }
      }
      if (streaming) kern.store_fence();
    });
  }
  // Padding rows between aligned expert starts: zero.
  for (size_t e = 0; e < counts.unaligned.size(); ++e) {
    for (int64_t row = counts.start[e] + counts.unaligned[e]; row < counts.start[e] + counts.aligned[e]; ++row) {
      std::memset(out.x + row * out.x_pitch, 0, size_t(out.hidden_bytes));
      if (out.sf) zero_sf(out, row);
      if (out.w) out.w[row] = 0.0f;
    }
  }
}

}  // namespace tessera::ep::detail
