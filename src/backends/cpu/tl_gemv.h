// Plain interface of the tile-language GEMV kernels (T.gemm with at most four rows of A), used by the
// tl runtime's tile GEMM (src/tl/runtime/tile_gemm.cc). No inline functions: ISA files include this.
#pragma once

#include <cstdint>

namespace tessera {
enum class Isa : int;  // tessera/core/cpu.h
}

namespace tessera::cpu {

// out[m * ldo + n] (+)= sum_{k < k_len} a[m * lda + k] * w[n * ldw + k]  for m < rows (1..4), n < n_rows.
// a: bf16, K-contiguous. w: K-contiguous rows of bf16 (w_fp8 = 0) or float8 e4m3 (w_fp8 = 1); only
// k_len values of each row are read. Accumulation in fp32, in an order fixed by the implementation and
// the shape (not by the thread count).
struct TlGemvArgs {
  const uint16_t* a;
  int64_t lda;
  int rows;
  const void* w;
  int w_fp8;
  int64_t ldw;
  int n_rows;
  int k_len;
  float* out;
  int64_t ldo;
  int accumulate;
};
using TlGemvFn = void (*)(const TlGemvArgs& args);

TlGemvFn tl_gemv_avx512bf16();
// The Highway version for the AVX2 and AVX-512 levels (backends/cpu/hwy/tl_gemv.cc): fp32 FMAs, fp8
// through F16C; nullptr when `level` has no target built.
TlGemvFn tl_gemv_hwy(Isa level);

}  // namespace tessera::cpu
