// Packing for the avx512 (fp32-FMA) kernel set: gemm_pack_f32-inl.h on 16-lane zmm vectors, and the
// set itself (tiles 8 x 48 and 14 x 32).
#include "backends/cpu/avx512/f32_vec.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemm_pack_f32-inl.h"

namespace tessera::cpu {

void gemm_ukr_avx512_8x48(const UkrArgs& p);
void gemm_ukr_avx512_14x32(const UkrArgs& p);

const GemmKernelSet* gemm_kernels_avx512() {
  // kc = 256: fewer c-tile passes per K; faster than 128 on Zen 5 although a 256 x 48 fp32 b-panel
  // (48 KiB) leaves L1 (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md).
  static const GemmKernelSet set = [] {
    GemmKernelSet s = {
        "avx512",
        /*k_align=*/1,
        /*elem_bytes=*/4,
        /*kc=*/256,
        {{8, 48, gemm_ukr_avx512_8x48, 0.0f}, {14, 32, gemm_ukr_avx512_14x32, 0.0f}},
        /*num_tiles=*/2,
        accepts_f32_sources,
        prepare_a_f32<Avx512F32>,
        pack_b_f32<Avx512F32>,
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
