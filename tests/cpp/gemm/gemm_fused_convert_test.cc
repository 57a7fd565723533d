// The avx512bf16 micro-kernels convert the next fp8 a-panel while they compute the current one
// (PackedPlan::fused_convert, packed.cc), in panel-outer and in BLIS order. The fused and the separate
// conversion must give the same bits on shapes whose panels, rows and K chunks end in every way: a last
// panel of fewer rows, strided source rows, K chunks of 1024 then 64, K not a multiple of 64 (that
// chunk converts separately), few panels, and 1 or 2 threads.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"
#include "gemm/plan.h"

namespace tessera::test {
namespace {

// clang-format off
const GemmShape kShapes[] = {
    // m    n     k     A     B     pad d     c
    {128,  300, 1024, kKm,  kKm,  0, kBf16, CMode::kNone},      // weights as the a-side, last panel 4 rows
    {200,  301, 2112, kKm,  kKm,  5, kF32,  CMode::kSeparate},  // strided rows, chunks 1024 + 1024 + 64
    {300,  128,  576, kKm,  kKm,  0, kBf16, CMode::kInPlace},   // tokens as the a-side
    { 37,  260,  600, kKm,  kKm,  3, kF32,  CMode::kNone},      // K % 64 != 0: that chunk unfused
    { 96,   20, 1280, kKm,  kKm,  0, kBf16, CMode::kNone},      // few a-panels
    {700,  300, 2112, kKm,  kKm,  0, kBf16, CMode::kNone},      // BLIS order, a-blocks of 256 + 44 rows
    {300,  520, 1088, kKm,  kKm,  2, kF32,  CMode::kSeparate},  // BLIS order, tokens as the a-side
    {650,  290, 2100, kKm,  kKm,  3, kBf16, CMode::kNone},      // BLIS order, last chunk unfused
};
// clang-format on

TEST(GemmFusedConvert, PlanFusesAnE4m3Aside) {
  // The accessor may run the level's instructions (backends/cpu/README.md): ask the CPU first.
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no avx512bf16 kernel set here";
  const cpu::GemmKernelSet* ks = cpu::gemm_kernels_avx512bf16();
  if (ks == nullptr) GTEST_SKIP() << "the avx512bf16 kernel set was not built";
  gemm::GemmProblem p;
  p.m = 128, p.n = 4096, p.k = 7168, p.group = 128;
  p.a = {nullptr, cpu::GemmSrcType::kE4M3, p.k, 1};
  p.b = {nullptr, cpu::GemmSrcType::kE4M3, p.k, 1};
  const gemm::PackedPlan fp8 = gemm::make_packed_plan(p, *ks, 2);
  EXPECT_TRUE(fp8.panel_outer && fp8.fused_convert) << fp8.describe();
  p.m = 1024, p.k = 2048;  // 1024 tokens: too wide a b-block for panel-outer
  const gemm::PackedPlan blis = gemm::make_packed_plan(p, *ks, 2);
  EXPECT_TRUE(!blis.panel_outer && blis.fused_convert) << blis.describe();
  {
    EnvScope off("TESSERA_GEMM_FUSED_CONVERT", "0");
    EXPECT_FALSE(gemm::make_packed_plan(p, *ks, 2).fused_convert);
  }
  p.a.type = p.b.type = cpu::GemmSrcType::kBF16;  // read in place: nothing to convert
  p.group = 0;
  EXPECT_FALSE(gemm::make_packed_plan(p, *ks, 2).fused_convert);
}

TEST(GemmFusedConvert, SameBitsAsTheSeparateConversion) {
  // Only sets with fuses_e4m3_convert (avx512bf16) have a fused path to compare: run at that level where
  // the CPU has it (the AMX set above it converts separately), else there is nothing to test (ARM levels,
  // AVX2, AVX-512: their plans never fuse).
  if (!isa_supported(Isa::kAvx512Bf16) || !isa_includes(active_isa(), Isa::kAvx512Bf16))
    GTEST_SKIP() << "no kernel set that fuses the e4m3 conversion at level " << isa_name(active_isa());
  IsaCapScope cap(Isa::kAvx512Bf16);
  const auto* ks = static_cast<const cpu::GemmKernelSet*>(cpu::choose_kernel(cpu::Slot::kGemmPacked, "test").table);
  if (ks == nullptr || !ks->fuses_e4m3_convert) GTEST_SKIP() << "the avx512bf16 kernel set was not built";
  Rng rng = Rng::for_current_test();
  for (const char* recipe : {"fp8 token(1,128) x block(128,128) f32", "fp8 ue8m0 packed (SM100 defaults)"}) {
    for (const GemmShape& shape : kShapes) {
      PreparedGemm g = prepare_scaled(scale_recipe(recipe), Layout::kNT, shape, rng);
      const int es = dtype_storage_bytes(g.d.dtype);
      for (int threads : {1, 2}) {
        NumThreadsScope scope(threads);
        std::vector<uint8_t> fused, separate;
        {
          EnvScope on("TESSERA_GEMM_FUSED_CONVERT", "1");
          g.run();
          ASSERT_TRUE(g.check()) << recipe << ", " << threads << " threads";
          fused = g.d.storage;
        }
        {
          EnvScope off("TESSERA_GEMM_FUSED_CONVERT", "0");
          g.run();
          separate = g.d.storage;
        }
        EXPECT_TRUE(bitwise_equal(fused, separate, g.d.rows, g.d.cols, g.d.ld, es))
            << recipe << ", " << threads << " threads\n  " << g.what;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::test
