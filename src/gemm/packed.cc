// The packed GEMM driver (BLIS loops around a kernel set's micro-kernel).
//
// Output tiles of mc a-side rows x nc b-side columns are dealt to threads in static contiguous ranges,
// b-block-major, so consecutive tiles of a thread share their packed b-block. Per tile:
//   for pc in K by kc:                  (never split across threads: fixed fp32 summation order)
//     a-block  = prepare_a(rows of the tile, K chunk)        (in place for bf16 K-contiguous sources)
//     for jr over nr-wide b-panels:     (b-panel kc x nr stays in L1)
//       for ir over mr-row a-panels:    (a-block mc x kc stays in L2)
//         ukr -> fp32 workspace tile
//   finalize: D = round(C + workspace)
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gemm/packed.h"
#include "gemm/plan.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {
namespace {

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
  if (print_plans()) std::fprintf(stderr, "[tessera] %s: %s kernel=%s\n", p.fn, plan.describe().c_str(), ks.name);

  const cpu::GemmSrc& xs = plan.swap ? p.b : p.a;  // a-side operand
  const cpu::GemmSrc& ys = plan.swap ? p.a : p.b;  // b-side operand
  const ScaleTable& xscale = plan.swap ? p.sb : p.sa;
  const ScaleTable& yscale = plan.swap ? p.sa : p.sb;
  const bool scaled = p.group > 0;
  const int64_t groups = scale_groups(p);

  const int64_t tiles = plan.tiles_x * plan.tiles_y;
  const int threads = int(std::min<int64_t>(plan.threads, tiles));
  parallel_run(
      [&](int tid, int nt) {
        const int64_t t_begin = tiles * tid / nt, t_end = tiles * (tid + 1) / nt;
        if (t_begin >= t_end) return;
        const size_t es = size_t(ks.elem_bytes);
        char* bpack = static_cast<char*>(thread_scratch(0, size_t(plan.k_pad) * plan.nc * es));
        void* abuf = thread_scratch(1, size_t(plan.mc) * plan.kc * es);
        float* ws = static_cast<float*>(thread_scratch(2, size_t(plan.mc) * plan.nc * sizeof(float)));
        // Per-tile scales expanded to one fp32 per row and group: [groups][mc] and [groups][nc].
        float* xs_buf = scaled ? static_cast<float*>(thread_scratch(3, size_t(groups) * plan.mc * 4)) : nullptr;
        float* ys_buf = scaled ? static_cast<float*>(thread_scratch(4, size_t(groups) * plan.nc * 4)) : nullptr;
        int64_t packed_ty = -1;

        for (int64_t t = t_begin; t < t_end; ++t) {
          const int64_t ty = t / plan.tiles_x, tx = t % plan.tiles_x;
          const int64_t y0 = ty * plan.nc, x0 = tx * plan.mc;
          const int ny = int(std::min<int64_t>(plan.nc, plan.y - y0));
          const int mx = int(std::min<int64_t>(plan.mc, plan.x - x0));
          const int ny_pad = (ny + ks.nr - 1) / ks.nr * ks.nr;
          if (ty != packed_ty) {
            for (int64_t pc = 0; pc < plan.k_pad; pc += plan.kc) {
              const int kc = int(std::min<int64_t>(plan.kc, plan.k_pad - pc));
              ks.pack_b(ys, y0, ny, plan.y, pc, kc, p.k, bpack + pc * ny_pad * es);
            }
            if (scaled) expand_scales(yscale, 0, groups, y0, ny, ys_buf, plan.nc);
            packed_ty = ty;
          }
          if (scaled) expand_scales(xscale, 0, groups, x0, mx, xs_buf, plan.mc);
          for (int64_t pc = 0; pc < plan.k_pad; pc += plan.kc) {
            const int kc = int(std::min<int64_t>(plan.kc, plan.k_pad - pc));
            int64_t lda = 0;
            const char* ablock = static_cast<const char*>(ks.prepare_a(xs, x0, mx, pc, kc, p.k, abuf, &lda));
            const char* bchunk = bpack + pc * ny_pad * es;
            const int64_t g0 = scaled ? pc / p.group : 0;
            cpu::UkrArgs u{};
            u.lda = lda;
            u.kc = kc;
            u.group = scaled ? p.group : kc;
            u.ldc = plan.nc;
            u.accumulate = pc > 0;
            u.row_scale_stride = plan.mc;
            u.col_scale_stride = plan.nc;
            for (int jr = 0; jr < ny; jr += ks.nr) {
              u.b = bchunk + size_t(jr) * kc * es;
              for (int ir = 0; ir < mx; ir += ks.mr) {
                u.a = ablock + ir * lda * int64_t(es);
                u.c = ws + int64_t(ir) * plan.nc + jr;
                u.m_valid = std::min(ks.mr, mx - ir);
                if (scaled) {
                  u.row_scale = xs_buf + g0 * plan.mc + ir;
                  u.col_scale = ys_buf + g0 * plan.nc + jr;
                }
                ks.ukr(u);
              }
            }
          }
          if (plan.swap) {
            finalize_tile(p, ws, plan.nc, true, y0, ny, x0, mx);
          } else {
            finalize_tile(p, ws, plan.nc, false, x0, mx, y0, ny);
          }
        }
      },
      threads);
}

}  // namespace tessera::gemm
