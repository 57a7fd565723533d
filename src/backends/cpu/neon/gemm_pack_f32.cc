// Packing for the neon (fp32-FMA) kernel set: gemm_pack_f32-inl.h on 4-lane q registers, and the set
// itself (one 5 x 16 tile, gemm_ukr_f32.cc).
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemm_pack_f32-inl.h"
#include "backends/cpu/neon/f32_vec.h"

namespace tessera::cpu {

void gemm_ukr_neon_5x16(const UkrArgs& p);

const GemmKernelSet* gemm_kernels_neon() {
  // kc = 256: a 256 x 16 fp32 b-panel (16 KiB) and a 5-row a-panel (5 KiB) stay well inside a 64 KiB
  // L1 (Neoverse N1/V1/V2); not tuned on hardware (only emulated so far).
  static const GemmKernelSet set = [] {
    GemmKernelSet s = {
        "neon",
        /*k_align=*/1,
        /*elem_bytes=*/4,
        /*kc=*/256,
        {{5, 16, gemm_ukr_neon_5x16, 0.0f}},
        /*num_tiles=*/1,
        accepts_f32_sources,
        prepare_a_f32<NeonF32>,
        pack_b_f32<NeonF32>,
        /*n_step=*/0,
        /*tail_dot=*/nullptr,
        /*tail_dot_cols=*/0,
        /*fuses_e4m3_convert=*/false,
    };
    s.k_order_chain = true;
    return s;
  }();
  return &set;
}

}  // namespace tessera::cpu
