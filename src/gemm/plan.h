// The blocking plan of the packed GEMM driver: a pure function of (shape, operand layouts, kernel set,
// thread count). TESSERA_PRINT_PLAN=1 prints every plan; TESSERA_GEMM_{MC,NC,KC,SWAP,TILE,PANEL_OUTER,
// FUSED_CONVERT} override choices for tuning experiments (KC changes the fp32 summation order; nothing
// else does).
#pragma once

#include <cstdint>
#include <string>

#include "backends/cpu/gemm_kernel_set.h"
#include "gemm/gemm_problem.h"

namespace tessera::gemm {

struct PackedPlan {
  // swap == false: the a-side (broadcast rows) is A and the b-side (vector columns) is B.
  // swap == true: the a-side is B and the b-side is A; the kernel then computes D^T tiles.
  bool swap = false;
  int64_t x = 0, y = 0;     // a-side rows, b-side columns
  int64_t k_pad = 0;        // K rounded up to the kernel's k_align (to 64 with lane_order)
  bool lane_order = false;  // fp8 x fp8: both sides converted in lane order (GemmSrc::lane_order)
  cpu::GemmTile tile{};     // register tile (mr x nr) and its micro-kernel
  int mc = 0, nc = 0, kc = 0;
  // Loop order inside a tile: panel_outer converts one a-panel at a time into L1 and runs it against
  // every b-panel of the K chunk (chosen when the a-side needs converting and the b chunk fits L2);
  // otherwise BLIS order (a-block in L2, b-panel in L1).
  bool panel_outer = false;
  // An e4m3 a-side (lane order) and a kernel set that fuses conversions: micro-kernel calls convert the
  // next a-panel while they compute (GemmKernelSet::fuses_e4m3_convert, packed.cc): in panel-outer
  // order each panel's calls, in BLIS order each panel's call against the block's first b-panel.
  bool fused_convert = false;
  // Threads split one side into contiguous, equal ranges of register panels (mr rows or nr columns),
  // so every thread does the same work; split_y also keeps each b-panel packed by exactly one thread.
  bool split_y = false;
  int threads = 1;
  int dot_cols = 0;          // a b-side tail of at most this many columns goes to ks.tail_dot (0: none)
  bool a_converted = false;  // the a-side is copied/converted into a buffer (not read in place)
  // Every scale is a power of two the kernel set can fold into its prepared and packed operands
  // (GemmKernelSet::prepare_a_folded): the micro-kernels then run unscaled over whole K chunks instead
  // of one scale group at a time. TESSERA_GEMM_FOLD_SCALES=0 turns it off.
  bool fold_scales = false;
  std::string describe() const;
};

// batch_bytes: the bytes of the b operands of every problem run in the same batch (the groups of an
// MoE GEMM): above half the L3 each problem's b comes from DRAM whatever its own size.
PackedPlan make_packed_plan(const GemmProblem& p, const cpu::GemmKernelSet& ks, int threads, int64_t batch_bytes = 0);

// The columns' worth of work a tile spends on y b-side columns (tails in n_step units or by the kernel
// set's dot-product path when at most dot_cols wide; a_converted: the a-side is converted into a
// buffer rather than read in place, see plan.cc).
double computed_cols(int64_t y, const cpu::GemmTile& t, int n_step, int dot_cols, bool a_converted);
// The batch_bytes argument of make_packed_plan for the problems of one batch (0 for a single one).
int64_t batch_b_bytes(const GemmProblem* problems, int64_t count);

// The half-open range of panels [begin, end) of `panels` that thread t of nt works on.
inline void thread_panel_range(int64_t panels, int t, int nt, int64_t* begin, int64_t* end) {
  *begin = panels * t / nt;
  *end = panels * (t + 1) / nt;
}

}  // namespace tessera::gemm
