// The tile math of the dense MHA prefill backward (flash_attn_varlen_bwd): one (query-row tile, key tile)
// step of FlashAttention-2's backward in fp32. One body (mla_bwd_tiles.inc) is compiled portably
// (scalar/) and with AVX-512 flags (avx512/); the driver picks by the active level. Loops vectorise along
// the inner dimension (no cross-lane reductions) and every sum runs in a fixed order, so the bits never
// depend on threads. A plain interface header (ISA-file rule 1: no inline functions).
#pragma once

#include <stdint.h>

namespace tessera::cpu {

constexpr int kBwdRows = 32;  // query rows (token, head) per tile
constexpr int kBwdKeys = 64;  // keys per tile

// One key tile, held transposed for the score and dP products (plain aggregates: no inline constructors).
struct KeyTile {
  int nk;          // keys in the tile
  const float* kt;  // [d_qk][kBwdKeys]
  const float* vt;  // [d_v][kBwdKeys]
};

// One query-row tile.
struct RowTile {
  int nr;
  const float* q;      // [nr][d_qk]
  const float* dout;   // [nr][d_v]
  const float* lse;    // [nr]
  const int* visible;  // [nr]: keys of this tile row r may see (0..nk)
};

struct MlaBwdKernelSet {
  // p [nr][kBwdKeys] = exp(scale * q.k - lse) and dp = dO.v, both 0 where not visible.
  void (*probs)(const RowTile& rows, const KeyTile& keys, int d_qk, int d_v, float scale, float* p, float* dp);
  // ds = p * (dp - delta[r]) (in place over dp).
  void (*dscores)(const float* p, int nr, const float* delta, float* dp);
  // acc [nk][n] += sum_r w[r][t] * x[r][:]: dV += P^T dO (x = dO) and dK += dS^T Q (x = Q).
  void (*accumulate_keys)(const float* w, int nr, int nk, const float* x, int n, float* acc);
  // acc [nr][d_qk] += sum_t w[r][t] * k[t][:] (k row-major [nk][d_qk]).
  void (*accumulate_rows)(const float* w, int nr, int nk, const float* k, int d_qk, float* acc);
};

const MlaBwdKernelSet& mla_bwd_kernels_scalar();
const MlaBwdKernelSet& mla_bwd_kernels_avx512();  // only when the active level is avx512 or higher

}  // namespace tessera::cpu
