// The dense MHA prefill backward (flash_attn_varlen_bwd) per ISA level: the GEMM kernel sets that run its
// five products per tile pair (S = Q K^T, dP = dO V^T, dV += P^T dO, dK += dS^T Q, dQ += dS K) and the
// element-wise steps between them (P from the forward's lse, delta, dS), compiled per level from one body
// (mla_bwd_tiles.inc: scalar/, avx2/, avx512/, neon/). Registered in the kernel registry (Slot::kMlaBwd). Every
// sum runs in a fixed order, so the bits never depend on threads. A plain interface header (ISA-file
// rule 1: no inline functions).
#pragma once

#include <stdint.h>

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {

// Element-wise steps on fp32 product tiles. "Operand" outputs are the next products' A operands: bf16
// (round to nearest even) when `bf16`, else fp32.
struct MlaBwdTileOps {
  // Row pass, tiles [nr][ld] (row r = query row, column t = key): s becomes p = exp(scale * s - lse[r])
  // for t < visible[r], else 0 (t < nk), and delta[r] += sum_t p * dp in a fixed order.
  void (*row_probs)(float* s, const float* dp, int nr, int nk, int64_t ld, const float* lse, const int* visible,
                    float scale, float* delta);
  // Row pass: ds[r][t] (operand, row stride ld_ds) = p * (dp - delta[r]) for t < nk; when p_op is not
  // null, p itself too, as an operand p_op[r][t] (same row stride), for the key pass to reuse.
  void (*row_dscores)(const float* p, const float* dp, int nr, int nk, int64_t ld, const float* delta, bool bf16,
                      void* ds, int64_t ld_ds, void* p_op);
  // Key pass, tiles [nk][ld] (row t = key, column r = query row < nr): p = exp(scale * s - lse[r]) for
  // t < visible[r], else 0, and ds = p * (dp - delta[r]), both written as operands [nk][ld_op].
  void (*key_grads)(const float* s, const float* dp, int nk, int nr, int64_t ld, const float* lse, const float* delta,
                    const int* visible, float scale, bool bf16, void* p, void* ds, int64_t ld_op);
  // Row pass, bf16 sets with K-pair b-panels (MlaBwdKernelSet::pair_panels): p and ds = p * (dp - delta[r])
  // (the bits row_dscores gives) as b-panels of products whose K is the tile's rows: panel j (keys
  // j * nr_panel...) at out + j * kc * nr_panel, element (r, t) at [(r / 2) * 2 * nr_panel + (t % nr_panel) * 2
  // + r % 2]; rows nr..kc-1 and keys past nk (to whole panels) are zero. ds also as row_dscores writes it
  // (bf16, ds_rows[r * ld_ds + t] for r < nr, t < nk), the dQ product's A side.
  void (*row_pair_panels)(const float* p, const float* dp, int nr, int nk, int64_t ld, const float* delta, int nr_panel,
                          int kc, uint16_t* p_out, uint16_t* ds_out, uint16_t* ds_rows, int64_t ld_ds);
};

struct MlaBwdKernelSet {
  const char* name;
  // Products for bf16 inputs (bf16 operands: P and dS rounded to bf16, fp32 sums), or nullptr: portable
  // fp32 loops.
  const GemmKernelSet* gemm;
  // Products for fp16 inputs (fp32 operands: the bf16 sets would round q, k, v), or nullptr as above.
  const GemmKernelSet* gemm_f32;
  const MlaBwdTileOps* ops;
  // Query rows (token, head) per row tile and keys per key tile: also the K of the products dV, dK (rows)
  // and dQ (keys), so larger tiles amortise the micro-kernels' accumulator loads and stores.
  int tile_rows, tile_keys;
  // gemm packs b as K pairs (the avx512bf16 and amx sets' layout, see row_pair_panels).
  bool pair_panels;
};

const MlaBwdTileOps* mla_bwd_ops_scalar();
const MlaBwdTileOps* mla_bwd_ops_avx2();    // only when the active level is avx2 or higher
const MlaBwdTileOps* mla_bwd_ops_avx512();  // only when the active level is avx512 or higher
const MlaBwdTileOps* mla_bwd_ops_neon();    // ARM builds only (nullptr elsewhere)

}  // namespace tessera::cpu
