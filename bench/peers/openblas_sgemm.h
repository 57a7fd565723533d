// OpenBLAS, a second reference point for every GEMM: cblas_sgemm on fp32 copies of the operands
// (D[M,N] = A[M,K] . B[N,K]^T). Built from openblas_sgemm.cc when OpenBLAS was found, else from
// openblas_sgemm_none.cc.
#pragma once

#include <cstdint>

namespace tessera::bench {

bool openblas_available();
void openblas_set_threads(int n);
void openblas_sgemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* d);

}  // namespace tessera::bench
