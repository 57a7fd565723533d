// cublaslt_gemm_{nt,nn,tn,tt}: plain D = A.B (+C) with bf16 or raw float8_e4m3fn operands, no scale
// factors (DeepGEMM's API, docs/gemm.md), at every ISA level.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

class CublasLtGemm : public IsaLayoutTest {};

TEST_P(CublasLtGemm, Bf16OperandsMatchFloat64Reference) {
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s : dense_shapes()) {
    PreparedGemm g = prepare_plain(Family::kCublasLt, DType::kBF16, layout(), s, rng);
    EXPECT_TRUE(run_and_check(g));
  }
}

TEST_P(CublasLtGemm, E4m3OperandsMatchFloat64Reference) {
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s : dense_shapes()) {
    PreparedGemm g = prepare_plain(Family::kCublasLt, DType::kF8E4M3, layout(), s, rng);
    EXPECT_TRUE(run_and_check(g));
  }
}

TESSERA_INSTANTIATE_ISA_LAYOUT(CublasLtGemm);

}  // namespace
}  // namespace tessera::test
