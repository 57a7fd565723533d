// The packed driver splits one side of a problem between threads (PackedPlan::split_y, plan.cc). Which
// side is a speed choice only: each output's sum runs over the same K chunks in the same order either
// way, so both splits must give the same bits, and TESSERA_GEMM_SPLIT=x|y must override the choice.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"
#include "gemm/plan.h"

namespace tessera::test {
namespace {

gemm::GemmProblem bf16_nt(int64_t m, int64_t n, int64_t k) {
  gemm::GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = {nullptr, cpu::GemmSrcType::kBF16, k, 1};
  p.b = {nullptr, cpu::GemmSrcType::kBF16, k, 1};
  return p;
}

TEST(GemmSplit, EnvironmentOverridesTheSplit) {
  // The accessor may run the level's instructions (backends/cpu/README.md): ask the CPU first.
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no avx512bf16 kernel set here";
  const cpu::GemmKernelSet* ks = cpu::gemm_kernels_avx512bf16();
  if (ks == nullptr) GTEST_SKIP() << "the avx512bf16 kernel set was not built";
  const gemm::GemmProblem p = bf16_nt(256, 4096, 2048);
  {
    EnvScope x("TESSERA_GEMM_SPLIT", "x");
    EXPECT_FALSE(gemm::make_packed_plan(p, *ks, 2).split_y);
  }
  {
    EnvScope y("TESSERA_GEMM_SPLIT", "y");
    EXPECT_TRUE(gemm::make_packed_plan(p, *ks, 2).split_y);
  }
}

// On AMX the a-panel copy to tile order is not free: few tokens against few weight rows split the
// weights (each thread copies half of them), many tokens against weights that two packed copies of the
// tokens would push out of the shared cache split the tokens.
TEST(GemmSplit, AmxPlanCountsTheAPanelCopy) {
  // The accessor may run the level's instructions (backends/cpu/README.md): ask the CPU first.
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "this CPU lacks AMX";
  const cpu::GemmKernelSet* ks = cpu::gemm_kernels_amx();
  if (ks == nullptr) GTEST_SKIP() << "the amx kernel set was not built";
  const gemm::PackedPlan few = gemm::make_packed_plan(bf16_nt(128, 576, 7168), *ks, 2);
  EXPECT_TRUE(few.swap && !few.split_y) << few.describe();
  const gemm::PackedPlan many = gemm::make_packed_plan(bf16_nt(1024, 4096, 7168), *ks, 2);
  EXPECT_TRUE(many.swap && many.split_y) << many.describe();
}

// The amx set's 32-row tile for whole panels, bf16 and fp8, few tokens or many; TESSERA_GEMM_TILE
// overrides it.
TEST(GemmSplit, AmxTileChoiceAndOverride) {
  // The accessor may run the level's instructions (backends/cpu/README.md): ask the CPU first.
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "this CPU lacks AMX";
  const cpu::GemmKernelSet* ks = cpu::gemm_kernels_amx();
  if (ks == nullptr) GTEST_SKIP() << "the amx kernel set was not built";
  auto fp8_nt = [](int64_t m, int64_t n, int64_t k) {
    gemm::GemmProblem p = bf16_nt(m, n, k);
    p.a.type = p.b.type = cpu::GemmSrcType::kE4M3;
    p.group = 128;
    return p;
  };
  for (const gemm::GemmProblem& p :
       {bf16_nt(128, 4096, 7168), bf16_nt(1024, 7168, 2048), fp8_nt(128, 7168, 2048), fp8_nt(1024, 7168, 2048)}) {
    const gemm::PackedPlan plan = gemm::make_packed_plan(p, *ks, 2);
    EXPECT_EQ(plan.tile.mr, 32) << plan.describe();
  }
  EnvScope forced("TESSERA_GEMM_TILE", "1");
  EXPECT_EQ(gemm::make_packed_plan(bf16_nt(128, 4096, 7168), *ks, 2).tile.mr, 16);
}

// clang-format off
const GemmShape kShapes[] = {
    // m    n     k     A     B     pad d     c
    {128,  300, 1024, kKm,  kKm,  0, kBf16, CMode::kNone},      // weights as the a-side
    {200,  301,  600, kKm,  kKm,  5, kF32,  CMode::kSeparate},  // strided rows, K tail, C
    {300,  128,  576, kKm,  kKm,  0, kBf16, CMode::kInPlace},   // tokens as the a-side
    { 97,  260, 2112, kKm,  kKm,  3, kF32,  CMode::kNone},      // odd rows, several K chunks
};
// clang-format on

// Runs every shape, bf16 and fp8, with `variable` set to each of two values: both results must pass
// the reference check and agree bit for bit.
void expect_same_bits_either_way(const char* variable, const char* first, const char* second) {
  Rng rng = Rng::for_current_test();
  for (const GemmShape& shape : kShapes) {
    for (int scaled = 0; scaled < 2; ++scaled) {
      PreparedGemm g =
          scaled ? prepare_scaled(scale_recipe("fp8 token(1,128) x block(128,128) f32"), Layout::kNT, shape, rng)
                 : prepare_plain(Family::kBf16, kBf16, Layout::kNT, shape, rng);
      const int es = dtype_storage_bytes(g.d.dtype);
      NumThreadsScope threads(2);
      std::vector<uint8_t> first_bits;
      {
        EnvScope setting(variable, first);
        g.run();
        ASSERT_TRUE(g.check()) << g.what;
        first_bits = g.d.storage;
      }
      {
        EnvScope setting(variable, second);
        g.run();
        ASSERT_TRUE(g.check()) << g.what;
      }
      EXPECT_TRUE(bitwise_equal(first_bits, g.d.storage, g.d.rows, g.d.cols, g.d.ld, es)) << variable << " " << g.what;
    }
  }
}

TEST(GemmSplit, SameBitsForEitherSplit) {
  expect_same_bits_either_way("TESSERA_GEMM_SPLIT", "x", "y");
}

// Which amx tile runs is a speed choice too: each output's tile products are the same in either.
TEST(GemmSplit, SameBitsForEitherAmxTile) {
  if (!isa_supported(Isa::kAmx) || active_isa() != Isa::kAmx) GTEST_SKIP() << "the amx kernels are not in use";
  expect_same_bits_either_way("TESSERA_GEMM_TILE", "0", "1");
}

}  // namespace
}  // namespace tessera::test
