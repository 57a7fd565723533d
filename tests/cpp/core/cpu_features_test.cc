// CPU feature detection, ISA levels and the ISA cap.
#include <gtest/gtest.h>

#include "tessera/core/cpu.h"
#include "test_util.h"

namespace tessera::test {
namespace {

TEST(CpuFeatures, BestLevelIsConsistentWithTheFeatureBits) {
  const CpuFeatures& f = cpu_features();
  std::printf("cpu: %s (%s), best isa %s, features: %s\n", f.model_name.c_str(), f.vendor.c_str(), isa_name(f.best),
              cpu_feature_string().c_str());
  EXPECT_GE(f.logical_cpus, 1);
  if (isa_includes(f.best, Isa::kAvx2)) {
    EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  }
  if (isa_includes(f.best, Isa::kAvx512)) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl);
  }
  if (isa_includes(f.best, Isa::kAvx512Bf16)) {
    EXPECT_TRUE(f.avx512_bf16 && f.avx512_vbmi);
  }
  if (isa_includes(f.best, Isa::kNeon)) {
    EXPECT_TRUE(f.asimd);
  }
  if (isa_includes(f.best, Isa::kNeonBf16)) {
    EXPECT_TRUE(f.arm_bf16 && f.i8mm);
  }
  if (isa_includes(f.best, Isa::kSve)) {  // a vector length is a multiple of 128 bits
    EXPECT_TRUE(f.sve);
    EXPECT_GE(f.sve_vector_bytes, 16);
    EXPECT_EQ(f.sve_vector_bytes % 16, 0);
  }
  // Every AArch64 CPU has Advanced SIMD; an x86 build never reports an ARM level and vice versa.
  if (host_isa_family() == IsaFamily::kArm) {
    EXPECT_TRUE(f.asimd);
    EXPECT_TRUE(f.best == Isa::kScalar || int(f.best) >= int(Isa::kNeon)) << isa_name(f.best);
  } else {
    EXPECT_FALSE(f.asimd || f.sve);
    EXPECT_LE(int(f.best), int(Isa::kAmx)) << isa_name(f.best);
  }
  EXPECT_FALSE(cpu_feature_string().empty());
}

TEST(CpuFeatures, ActiveIsaNeverExceedsTheHardware) {
  EXPECT_LE(int(active_isa()), int(cpu_features().best));
}

TEST(CpuFeatures, SetIsaCapLimitsTheActiveLevel) {
  IsaCapScope restore(active_isa());
  for (Isa cap : all_isas()) {
    set_isa_cap(cap);
    EXPECT_EQ(int(active_isa()), std::min(int(cap), int(cpu_features().best))) << isa_name(cap);
  }
}

TEST(CpuFeatures, IsaScopeRestoresThePreviousLevel) {
  const Isa before = active_isa();
  {
    IsaCapScope scalar(Isa::kScalar);
    EXPECT_EQ(active_isa(), Isa::kScalar);
  }
  EXPECT_EQ(active_isa(), before);
}

TEST(CpuFeatures, IsaNames) {
  for (Isa isa : all_isas()) EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  EXPECT_STREQ(isa_name(Isa::kAvx512Bf16), "avx512bf16");
  EXPECT_TRUE(throws_invalid([] { isa_from_name("avx1024"); }, {"unknown ISA", "avx1024", "scalar"}));
  EXPECT_TRUE(throws_invalid([] { isa_from_name(""); }, {"unknown ISA"}));
  EXPECT_TRUE(throws_invalid([] { isa_from_name("AVX2"); }, {"unknown ISA", "AVX2"}));  // names are lower case
  EXPECT_STREQ(isa_name(Isa::kNeonBf16), "neon_bf16");
  EXPECT_EQ(isa_from_name("sve"), Isa::kSve);  // every family's names parse; the cap checks the family
}

// Levels include the lower ones of their own family and scalar, never the other family's.
TEST(CpuFeatures, IsaIncludesStaysInsideItsFamily) {
  EXPECT_TRUE(isa_includes(Isa::kAmx, Isa::kAvx2));
  EXPECT_TRUE(isa_includes(Isa::kSve, Isa::kNeon));
  EXPECT_TRUE(isa_includes(Isa::kNeon, Isa::kScalar));
  EXPECT_TRUE(isa_includes(Isa::kAvx2, Isa::kAvx2));
  EXPECT_FALSE(isa_includes(Isa::kNeon, Isa::kAvx2));
  EXPECT_FALSE(isa_includes(Isa::kSve, Isa::kAmx));
  EXPECT_FALSE(isa_includes(Isa::kAmx, Isa::kNeon));
  EXPECT_FALSE(isa_includes(Isa::kScalar, Isa::kNeon));
  EXPECT_FALSE(isa_includes(Isa::kNeon, Isa::kNeonBf16));
}

// A cap of the other family is refused with an error naming this build's levels; the cap is unchanged.
TEST(CpuFeatures, CapOfTheOtherFamilyIsRefused) {
  const Isa before = active_isa();
  const bool arm = host_isa_family() == IsaFamily::kArm;
  const Isa foreign = arm ? Isa::kAvx2 : Isa::kNeon;
  EXPECT_TRUE(throws_invalid([&] { set_isa_cap(foreign); },
                             {"set_isa_cap", isa_name(foreign), "other CPU family", arm ? "neon_bf16" : "avx512bf16"}));
  EXPECT_EQ(active_isa(), before);
  const std::vector<Isa> levels = all_isas();
  EXPECT_EQ(levels.front(), Isa::kScalar);
  EXPECT_EQ(levels.back(), host_isa_top());
}

}  // namespace
}  // namespace tessera::test
