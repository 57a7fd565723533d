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
  if (int(f.best) >= int(Isa::kAvx2)) {
    EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  }
  if (int(f.best) >= int(Isa::kAvx512)) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl);
  }
  if (int(f.best) >= int(Isa::kAvx512Bf16)) {
    EXPECT_TRUE(f.avx512_bf16 && f.avx512_vbmi);
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
}

}  // namespace
}  // namespace tessera::test
