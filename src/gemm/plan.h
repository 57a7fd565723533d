// The blocking plan of the packed GEMM driver: a pure function of (shape, operand layouts, kernel set,
// thread count). TESSERA_PRINT_PLAN=1 prints every plan; TESSERA_GEMM_{MC,NC,KC} override the blocks
// (for tuning experiments; the results stay bit-identical only if KC is kept).
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
  int64_t x = 0, y = 0;  // a-side rows, b-side columns
  int64_t k_pad = 0;     // K rounded up to the kernel's k_align
  int mc = 0, nc = 0, kc = 0;
  int64_t tiles_x = 0, tiles_y = 0;
  int threads = 1;
  std::string describe() const;
};

PackedPlan make_packed_plan(const GemmProblem& p, const cpu::GemmKernelSet& ks, int threads);

}  // namespace tessera::gemm
