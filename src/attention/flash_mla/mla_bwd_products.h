// The products of the dense MHA prefill backward, c (+)= A B^T on small tiles, run on a GEMM kernel set's
// own packing and register tiles (gemm_kernel_set.h), or on portable fp32 loops when there is none. The
// caller packs each B once (pack_b) and prepares each A once (prepare_a) and reuses them across products:
// the backward meets every K, V, Q and dO tile many times.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::flash_mla {

struct BwdGemm {
  const cpu::GemmKernelSet* ks = nullptr;          // nullptr: portable fp32 loops
  cpu::GemmSrcType type = cpu::GemmSrcType::kF32;  // operands the caller gathers and computes (kBF16 or kF32)

  int elem_bytes() const { return type == cpu::GemmSrcType::kBF16 ? 2 : 4; }
  int k_pad(int k) const;  // K rounded up to the set's alignment
  // The register tile for an m x n product (the one that pads least; portable: 1 x 1).
  cpu::GemmTile tile_for(int m, int n) const;

  // B: n rows of k values (element (j, c) of src), packed for panels of `nr` columns.
  size_t packed_b_bytes(int nr, int n, int k) const;
  void pack_b(int nr, const cpu::GemmSrc& src, int n, int k, void* dst) const;

  // A: m rows of k values, made ready for the micro-kernels (copied into buf when the set needs it).
  struct Prepared {
    const char* data;
    int64_t lda;  // elements
    int m, k;
  };
  size_t prepared_a_bytes(int m, int k) const;
  Prepared prepare_a(const cpu::GemmSrc& src, int m, int k, void* buf) const;

  // c[i][j] = (accumulate ? c[i][j] : 0) + sum_c a[i][c] b[j][c] for i < a.m, j < n. Columns up to
  // round_up(n, tile.nr) of c may be written (ldc must leave room); rows at or beyond a.m are not.
  void multiply(const cpu::GemmTile& tile, const Prepared& a, const void* packed_b, int n, float* c, int64_t ldc,
                bool accumulate) const;
};

}  // namespace tessera::flash_mla
