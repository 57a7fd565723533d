// bf16_gemm_{nt,nn,tn,tt} against the float64 formula at every ISA level (DeepGEMM's API, docs/gemm.md).
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

class Bf16Gemm : public IsaLayoutTest {};

TEST_P(Bf16Gemm, MatchesFloat64Reference) {
  Rng rng = Rng::for_current_test();
  for (const GemmShape& s : dense_shapes()) {
    PreparedGemm g = prepare_plain(Family::kBf16, DType::kBF16, layout(), s, rng);
    EXPECT_TRUE(run_and_check(g));
  }
}

TESSERA_INSTANTIATE_ISA_LAYOUT(Bf16Gemm);

}  // namespace
}  // namespace tessera::test
