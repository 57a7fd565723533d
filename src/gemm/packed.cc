// The packed GEMM driver (BLIS loops around a kernel set's micro-kernel).
//
// Each thread owns an equal, contiguous range of register panels of one side (plan.split_y) and all of
// the other side. It packs one b-block (nc columns, all of K) at a time and runs every a-block (mc rows)
// of its range against it. Per (a-block, b-block) tile:
//   for pc in K by kc:                  (never split across threads: fixed fp32 summation order)
//     a-block  = prepare_a(rows of the tile, K chunk)        (in place for bf16 K-contiguous sources)
//     for jr over nr-wide b-panels:     (b-panel kc x nr stays in L1)
//       for ir over mr-row a-panels:    (a-block mc x kc stays in L2)
//         ukr -> fp32 workspace tile
//   finalize: D = round(C + workspace)
#include "gemm/packed.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gemm/plan.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {
namespace {

// Prefetches (into L2) the K-chunk [k0, k0+kc) of a-side rows [r0, r0+rows) while the current chunk is
// being computed, so a-sides read in place from DRAM do not stall the next chunk's first pass.
void prefetch_a_rows(const cpu::GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total) {
  if (s.stride_k != 1 || k0 >= k_total) return;
  const int es = s.type == cpu::GemmSrcType::kBF16 ? 2 : s.type == cpu::GemmSrcType::kF32 ? 4 : 1;
  const int64_t bytes = std::min<int64_t>(kc, k_total - k0) * es;
  for (int r = 0; r < rows; ++r) {
    const char* row = static_cast<const char*>(s.data) + ((r0 + r) * s.stride_r + k0) * es;
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 0, 2);
  }
}

bool print_plans() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_PRINT_PLAN");
    return v && *v && *v != '0';
  }();
  return on;
}

}  // namespace

