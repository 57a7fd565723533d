// The AVX-512 ep kernels against the portable ones, bit for bit: every bf16 code through the FP8 cast
// (both scale modes), reductions over special values (NaN, inf, subnormals, ties) with tails of every
// length, and copies at every alignment. Local to each rank; no communication.
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/ep_kernels.h"
#include "ep_test_util.h"
#include "tessera/core/cpu.h"
#include "tessera/core/memory.h"

namespace tessera::ep::test {
namespace {

bool have_avx512() { return cpu_features().best >= Isa::kAvx512; }

std::vector<uint16_t> special_bf16(std::mt19937& gen, size_t n) {
  static const uint16_t kSpecial[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x807F, 0x3F80,
                                      0xBF80, 0x7F7F, 0x4380, 0x3B80, 0x0080, 0x3F81, 0x4000};
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = gen() % 4 == 0 ? kSpecial[gen() % 16] : uint16_t(gen());
  return v;
}

TEST(EpKernels, CastMatchesScalarForEveryBf16Code) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const cpu::EpKernels& fast = *cpu::ep_kernels_avx512();
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  std::vector<uint16_t> x(65536 + 77);  // a tail block of 77 values too
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(i * 40503u);
  for (int round_scale = 0; round_scale < 2; ++round_scale) {
    const int64_t n = int64_t(x.size()), blocks = (n + 127) / 128;
    std::vector<uint8_t> q1(x.size()), q2(x.size()), e1(size_t(blocks), 0), e2(size_t(blocks), 0);
    std::vector<float> s1(static_cast<size_t>(blocks)), s2(static_cast<size_t>(blocks));
    fast.cast_e4m3(q1.data(), s1.data(), e1.data(), x.data(), n, round_scale);
    ref.cast_e4m3(q2.data(), s2.data(), e2.data(), x.data(), n, round_scale);
    for (size_t i = 0; i < q1.size(); ++i) ASSERT_EQ(q1[i], q2[i]) << "value " << i << " (bf16 0x" << std::hex << x[i] << ")";
    EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
    EXPECT_EQ(e1, e2);
  }
}

TEST(EpKernels, CastMatchesScalarAtEveryChunkingLength) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const cpu::EpKernels& fast = *cpu::ep_kernels_avx512();
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  std::mt19937 gen(11);
  // Lengths around the 128-value blocks and the 64-block chunks of the AVX-512 version.
  for (int64_t n : {1, 77, 127, 128, 129, 1000, 64 * 128, 64 * 128 + 5, 65 * 128, 130 * 128 + 1}) {
    const auto x = special_bf16(gen, size_t(n));
    const int64_t blocks = (n + 127) / 128;
    for (int round_scale = 0; round_scale < 2; ++round_scale) {
      for (int with_scales = 0; with_scales < 2; ++with_scales) {  // UE8M0 callers pass no fp32 scales
        std::vector<uint8_t> q1(static_cast<size_t>(n)), q2(static_cast<size_t>(n));
        std::vector<uint8_t> e1(static_cast<size_t>(blocks), 0), e2(static_cast<size_t>(blocks), 0);
        std::vector<float> s1(static_cast<size_t>(blocks), -1.0f), s2(static_cast<size_t>(blocks), -1.0f);
        fast.cast_e4m3(q1.data(), with_scales ? s1.data() : nullptr, e1.data(), x.data(), n, round_scale);
        ref.cast_e4m3(q2.data(), with_scales ? s2.data() : nullptr, e2.data(), x.data(), n, round_scale);
        ASSERT_EQ(q1, q2) << "n " << n << " round_scale " << round_scale;
        EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0) << "n " << n;
        EXPECT_EQ(e1, e2) << "n " << n;
      }
    }
  }
}

TEST(EpKernels, ReductionsMatchScalarWithTailsAndSpecials) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const cpu::EpKernels& fast = *cpu::ep_kernels_avx512();
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  std::mt19937 gen(7);
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200}) {
    for (int rows = 0; rows <= 5; ++rows) {
      std::vector<std::vector<uint16_t>> data;
      std::vector<const uint16_t*> ptrs;
      std::vector<float> w;
      for (int r = 0; r < rows; ++r) {
        data.push_back(special_bf16(gen, size_t(n)));
        w.push_back(std::uniform_real_distribution<float>(-2, 2)(gen));
      }
      for (auto& d : data) ptrs.push_back(d.data());
      const auto b0 = special_bf16(gen, size_t(n)), b1 = special_bf16(gen, size_t(n));
      AlignedPtr<uint16_t> o1 = aligned_array<uint16_t>(size_t(n)), o2 = aligned_array<uint16_t>(size_t(n));
      for (int variant = 0; variant < 4; ++variant) {
        const uint16_t* bias0 = variant & 1 ? b0.data() : nullptr;
        const uint16_t* bias1 = variant & 2 ? b1.data() : nullptr;
        fast.reduce_bf16(o1.get(), ptrs.data(), rows, bias0, bias1, n, variant == 3);
        fast.store_fence();
        ref.reduce_bf16(o2.get(), ptrs.data(), rows, bias0, bias1, n, 0);
        ASSERT_EQ(std::memcmp(o1.get(), o2.get(), size_t(n) * 2), 0) << "reduce n " << n << " rows " << rows;
      }
      fast.weighted_reduce_bf16(o1.get(), ptrs.data(), w.data(), rows, n);
      ref.weighted_reduce_bf16(o2.get(), ptrs.data(), w.data(), rows, n);
      ASSERT_EQ(std::memcmp(o1.get(), o2.get(), size_t(n) * 2), 0) << "weighted n " << n << " rows " << rows;
    }
  }
}

TEST(EpKernels, StreamingCopyAtEveryAlignment) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512";
  const cpu::EpKernels& fast = *cpu::ep_kernels_avx512();
  std::vector<uint8_t> src(70000), dst(70100);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
  for (size_t offset : {0, 1, 16, 48, 63}) {
    for (size_t bytes : {0, 1, 511, 512, 4096 + 3, 65536 + 17}) {
      std::fill(dst.begin(), dst.end(), 0xEE);
      fast.copy(dst.data() + offset, src.data() + 3, bytes, 1);
      fast.store_fence();
      ASSERT_EQ(std::memcmp(dst.data() + offset, src.data() + 3, bytes), 0) << offset << " " << bytes;
      for (size_t i = 0; i < offset; ++i) ASSERT_EQ(dst[i], 0xEE);
      for (size_t i = offset + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote past the end";
    }
  }
}

}  // namespace
}  // namespace tessera::ep::test
