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

#include "core/env.h"
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
  static const bool on = env::flag("TESSERA_PRINT_PLAN");
  return on;
}

// One K chunk of one (a-block, b-block) tile: what its micro-kernel calls share. The two loop orders
// below (panel outer, BLIS) run the chunk's calls through it.
struct Chunk {
  const GemmProblem& p;
  const PackedPlan& plan;
  const cpu::GemmKernelSet& ks;
  const cpu::GemmSrc& xs;  // the a-side operand
  size_t es = 0;           // bytes per packed element
  int64_t x0 = 0, xe = 0;  // the a-block's first row; the end of this thread's a-side rows
  int mx = 0, ny = 0;      // rows of the a-block, columns of the b-block
  int64_t pc = 0;          // the chunk's first K
  int kc = 0;
  int64_t g0 = 0;                // its first scale group
  bool scaled = false;           // the micro-kernels apply scales (not folded into the operands)
  bool fold = false;             // plan.fold_scales: a-panels are prepared with their scales folded in
  const char* bchunk = nullptr;  // the b-block's packed panels of this chunk
  float* ws = nullptr;           // fp32 workspace tile, row stride ldw
  const float* xs_buf = nullptr;
  const float* ys_buf = nullptr;
  void* abuf = nullptr;
  // The block's thin tail panel (if any) as bf16 rows along K (see TailDotArgs).
  int tail_jr = 0, tail_n = 0;
  bool tail = false;
  const void* tail_rows = nullptr;
  int64_t tail_ld = 0;
  int k_valid = 0;
  int tiles = 0, ukr_calls = 0;  // b-panels; those run by the micro-kernel (not the tail dot)
  bool fuse_chunk = false;       // plan.fused_convert applies to this chunk
  cpu::UkrArgs u{};

  // The a-block's rows [ir, ir + rows) of this chunk as an a-panel block (u.lda set), into buf if copied.
  const char* prepare(int ir, int rows, void* buf) {
    if (fold)
      return static_cast<const char*>(ks.prepare_a_folded(xs, x0 + ir, rows, pc, kc, p.k, buf, &u.lda,
                                                          xs_buf + g0 * plan.mc + ir, plan.mc, p.group));
    return static_cast<const char*>(ks.prepare_a(xs, x0 + ir, rows, pc, kc, p.k, buf, &u.lda));
  }

  // The micro-kernel (or the tail dot) on a-panel rows [ir, ir + mr) x b-panel columns [jr, jr + nr).
  void call(const char* apanel, int ir, int jr) {
    u.a = apanel;
    u.b = bchunk + size_t(jr) * kc * es;
    u.c = ws + int64_t(ir) * u.ldc + jr;
    u.m_valid = std::min(plan.tile.mr, mx - ir);
    u.n_valid = std::min(plan.tile.nr, ny - jr);
    if (scaled) {
      u.row_scale = xs_buf + g0 * plan.mc + ir;
      u.col_scale = ys_buf + g0 * plan.nc + jr;
    }
    if (tail && jr == tail_jr) {
      ks.tail_dot({static_cast<const uint16_t*>(u.a), u.lda, u.m_valid, static_cast<const uint16_t*>(tail_rows),
                   tail_ld, tail_n, k_valid, u.c, u.ldc, u.accumulate, u.group, u.row_scale, u.row_scale_stride,
                   u.col_scale, u.col_scale_stride});
      return;
    }
    plan.tile.ukr(u);
  }

  // Lines the next calls will read (an a-side read in place, or the source of the next conversion) are
  // prefetched by the micro-kernel a few per 16 K pairs (ukr_prefetch.h): share t of `parts` of a-side
  // rows [r0, r0 + rows) x K [k0, k0 + plan.kc) per call. One burst of a panel's lines before the call
  // was mostly dropped (the lab notes: spreading them gained 5-10% for fp8 M=128).
  void prefetch_share(int64_t r0, int rows, int64_t k0, int t, int parts) {
    u.pf_begin = u.pf_end = 0;
    if (rows <= 0 || xs.stride_k != 1 || k0 >= p.k) return;
    const int xes = src_bytes(xs);
    u.pf_base = static_cast<const char*>(xs.data) + (r0 * xs.stride_r + k0) * xes;
    u.pf_row_stride = xs.stride_r * xes;
    u.pf_row_lines = int((std::min<int64_t>(plan.kc, p.k - k0) * xes + 63) / 64);
    const int total = rows * u.pf_row_lines;
    u.pf_begin = total * t / parts;
    u.pf_end = total * (t + 1) / parts;
  }

