// The packed GEMM driver (BLIS loops around a kernel set's micro-kernel).
//
// Each thread owns an equal, contiguous range of register panels of one side (plan.split_y) and all of
// the other side. It packs one b-block (nc columns, all of K) at a time and runs every a-block (mc rows)
// of its range against it. Per (a-block, b-block) tile:
//   for pc in K by kc:                  (never split across threads: fixed fp32 summation order)
//     a-block  = prepare_a(rows of the tile, K chunk)        (in place for bf16 K-contiguous sources)
//     for jr over nr-wide b-panels:     (b-panel kc x nr: L1 or, with long K blocks, L2)
//       for ir over mr-row a-panels:    (a-block mc x kc stays in L2)
//         ukr -> fp32 workspace tile
//   finalize: D = round(C + workspace)
#include "gemm/packed.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gemm/plan.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {
namespace {

// The fp32 workspace's row stride (floats): nc, or one line more when nc floats are a multiple of 4 KiB
// (the L1's set stride), where all rows of a C tile would share one L1 set. amx, nc = 1024, 2 threads,
// separate processes, padded vs not: bf16 M=1024 N=7168 K=2048 x1.10 (faster in 8 of 8 rounds), N=2112
// K=7168 x1.05 (6/6), N=24576 K=1536 x1.03 (8/10), N=32768 K=512 x1.04 (9/10); fp8 N=7168 x1.07 (6/8).
// Padding the avx512bf16 set's 1056 (no alias) took 6-9% longer.
int64_t workspace_stride(int nc) {
  return int64_t(nc) * 4 % 4096 == 0 ? nc + 16 : nc;
}

// Prefetches (into L2) the K-chunk [k0, k0+kc) of a-side rows [r0, r0+rows) while the current chunk is
// being computed, so a-sides read in place from DRAM do not stall the next chunk's first pass.
void prefetch_a_rows(const cpu::GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total) {
  if (s.stride_k != 1 || k0 >= k_total) return;
  const int es = src_bytes(s);
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

// Runs panels [pb, pe) of the plan's split side (all of the other side) of one problem on the calling
// thread.
void run_range(const GemmProblem& p, const PackedPlan& plan, const cpu::GemmKernelSet& ks, int64_t pb, int64_t pe) {
  cpu::GemmSrc xs = plan.swap ? p.b : p.a;  // a-side operand
  cpu::GemmSrc ys = plan.swap ? p.a : p.b;  // b-side operand
  xs.lane_order = ys.lane_order = plan.lane_order;
  const ScaleTable& xscale = plan.swap ? p.sb : p.sa;
  const ScaleTable& yscale = plan.swap ? p.sa : p.sb;
  const bool scaled = p.group > 0;
  const int64_t groups = scale_groups(p);

  int64_t xb = 0, xe = plan.x, yb = 0, ye = plan.y;
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
  const int64_t ldw = workspace_stride(plan.nc);
  float* ws = static_cast<float*>(thread_scratch(2, size_t(plan.mc) * ldw * sizeof(float)));
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
        u.ldc = ldw;
        u.accumulate = pc > 0;
        u.row_scale_stride = plan.mc;
        u.col_scale_stride = plan.nc;
        // The block's thin tail panel (if any) as bf16 rows along K: read in place, or converted once
        // per chunk like an a-side (same lane order as the a-panels).
        const int tail_jr = (ny - 1) / plan.tile.nr * plan.tile.nr, tail_n = ny - tail_jr;
        const bool tail = tail_n < plan.tile.nr && tail_n <= plan.dot_cols;
        const void* tail_rows = nullptr;
        int64_t tail_ld = 0;
        if (tail)
          tail_rows = ks.prepare_a(ys, y0 + tail_jr, tail_n, pc, kc, p.k,
                                   thread_scratch(7, size_t(plan.dot_cols) * kc * es), &tail_ld);
        // In-place bf16 rows end at K; converted ones (lane order included) are zero-padded to kc.
        const int k_valid = int(plan.lane_order ? kc : std::min<int64_t>(kc, p.k - pc));
        auto call = [&](const char* apanel, int ir, int jr) {
          u.a = apanel;
          u.b = bchunk + size_t(jr) * kc * es;
          u.c = ws + int64_t(ir) * ldw + jr;
          u.m_valid = std::min(plan.tile.mr, mx - ir);
          u.n_valid = std::min(plan.tile.nr, ny - jr);
          if (scaled) {
            u.row_scale = xs_buf + g0 * plan.mc + ir;
            u.col_scale = ys_buf + g0 * plan.nc + jr;
          }
          if (tail && jr == tail_jr) {
            // A thin tail panel: dot products over the tail's rows (see TailDotArgs).
            ks.tail_dot({static_cast<const uint16_t*>(u.a), u.lda, u.m_valid, static_cast<const uint16_t*>(tail_rows),
                         tail_ld, tail_n, k_valid, u.c, u.ldc, u.accumulate, u.group, u.row_scale,
                         u.row_scale_stride, u.col_scale, u.col_scale_stride});
            return;
          }
          plan.tile.ukr(u);
        };
        // Lines the next calls will read (an a-side read in place, or the source of the next conversion)
        // are prefetched by the micro-kernel a few per 16 K pairs (ukr_prefetch.h): share t of `parts` of
        // a-side rows [r0, r0 + rows) x K [k0, k0 + plan.kc) per call. One burst of a panel's lines
        // before the call was mostly dropped (an fp8 a-panel's conversion read at ~14 cycles per 64
        // bytes; spread: +5-10% for fp8 M=128).
        auto prefetch_share = [&](int64_t r0, int rows, int64_t k0, int t, int parts) {
          u.pf_begin = u.pf_end = 0;
          if (rows <= 0 || xs.stride_k != 1 || k0 >= p.k) return;
          const int xes = src_bytes(xs);
          u.pf_base = static_cast<const char*>(xs.data) + (r0 * xs.stride_r + k0) * xes;
          u.pf_row_stride = xs.stride_r * xes;
          u.pf_row_lines = int((std::min<int64_t>(plan.kc, p.k - k0) * xes + 63) / 64);
          const int total = rows * u.pf_row_lines;
          u.pf_begin = total * t / parts;
          u.pf_end = total * (t + 1) / parts;
        };
        const int tiles = int((ny + plan.tile.nr - 1) / plan.tile.nr);
        const int mr = plan.tile.mr;
        const int ukr_calls = tiles - (tail ? 1 : 0);  // the tail-dot path does no conversion share
        // Fused conversion (plan.fused_convert) of this chunk: whole 64-value units, and a micro-kernel
        // call to do it in. aim_conversion points the calls' jobs at a-side rows from `row` on, written
        // (row stride kc) at dst; each call then takes units [cv_begin, cv_end) of rows * kc / 64.
        const bool fuse_chunk = plan.fused_convert && pc + kc <= p.k && ukr_calls > 0;
        auto aim_conversion = [&](int64_t row, uint16_t* dst) {
          u.cv_src = static_cast<const char*>(xs.data) + row * xs.stride_r + pc;
          u.cv_src_stride = xs.stride_r;
          u.cv_dst = dst;
          u.cv_dst_stride = kc;
          u.cv_row_units = kc / 64;
        };
        if (plan.panel_outer) {
          // Each a-panel is converted into L1 once and meets every b-panel of the chunk (L2). With a
          // kernel set that fuses the conversion, the calls of one panel convert the next panel of the
          // chunk into the other half of abuf (two panel buffers), so only each chunk's first panel is
          // converted on its own. Meanwhile the micro-kernel prefetches the source of the panel that is
          // converted next: in loop order the next panel (the one after it when fused), past the
          // chunk's end the next chunk's, past the last chunk the next block's.
          const int64_t block_panels = (mx + mr - 1) / mr;
          const int64_t panel_elems = int64_t(mr) * kc;
          auto panel_in_loop_order = [&](int64_t j, int64_t* r, int64_t* k) {
            if (j < block_panels) {
              *r = x0 + j * mr, *k = pc;
            } else if (pc + kc < plan.k_pad) {
              *r = x0 + (j - block_panels) * mr, *k = pc + kc;
            } else {
              *r = x0 + mx + (j - block_panels) * mr, *k = 0;
            }
          };
          const char* apanel = nullptr;
          for (int64_t j = 0; j < block_panels; ++j) {
            const int ir = int(j * mr);
            const int rows = std::min(mr, mx - ir);
            uint16_t* own = static_cast<uint16_t*>(abuf) + (fuse_chunk ? (j % 2) * panel_elems : 0);
            if (!fuse_chunk || j == 0) {
              apanel = static_cast<const char*>(ks.prepare_a(xs, x0 + ir, rows, pc, kc, p.k, own, &u.lda));
            } else {
              apanel = reinterpret_cast<const char*>(own);  // converted by the previous panel's calls
              u.lda = kc;
            }
            int64_t next_r = 0, next_k = 0;
            panel_in_loop_order(j + (fuse_chunk ? 2 : 1), &next_r, &next_k);
            const int next_rows = int(std::clamp<int64_t>(xe - next_r, 0, mr));
            const bool convert_next = fuse_chunk && j + 1 < block_panels;
            const int next_panel_rows = convert_next ? std::min(mr, mx - ir - mr) : 0;
            if (convert_next) aim_conversion(x0 + ir + mr, static_cast<uint16_t*>(abuf) + ((j + 1) % 2) * panel_elems);
            for (int jr = 0, t = 0; jr < ny; jr += plan.tile.nr, ++t) {
              prefetch_share(next_r, next_rows, next_k, t, tiles);
              if (convert_next && t < ukr_calls) {
                const int units = next_panel_rows * (kc / 64);
                u.cv_begin = units * t / ukr_calls;
                u.cv_end = units * (t + 1) / ukr_calls;
              }
              call(apanel, ir, jr);
              u.cv_begin = u.cv_end = 0;
            }
          }
        } else {
          // BLIS order: the a-block (mc x kc) stays in L2 and meets every b-panel of the block. After a
          // panel's first call its next chunk is prefetched in one go (on the last chunk, the next
          // a-block's first chunk: short K would otherwise start every a-block with its rows still in
          // DRAM). Spreading these through the calls like above measured 1-3% slower for bf16 M=128.
          // Fused conversion: only the first panel is converted up front; each panel's call against the
          // first b-panel converts the next panel into its place in the block and prefetches the
          // source of the one after.
          const bool fused = fuse_chunk && mx > mr;
          const char* ablock =
              static_cast<const char*>(ks.prepare_a(xs, x0, fused ? mr : mx, pc, kc, p.k, abuf, &u.lda));
          for (int jr = 0; jr < ny; jr += plan.tile.nr)
            for (int ir = 0; ir < mx; ir += mr) {
              const bool convert_next = fused && jr == 0 && ir + mr < mx;
              if (convert_next) {
                aim_conversion(x0 + ir + mr, static_cast<uint16_t*>(abuf) + int64_t(ir + mr) * kc);
                u.cv_begin = 0;
                u.cv_end = std::min(mr, mx - ir - mr) * (kc / 64);
                // From DRAM or L2 the conversion's loads would stall the kernel (without this prefetch
                // M=1024 N=7168 K=2048 ran 2-7% slower fused than separate).
                if (ir + 2 * mr < mx) prefetch_share(x0 + ir + 2 * mr, std::min(mr, mx - ir - 2 * mr), pc, 0, 1);
              }
              call(ablock + ir * u.lda * int64_t(es), ir, jr);
              u.cv_begin = u.cv_end = 0;
              u.pf_begin = u.pf_end = 0;
              if (jr != 0) continue;
              if (pc + kc < plan.k_pad) {
                prefetch_a_rows(xs, x0 + ir, u.m_valid, pc + kc, plan.kc, p.k);  // this panel's next chunk
              } else if (x0 + mx + ir < xe) {
                prefetch_a_rows(xs, x0 + mx + ir, int(std::min<int64_t>(u.m_valid, xe - (x0 + mx + ir))), 0,
                                plan.kc, p.k);
              }
            }
        }
        u.pf_begin = u.pf_end = 0;
      }
      if (plan.swap) {
        finalize_tile(p, ws, ldw, true, y0, ny, x0, mx);
      } else {
        finalize_tile(p, ws, ldw, false, x0, mx, y0, ny);
      }
    }
  }
}

