// Packing for the avx2 (fp32-FMA) kernel set: gemm_pack_f32-inl.h on 8-lane ymm vectors, and the set
// itself (one 6 x 16 tile).
#include "backends/cpu/avx2/f32_vec.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemm_pack_f32-inl.h"

namespace tessera::cpu {

void gemm_ukr_avx2_6x16(const UkrArgs& p);

const GemmKernelSet* gemm_kernels_avx2() {
  // kc = 256: a 256 x 16 fp32 b-panel (16 KiB) and a 6-row a-panel (6 KiB) stay in L1; no slower than
  // 128 or 384 (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md).
  static const GemmKernelSet set = [] {
    GemmKernelSet s = {
        "avx2",
        /*k_align=*/1,
        /*elem_bytes=*/4,
        /*kc=*/256,
        {{6, 16, gemm_ukr_avx2_6x16, 0.0f}},
        /*num_tiles=*/1,
        accepts_f32_sources,
        prepare_a_f32<Avx2F32>,
        pack_b_f32<Avx2F32>,
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