void run_packed(const GemmProblem& p, const cpu::GemmKernelSet& ks) {
  const PackedPlan plan = make_packed_plan(p, ks, num_threads());
  if (print_plans()) std::fprintf(stderr, "[tessera] %s: %s kernels=%s\n", p.fn, plan.describe().c_str(), ks.name);

  cpu::GemmSrc xs = plan.swap ? p.b : p.a;  // a-side operand
  cpu::GemmSrc ys = plan.swap ? p.a : p.b;  // b-side operand
  xs.lane_order = ys.lane_order = plan.lane_order;
  const ScaleTable& xscale = plan.swap ? p.sb : p.sa;
  const ScaleTable& yscale = plan.swap ? p.sa : p.sb;
  const bool scaled = p.group > 0;
  const int64_t groups = scale_groups(p);

  const int64_t x_panels = (plan.x + plan.tile.mr - 1) / plan.tile.mr,
                y_panels = (plan.y + plan.tile.nr - 1) / plan.tile.nr;
  const int threads = int(std::min<int64_t>(plan.threads, plan.split_y ? y_panels : x_panels));
  parallel_run(
      [&](int tid, int nt) {
        int64_t xb = 0, xe = plan.x, yb = 0, ye = plan.y;
        int64_t pb, pe;
        thread_panel_range(plan.split_y ? y_panels : x_panels, tid, nt, &pb, &pe);
        if (plan.split_y) {
          yb = pb * plan.tile.nr;
          ye = std::min(plan.y, pe * plan.tile.nr);
        } else {
          xb = pb * plan.tile.mr;
          xe = std::min(plan.x, pe * plan.tile.mr);
        }
        if (xb >= xe || yb >= ye) return;
        const size_t es = size_t(ks.elem_bytes);
        char* bpack = static_cast<char*>(thread_scratch(0, size_t(plan.k_pad) * plan.nc * es));
        void* abuf = thread_scratch(1, size_t(plan.mc) * plan.kc * es);
        float* ws = static_cast<float*>(thread_scratch(2, size_t(plan.mc) * plan.nc * sizeof(float)));
        // Per-block scales expanded to one fp32 per row and group: [groups][mc] and [groups][nc].
        float* xs_buf = scaled ? static_cast<float*>(thread_scratch(3, size_t(groups) * plan.mc * 4)) : nullptr;
        float* ys_buf = scaled ? static_cast<float*>(thread_scratch(4, size_t(groups) * plan.nc * 4)) : nullptr;

        for (int64_t y0 = yb; y0 < ye; y0 += plan.nc) {
          const int ny = int(std::min<int64_t>(plan.nc, ye - y0));
          const int ny_pad = (ny + plan.tile.nr - 1) / plan.tile.nr * plan.tile.nr;
          for (int64_t pc = 0; pc < plan.k_pad; pc += plan.kc) {
            const int kc = int(std::min<int64_t>(plan.kc, plan.k_pad - pc));
            ks.pack_b(ys, y0, ny, plan.y, pc, kc, p.k, plan.tile.nr, bpack + pc * ny_pad * es);
          }
          if (scaled) expand_scales(yscale, 0, groups, y0, ny, ys_buf, plan.nc);

          for (int64_t x0 = xb; x0 < xe; x0 += plan.mc) {
            const int mx = int(std::min<int64_t>(plan.mc, xe - x0));
            if (scaled) expand_scales(xscale, 0, groups, x0, mx, xs_buf, plan.mc);
            for (int64_t pc = 0; pc < plan.k_pad; pc += plan.kc) {
              const int kc = int(std::min<int64_t>(plan.kc, plan.k_pad - pc));
              const char* bchunk = bpack + pc * ny_pad * es;
              const int64_t g0 = scaled ? pc / p.group : 0;
              cpu::UkrArgs u{};
              u.kc = kc;
              u.group = scaled ? p.group : kc;
              u.ldc = plan.nc;
              u.accumulate = pc > 0;
              u.row_scale_stride = plan.mc;
              u.col_scale_stride = plan.nc;
              auto call = [&](const char* apanel, int ir, int jr) {
                u.a = apanel;
                u.b = bchunk + size_t(jr) * kc * es;
                u.c = ws + int64_t(ir) * plan.nc + jr;
                u.m_valid = std::min(plan.tile.mr, mx - ir);
                if (scaled) {
                  u.row_scale = xs_buf + g0 * plan.mc + ir;
                  u.col_scale = ys_buf + g0 * plan.nc + jr;
                }
                plan.tile.ukr(u);
              };
              if (plan.panel_outer) {
                // Each a-panel is converted into L1 once and meets every b-panel of the chunk (L2).
                for (int ir = 0; ir < mx; ir += plan.tile.mr) {
                  const int rows = std::min(plan.tile.mr, mx - ir);
                  prefetch_a_rows(xs, x0 + ir + rows, std::min(plan.tile.mr, mx - ir - rows), pc, kc, p.k);
                  const char* apanel =
                      static_cast<const char*>(ks.prepare_a(xs, x0 + ir, rows, pc, kc, p.k, abuf, &u.lda));
                  for (int jr = 0; jr < ny; jr += plan.tile.nr) call(apanel, ir, jr);
                }
              } else {
                // BLIS order: the a-block (mc x kc) stays in L2, each b-panel (kc x nr) in L1.
                const char* ablock = static_cast<const char*>(ks.prepare_a(xs, x0, mx, pc, kc, p.k, abuf, &u.lda));
                for (int jr = 0; jr < ny; jr += plan.tile.nr)
                  for (int ir = 0; ir < mx; ir += plan.tile.mr) {
                    call(ablock + ir * u.lda * int64_t(es), ir, jr);
                    if (jr == 0) prefetch_a_rows(xs, x0 + ir, u.m_valid, pc + kc, plan.kc, p.k);
                  }
              }
            }
            if (plan.swap) {
              finalize_tile(p, ws, plan.nc, true, y0, ny, x0, mx);
            } else {
              finalize_tile(p, ws, plan.nc, false, x0, mx, y0, ny);
            }
          }
        }
      },
      threads);
}

}  // namespace tessera::gemm