int64_t split_panels(const PackedPlan& plan) {
  return plan.split_y ? (plan.y + plan.tile.nr - 1) / plan.tile.nr : (plan.x + plan.tile.mr - 1) / plan.tile.mr;
}

}  // namespace

void run_packed_batch(const GemmProblem* problems, int64_t count, const cpu::GemmKernelSet& ks) {
  const int threads = num_threads();
  std::vector<PackedPlan> plans(static_cast<size_t>(count));
  // Work is measured in padded lane multiply-adds; problem i covers [offset[i], offset[i+1]).
  std::vector<double> offset(size_t(count) + 1, 0.0), per_panel(size_t(count), 0.0);
  const int64_t b_bytes = batch_b_bytes(problems, count);
  for (int64_t i = 0; i < count; ++i) {
    const GemmProblem& p = problems[i];
    plans[i] = make_packed_plan(p, ks, threads, b_bytes);
    const PackedPlan& plan = plans[i];
    if (print_plans()) std::fprintf(stderr, "[tessera] %s: %s kernels=%s\n", p.fn, plan.describe().c_str(), ks.name);
    // Work per split panel counts the other side as the kernels compute it (padding and tails included),
    // so uneven groups split between threads by their real cost.
    const double other = plan.split_y ? double((plan.x + plan.tile.mr - 1) / plan.tile.mr * plan.tile.mr)
                                      : computed_cols(plan.y, plan.tile, ks.n_step, plan.dot_cols, plan.a_converted);
    const double width = plan.split_y ? plan.tile.nr : plan.tile.mr;
    per_panel[i] = width * other * double(plan.k_pad);
    offset[i + 1] = offset[i] + per_panel[i] * double(split_panels(plan));
  }
  const double total = offset[size_t(count)];
  if (total <= 0) return;
  int64_t max_panels = 0;
  for (const PackedPlan& plan : plans) max_panels += split_panels(plan);
  // Each thread takes an equal share of the total work; a share maps to panel ranges of one or more
  // problems (boundaries computed by the same expression on both sides, so ranges never overlap).
  parallel_run(
      [&](int tid, int nt) {
        const double s = total * tid / nt, e = total * (tid + 1) / nt;
        for (int64_t i = 0; i < count; ++i) {
          if (offset[i + 1] <= s || offset[i] >= e) continue;
          const int64_t panels = split_panels(plans[i]);
          auto panel_at = [&](double w) {
            return std::clamp<int64_t>(int64_t(std::llround((w - offset[i]) / per_panel[i])), 0, panels);
          };
          const int64_t pb = panel_at(s), pe = panel_at(e);
          if (pb < pe) run_range(problems[i], plans[i], ks, pb, pe);
        }
      },
      int(std::min<int64_t>(threads, max_panels)));
}

void run_packed(const GemmProblem& p, const cpu::GemmKernelSet& ks) {
  run_packed_batch(&p, 1, ks);
}

}  // namespace tessera::gemm
