// Scales that are all powers of two are folded into the operands where the kernel set can (the amx set:
// PackedPlan::fold_scales, packed.cc): a-panels and packed b-panels carry value * 2^e and the
// micro-kernels run unscaled over whole K chunks. The plan must fold exactly when every scale of both
// tables is 2^e with |e| <= kFoldExponentMax and both operands are fp8 / fp4; folded and unfolded runs
// must both match the float64 reference, and a folded run must give the same bits on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gemm/gemm_cases.h"
#include "gemm/gemv.h"
#include "gemm/plan.h"
#include "tessera/core/dtype.h"

namespace tessera::test {
namespace {

const cpu::GemmKernelSet* amx_set() {
  // The accessor may run the level's instructions (backends/cpu/README.md): ask the CPU first.
  return isa_supported(Isa::kAmx) ? cpu::gemm_kernels_amx() : nullptr;
}

// fp8 x fp4, K groups of 32, fp32 scale tables [groups][rows] filled with `value`.
struct Problem {
  gemm::GemmProblem p;
  std::vector<float> sa, sb;
  Problem(int64_t m, int64_t n, int64_t k, float value) {
    p.m = m, p.n = n, p.k = k, p.group = 32;
    p.a = {nullptr, cpu::GemmSrcType::kE4M3, k, 1};
    p.b = {nullptr, cpu::GemmSrcType::kE2M1, k / 2, 1};
    const int64_t groups = k / 32;
    sa.assign(size_t(groups * m), value);
    sb.assign(size_t(groups * n), value);
    p.sa.data = sa.data(), p.sa.stride_g = m;
    p.sb.data = sb.data(), p.sb.stride_g = n;
  }
  bool folds(const cpu::GemmKernelSet& ks) const { return gemm::make_packed_plan(p, ks, 2).fold_scales; }
};

TEST(GemmFoldedScales, PlanFoldsOnlyPowersOfTwoInRange) {
  const cpu::GemmKernelSet* ks = amx_set();
  if (ks == nullptr) GTEST_SKIP() << "no amx kernel set here";
  EXPECT_TRUE(Problem(256, 300, 2048, 0.25f).folds(*ks));
  EXPECT_TRUE(Problem(256, 300, 2048, std::ldexp(1.0f, cpu::kFoldExponentMax)).folds(*ks));
  EXPECT_FALSE(Problem(256, 300, 2048, std::ldexp(1.0f, cpu::kFoldExponentMax + 1)).folds(*ks));
  Problem one_off(256, 300, 2048, 0.5f);
  one_off.sb[one_off.sb.size() - 1] = 0.75f;  // the last group of the last column: not a power of two
  EXPECT_FALSE(one_off.folds(*ks));
  Problem negative(256, 300, 2048, 0.5f);
  negative.sa[7] = -0.5f;
  EXPECT_FALSE(negative.folds(*ks));
  Problem bf16(256, 300, 2048, 1.0f);
  bf16.p.a.type = cpu::GemmSrcType::kBF16;  // bf16 values times 2^e could leave the normal range
  EXPECT_FALSE(bf16.folds(*ks));
  EnvScope off("TESSERA_GEMM_FOLD_SCALES", "0");
  EXPECT_FALSE(Problem(256, 300, 2048, 0.25f).folds(*ks));
}

TEST(GemmFoldedScales, TheVectorSetsDoNotFold) {
  // Their micro-kernels fold each group's sum with one FMA per accumulator: nothing to gain.
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no avx512bf16 kernel set here";
  const cpu::GemmKernelSet* ks = cpu::gemm_kernels_avx512bf16();
  if (ks == nullptr) GTEST_SKIP() << "the avx512bf16 kernel set was not built";
  EXPECT_FALSE(Problem(256, 300, 2048, 0.25f).folds(*ks));
}

// clang-format off
const GemmShape kShapes[] = {
    // m    n     k     A     B     pad d     c
    { 65, 1024, 2048, kKm,  kKm,  0, kBf16, CMode::kNone},      // an expert's tokens against its weights
    {200,  301, 1088, kKm,  kKm,  3, kF32,  CMode::kSeparate},  // strided rows, chunks of 1024 + 64
    { 17,   40,  160, kKm,  kKm,  0, kBf16, CMode::kInPlace},   // one chunk of 5 groups of 32
};
// clang-format on

TEST(GemmFoldedScales, FoldedAndUnfoldedMatchTheReference) {
  if (amx_set() == nullptr || !isa_includes(active_isa(), Isa::kAmx)) GTEST_SKIP() << "no amx kernel set here";
  Rng rng = Rng::for_current_test();
  for (const char* recipe : {"fp8 (1,1,32) x fp4, both ue8m0 packed", "fp4 x fp4 ue8m0 packed (defaults)",
                             "fp8 ue8m0 packed (SM100 defaults)"}) {
    for (const GemmShape& shape : kShapes) {
      PreparedGemm g = prepare_scaled(scale_recipe(recipe), Layout::kNT, shape, rng);
      const int es = dtype_storage_bytes(g.d.dtype);
      std::vector<uint8_t> one_thread;
      for (int threads : {1, 2}) {
        NumThreadsScope scope(threads);
        g.run();
        ASSERT_TRUE(g.check()) << recipe << ", folded, " << threads << " threads";
        if (threads == 1) {
          one_thread = g.d.storage;
        } else {
          EXPECT_TRUE(bitwise_equal(one_thread, g.d.storage, g.d.rows, g.d.cols, g.d.ld, es))
              << recipe << ": 1 vs 2 threads\n  " << g.what;
        }
      }
      EnvScope off("TESSERA_GEMM_FOLD_SCALES", "0");
      g.run();
      ASSERT_TRUE(g.check()) << recipe << ", unfolded";
    }
  }
}

// The FP4 GEMV folds per-32 power-of-two activation scales into bf16 activations by adding the exponent
// to each value's exponent field: for every e4m3 code (zeros, subnormals, NaN included) and every
// exponent the fold allows, the bits must be those of rounding e4m3 value * 2^e to bf16.
TEST(GemmFoldedScales, Fp4GemvActivationFoldIsExactForEveryCodeAndExponent) {
  constexpr int64_t kK = 256 + 32;  // every code once, then a group of codes with a stride
  std::vector<uint8_t> a(2 * kK);
  for (int64_t k = 0; k < kK; ++k) a[k] = uint8_t(k < 256 ? k : (k * 37) & 0xFF);
  for (int64_t k = 0; k < kK; ++k) a[kK + k] = uint8_t(255 - a[k]);
  for (int e = -117; e <= 119; ++e) {
    const int64_t groups = kK / 32;
    std::vector<float> sa(size_t(groups * 2));
    for (int64_t g = 0; g < groups; ++g) {
      sa[size_t(g * 2)] = std::ldexp(1.0f, e);
      sa[size_t(g * 2 + 1)] = std::ldexp(1.0f, g % 2 ? e : -e / 2);  // the second row: another exponent per group
    }
    gemm::GemmProblem p;
    p.m = 2, p.n = 1, p.k = kK, p.group = 32;
    p.a = {a.data(), cpu::GemmSrcType::kE4M3, kK, 1};
    p.sa.data = sa.data(), p.sa.stride_g = 2;
    const std::vector<uint16_t> got = gemm::fold_activations(p);
    ASSERT_EQ(got.size(), size_t(2 * kK));
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t k = 0; k < kK; ++k) {
        const uint16_t want = f32_to_bf16(e4m3_to_f32(a[size_t(m * kK + k)]) * sa[size_t((k / 32) * 2 + m)]);
        ASSERT_EQ(got[size_t(m * kK + k)], want) << "code " << int(a[size_t(m * kK + k)]) << " row " << m << " e " << e;
      }
  }
}

}  // namespace
}  // namespace tessera::test
