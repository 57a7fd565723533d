// OpenBLAS, a second reference point for every GEMM: cblas_sgemm on fp32 copies of the operands
// (D[M,N] = A[M,K] . B[N,K]^T). Built from openblas_sgemm.cc when OpenBLAS was found, else from
// openblas_sgemm_none.cc. When TESSERA_ISA caps tessera below this CPU's level, OpenBLAS is loaded with
// the kernels of the same level (OPENBLAS_CORETYPE, unless the user set it), so the ratio compares code
// using the same instructions.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::bench {

bool openblas_available();
void openblas_set_threads(int n);
// Which OpenBLAS runs, with which kernels and cap ("OpenBLAS 0.3.21 ... (Haswell kernels, capped at avx2)").
std::string openblas_description();
void openblas_sgemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* d);

}  // namespace tessera::bench
