// fp8_fp4_gemm_{nt,nn,tn,tt} with every scale-factor style (fp32 K- and MN-major, packed UE8M0 int32),
// granularity (per-token, per-block, per-channel, FP4 1x32) and way of passing the recipe, against
// the float64 formula D = C + sum_k (A*sfa)(B*sfb) (DeepGEMM's API, docs/gemm.md), at every ISA level.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

class Fp8Fp4Gemm : public IsaLayoutTest {};

TEST_P(Fp8Fp4Gemm, MatchesFloat64Reference) {
  Rng rng = Rng::for_current_test();
  for (const ScaleRecipe& r : scale_recipes()) {
    std::vector<GemmShape> shapes = scaled_shapes();
    if (recipe_is_fp8_only(r)) shapes.insert(shapes.end(), fp8_odd_k_shapes().begin(), fp8_odd_k_shapes().end());
    if (recipe_is_fp8_only(r) && layout() == Layout::kNT)
      shapes.insert(shapes.end(), fp8_streamed_decode_shapes().begin(), fp8_streamed_decode_shapes().end());
    for (const GemmShape& s : shapes) {
      PreparedGemm g = prepare_scaled(r, layout(), s, rng);
      EXPECT_TRUE(run_and_check(g));
    }
  }
}

TESSERA_INSTANTIATE_ISA_LAYOUT(Fp8Fp4Gemm);

}  // namespace
}  // namespace tessera::test
