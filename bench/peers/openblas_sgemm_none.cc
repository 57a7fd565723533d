// Built when OpenBLAS was not found or TESSERA_WITH_PEERS is OFF: the peer reports itself unavailable.
#include "peers/openblas_sgemm.h"
#include "tessera/core/error.h"

namespace tessera::bench {

bool openblas_available() {
  return false;
}
void openblas_set_threads(int) {}
std::string openblas_description() {
  return "OpenBLAS not available (TESSERA_WITH_PEERS=OFF or not found)";
}

void openblas_sgemm_nt(int64_t, int64_t, int64_t, const float*, const float*, float*) {
  fail(ErrorCode::kNotImplemented,
       "openblas_sgemm_nt: this build has no OpenBLAS (TESSERA_WITH_PEERS=OFF or not found)");
}

}  // namespace tessera::bench
