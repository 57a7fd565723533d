#include "peers/openblas_sgemm.h"

#include <cblas.h>

namespace tessera::bench {

bool openblas_available() {
  return true;
}
void openblas_set_threads(int n) {
  openblas_set_num_threads(n);
}

void openblas_sgemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* d) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(m), blasint(n), blasint(k), 1.0f, a, blasint(k), b,
              blasint(k), 0.0f, d, blasint(n));
}

}  // namespace tessera::bench
