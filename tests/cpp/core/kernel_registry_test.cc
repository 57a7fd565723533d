// The kernel registry: every slot ends in a portable implementation, choices respect the level, and no
// SIMD level is left with a scalar-speed implementation.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/registry.h"
#include "test_util.h"

namespace tessera {
namespace {

using cpu::Slot;
using test::all_isas;
using test::isa_supported;
using test::IsaCapScope;

TEST(KernelRegistry, EverySlotEndsInAPortableImplementation) {
  for (int s = 0; s < int(Slot::kCount); ++s) {
    const cpu::SlotInfo& info = cpu::slot_info(Slot(s));
    ASSERT_GT(info.count, 0) << info.name;
    EXPECT_EQ(info.impls[info.count - 1].need, Isa::kScalar) << info.name;
    for (int i = 1; i < info.count; ++i)  // most specialised first
      EXPECT_GE(int(info.impls[i - 1].need), int(info.impls[i].need)) << info.name << " entry " << i;
  }
}

TEST(KernelRegistry, ChoiceNeverExceedsTheLevel) {
  for (Isa level : all_isas()) {
    if (!isa_supported(level)) continue;
    for (int s = 0; s < int(Slot::kCount); ++s) {
      const cpu::KernelChoice c = cpu::choose_kernel_at(Slot(s), level, "registry_test");
      ASSERT_NE(c.impl, nullptr) << cpu::slot_info(Slot(s)).name << " at " << isa_name(level);
      EXPECT_TRUE(isa_includes(level, c.impl->need)) << c.impl->name;
      EXPECT_STREQ(c.impl->name, cpu::planned_kernel(Slot(s), level));
    }
  }
}

TEST(KernelRegistry, ActiveLevelFollowsTheCap) {
  IsaCapScope cap(Isa::kScalar);
  for (int s = 0; s < int(Slot::kCount); ++s)
    EXPECT_EQ(cpu::choose_kernel(Slot(s), "registry_test").impl->need, Isa::kScalar) << cpu::slot_info(Slot(s)).name;
}

TEST(KernelRegistry, RefusalFallsThroughToTheNextImplementation) {
  const cpu::RefuseFn refuse_first = [](const cpu::KernelImpl& k, const void*, const void* problem) -> const char* {
    return &k == static_cast<const cpu::KernelImpl*>(problem) ? "refused by the test" : nullptr;
  };
  const cpu::SlotInfo& info = cpu::slot_info(Slot::kGemmPacked);
  const cpu::KernelChoice first = cpu::choose_kernel(Slot::kGemmPacked, "registry_test");
  if (first.impl == &info.impls[info.count - 1]) GTEST_SKIP() << "only the portable implementation runs here";
  const cpu::KernelChoice next = cpu::choose_kernel(Slot::kGemmPacked, "registry_test", refuse_first, first.impl);
  ASSERT_NE(next.impl, nullptr);
  EXPECT_NE(next.impl, first.impl);
}

TEST(KernelRegistry, MatrixNamesEverySlot) {
  const std::string text = cpu::kernel_matrix_text();
  for (int s = 0; s < int(Slot::kCount); ++s)
    EXPECT_NE(text.find(cpu::slot_info(Slot(s)).name), std::string::npos) << cpu::slot_info(Slot(s)).name;
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The point of the registry: no SIMD level is left with a scalar-speed implementation of any slot. Checked
// on the plan (names only), so it holds for levels this CPU lacks too, on x86 and ARM alike.
TEST(KernelRegistry, NoSimdLevelRunsPortableCode) {
  for (Isa level : test::all_isas()) {
    if (level == Isa::kScalar) continue;
    for (int s = 0; s < int(cpu::Slot::kCount); ++s) {
      const cpu::SlotInfo& info = cpu::slot_info(cpu::Slot(s));
      const cpu::KernelImpl& portable = info.impls[info.count - 1];
      EXPECT_STRNE(cpu::planned_kernel(cpu::Slot(s), level), portable.name)
          << info.name << " runs its portable implementation at " << isa_name(level);
    }
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(KernelRegistry, CachedChoiceFollowsTheLevel) {
  for (Isa level : test::all_isas()) {
    if (!test::isa_supported(level)) continue;
    test::IsaCapScope cap(level);
    for (int s = 0; s < int(cpu::Slot::kCount); ++s) {
      const void* want = cpu::choose_kernel(cpu::Slot(s), "registry_test").table;
      EXPECT_EQ(cpu::cached_kernel(cpu::Slot(s), "registry_test"), want) << cpu::slot_info(cpu::Slot(s)).name;
      EXPECT_EQ(cpu::cached_kernel(cpu::Slot(s), "registry_test"), want) << "second call";
    }
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A level with bf16 dot/matrix instructions (avx512bf16 and amx; neon_bf16 and sve on ARM) multiplies
// bf16, e4m3 and FP4 operands as bf16 with fp32 sums: its packed GEMM set and its bf16/e4m3/FP4 decode
// GEMVs must be bf16-level code, never fp32-FMA code that widens the operands (a quarter of BFMMLA's
// rate at most). Names are checked on the plan (levels this CPU lacks too), the GEMM set itself where
// the CPU has the level.
TEST(KernelRegistry, Bf16LevelsPlanBf16GemmAndGemvKernels) {
  const Isa bf16 = host_isa_family() == IsaFamily::kArm ? Isa::kNeonBf16 : Isa::kAvx512Bf16;
  int checked = 0;
  for (Isa level : test::all_isas()) {
    if (!isa_includes(level, bf16)) continue;
    ++checked;
    for (cpu::Slot slot : {cpu::Slot::kGemmPacked, cpu::Slot::kGemvBf16, cpu::Slot::kGemvFp8, cpu::Slot::kGemvFp4}) {
      const cpu::SlotInfo& info = cpu::slot_info(slot);
      const std::string planned = cpu::planned_kernel(slot, level);
      const cpu::KernelImpl* impl = nullptr;
      for (int i = 0; i < info.count; ++i)
        if (planned == info.impls[i].name && isa_includes(level, info.impls[i].need)) impl = &info.impls[i];
      ASSERT_NE(impl, nullptr) << info.name << ": " << planned << " at " << isa_name(level);
      EXPECT_TRUE(isa_includes(impl->need, bf16))
          << info.name << " at " << isa_name(level) << " plans " << planned << ", not bf16-level code";
    }
    if (!test::isa_supported(level)) continue;
    const auto* ks = static_cast<const cpu::GemmKernelSet*>(
        cpu::choose_kernel_at(cpu::Slot::kGemmPacked, level, "registry_test").table);
    ASSERT_NE(ks, nullptr) << isa_name(level);
    EXPECT_EQ(ks->elem_bytes, 2) << ks->name << " packs fp32 at " << isa_name(level);
    EXPECT_TRUE(ks->accepts(cpu::GemmSrcType::kBF16)) << ks->name;
    EXPECT_TRUE(ks->accepts(cpu::GemmSrcType::kE4M3)) << ks->name;
  }
  if (checked == 0) GTEST_SKIP() << "this build has no bf16 level";
}

}  // namespace
}  // namespace tessera