  // Fused conversion (plan.fused_convert) of this chunk, in whole 64-value units: points the calls'
  // jobs at a-side rows from `row` on, written (row stride kc) at dst; each call then takes units
  // [cv_begin, cv_end) of rows * kc / 64.
  void aim_conversion(int64_t row, uint16_t* dst) {
    u.cv_src = static_cast<const char*>(xs.data) + row * xs.stride_r + pc;
    u.cv_src_stride = xs.stride_r;
    u.cv_dst = dst;
    u.cv_dst_stride = kc;
    u.cv_row_units = kc / 64;
  }
};

// Panel outer: each a-panel is converted into L1 once and meets every b-panel of the chunk (L2). With a
// kernel set that fuses the conversion, the calls of one panel convert the next panel of the chunk into
// the other half of abuf (two panel buffers), so only each chunk's first panel is converted on its own.
// Meanwhile the micro-kernel prefetches the source of the panel that is converted next: in loop order
// the next panel (the one after it when fused), past the chunk's end the next chunk's, past the last
// chunk the next block's.
void run_panel_outer(Chunk& c) {
  const int mr = c.plan.tile.mr;
  const int64_t block_panels = (c.mx + mr - 1) / mr;
  const int64_t panel_elems = int64_t(mr) * c.kc;
  auto panel_in_loop_order = [&](int64_t j, int64_t* r, int64_t* k) {
    if (j < block_panels) {
      *r = c.x0 + j * mr, *k = c.pc;
    } else if (c.pc + c.kc < c.plan.k_pad) {
      *r = c.x0 + (j - block_panels) * mr, *k = c.pc + c.kc;
    } else {
      *r = c.x0 + c.mx + (j - block_panels) * mr, *k = 0;
    }
  };
  const char* apanel = nullptr;
  for (int64_t j = 0; j < block_panels; ++j) {
    const int ir = int(j * mr);
    const int rows = std::min(mr, c.mx - ir);
    uint16_t* own = static_cast<uint16_t*>(c.abuf) + (c.fuse_chunk ? (j % 2) * panel_elems : 0);
    if (!c.fuse_chunk || j == 0) {
      apanel = c.prepare(ir, rows, own);
    } else {
      apanel = reinterpret_cast<const char*>(own);  // converted by the previous panel's calls
      c.u.lda = c.kc;
    }
    int64_t next_r = 0, next_k = 0;
    panel_in_loop_order(j + (c.fuse_chunk ? 2 : 1), &next_r, &next_k);
    const int next_rows = int(std::clamp<int64_t>(c.xe - next_r, 0, mr));
    const bool convert_next = c.fuse_chunk && j + 1 < block_panels;
    const int next_panel_rows = convert_next ? std::min(mr, c.mx - ir - mr) : 0;
    if (convert_next) c.aim_conversion(c.x0 + ir + mr, static_cast<uint16_t*>(c.abuf) + ((j + 1) % 2) * panel_elems);
    for (int jr = 0, t = 0; jr < c.ny; jr += c.plan.tile.nr, ++t) {
      c.prefetch_share(next_r, next_rows, next_k, t, c.tiles);
      if (convert_next && t < c.ukr_calls) {
        const int units = next_panel_rows * (c.kc / 64);
        c.u.cv_begin = units * t / c.ukr_calls;
        c.u.cv_end = units * (t + 1) / c.ukr_calls;
      }
      c.call(apanel, ir, jr);
      c.u.cv_begin = c.u.cv_end = 0;
    }
  }
}

// BLIS order: the a-block (mc x kc) stays in L2 and meets every b-panel of the block. After a panel's
// first call its next chunk is prefetched in one go (on the last chunk, the next a-block's first chunk:
// short K would otherwise start every a-block with its rows still in DRAM). Fused conversion: only the
// first panel is converted up front; each panel's call against the first b-panel converts the next
// panel into its place in the block and prefetches the source of the one after (without that prefetch
// the conversion's loads stall the kernel).
void run_blis_order(Chunk& c) {
  const int mr = c.plan.tile.mr;
  const bool fused = c.fuse_chunk && c.mx > mr;
  const char* ablock = c.prepare(0, fused ? mr : c.mx, c.abuf);
  for (int jr = 0; jr < c.ny; jr += c.plan.tile.nr)
    for (int ir = 0; ir < c.mx; ir += mr) {
      const bool convert_next = fused && jr == 0 && ir + mr < c.mx;
      if (convert_next) {
        c.aim_conversion(c.x0 + ir + mr, static_cast<uint16_t*>(c.abuf) + int64_t(ir + mr) * c.kc);
        c.u.cv_begin = 0;
        c.u.cv_end = std::min(mr, c.mx - ir - mr) * (c.kc / 64);
        if (ir + 2 * mr < c.mx) c.prefetch_share(c.x0 + ir + 2 * mr, std::min(mr, c.mx - ir - 2 * mr), c.pc, 0, 1);
      }
      c.call(ablock + ir * c.u.lda * int64_t(c.es), ir, jr);
      c.u.cv_begin = c.u.cv_end = 0;
      c.u.pf_begin = c.u.pf_end = 0;
      if (jr != 0) continue;
      if (c.pc + c.kc < c.plan.k_pad) {
        prefetch_a_rows(c.xs, c.x0 + ir, c.u.m_valid, c.pc + c.kc, c.plan.kc, c.p.k);  // this panel's next chunk
      } else if (c.x0 + c.mx + ir < c.xe) {
        prefetch_a_rows(c.xs, c.x0 + c.mx + ir, int(std::min<int64_t>(c.u.m_valid, c.xe - (c.x0 + c.mx + ir))), 0,
                        c.plan.kc, c.p.k);
      }
    }
}

// Runs panels [pb, pe) of the plan's split side (all of the other side) of one problem on the calling
// thread: b-blocks (packed once, all of K), a-blocks, K chunks, then one of the two loop orders.
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
    if (plan.fold_scales)
      for (int64_t pc = 0; pc < plan.k_pad; pc += plan.kc)
        ks.fold_b_scales(bpack + pc * ny_pad * es, ny, plan.tile.nr, int(std::min<int64_t>(plan.kc, plan.k_pad - pc)),
                         p.group, ys_buf + pc / p.group * plan.nc, plan.nc);

    for (int64_t x0 = xb; x0 < xe; x0 += plan.mc) {
      const int mx = int(std::min<int64_t>(plan.mc, xe - x0));
      if (scaled) expand_scales(xscale, 0, groups, x0, mx, xs_buf, plan.mc);
      for (int64_t pc = 0; pc < plan.k_pad; pc += plan.kc) {
        Chunk c{p, plan, ks, xs};
        c.es = es;
        c.x0 = x0, c.xe = xe, c.mx = mx, c.ny = ny;
        c.pc = pc;
        c.kc = int(std::min<int64_t>(plan.kc, plan.k_pad - pc));
        c.scaled = scaled && !plan.fold_scales;
        c.fold = plan.fold_scales;
        c.g0 = scaled ? pc / p.group : 0;
        c.bchunk = bpack + pc * ny_pad * es;
        c.ws = ws;
        c.xs_buf = xs_buf;
        c.ys_buf = ys_buf;
        c.abuf = abuf;
        c.u.kc = c.kc;
        c.u.group = c.scaled ? p.group : c.kc;
        c.u.ldc = ldw;
        c.u.accumulate = pc > 0;
        c.u.row_scale_stride = plan.mc;
        c.u.col_scale_stride = plan.nc;
        // The thin tail panel: read in place, or converted once per chunk like an a-side (same lane order
        // as the a-panels). In-place bf16 rows end at K; converted ones are zero-padded to kc.
        c.tail_jr = (ny - 1) / plan.tile.nr * plan.tile.nr;
        c.tail_n = ny - c.tail_jr;
        c.tail = c.tail_n < plan.tile.nr && c.tail_n <= plan.dot_cols;
        if (c.tail)
          c.tail_rows = ks.prepare_a(ys, y0 + c.tail_jr, c.tail_n, pc, c.kc, p.k,
                                     thread_scratch(7, size_t(plan.dot_cols) * c.kc * es), &c.tail_ld);
        c.k_valid = int(plan.lane_order ? c.kc : std::min<int64_t>(c.kc, p.k - pc));
        c.tiles = int((ny + plan.tile.nr - 1) / plan.tile.nr);
        c.ukr_calls = c.tiles - (c.tail ? 1 : 0);  // the tail-dot path does no conversion share
        c.fuse_chunk = plan.fused_convert && pc + c.kc <= p.k && c.ukr_calls > 0;
        if (plan.panel_outer) {
          run_panel_outer(c);
        } else {
          run_blis_order(c);
        }
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
  parallel_shares(
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
