// Every vector ep kernel set this CPU can run (Highway's, at each level) against the portable one, bit for bit: every
// bf16 code through the FP8 cast (both scale modes), fp32 values through the scaled e4m3 rounding (against
// tessera's f32_to_e4m3_sat, the scalar set too), reductions over special values (NaN, inf, subnormals, ties) with
// tails of every length and unaligned rows, and copies at every alignment. No communication: a plain test program, so
// it also runs under a QEMU CPU model (qemu-x86_64 -cpu Haswell: AVX2, no AVX-512).
#include "backends/cpu/ep_kernels.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/registry.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "test_util.h"

namespace tessera {
namespace {

using test::isa_supported;

struct KernelSet {
  std::string label;
  const cpu::EpKernels* kernels;
};

// The vector sets of every level this CPU has (each accessor only for a level the CPU reports).
std::vector<KernelSet> vector_sets() {
  std::vector<KernelSet> sets;
  for (Isa level : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kSve}) {
    if (!isa_supported(level)) continue;
    if (const cpu::EpKernels* k = cpu::ep_kernels_hwy(level))
      sets.push_back({std::string(k->name) + " at " + isa_name(level), k});
  }
  return sets;
}

#define FOR_EACH_VECTOR_SET(set)                                    \
  const std::vector<KernelSet> sets_ = vector_sets();               \
  if (sets_.empty()) GTEST_SKIP() << "no vector level on this CPU"; \
  for (const KernelSet& set : sets_)

std::vector<uint16_t> special_bf16(std::mt19937& gen, size_t n) {
  static const uint16_t kSpecial[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x807F,
                                      0x3F80, 0xBF80, 0x7F7F, 0x4380, 0x3B80, 0x0080, 0x3F81, 0x4000};
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = gen() % 4 == 0 ? kSpecial[gen() % 16] : uint16_t(gen());
  return v;
}

// Finite bf16 values of similar magnitude: sums whose roundings (ties included) matter.
std::vector<uint16_t> plain_bf16(std::mt19937& gen, size_t n) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = uint16_t((gen() & 0x8000u) | (0x3E00u + gen() % 0x300u));
  return v;
}

TEST(EpKernels, RegistryGivesEveryVectorLevelAVectorSet) {
  for (Isa level : test::all_isas()) {
    if (!isa_supported(level)) continue;
    const cpu::KernelChoice c = cpu::choose_kernel_at(cpu::Slot::kEp, level, "ep_kernels_test");
    ASSERT_NE(c.table, nullptr) << isa_name(level);
    const auto* k = static_cast<const cpu::EpKernels*>(c.table);
    if (level == Isa::kScalar) {
      EXPECT_STREQ(k->name, "scalar");
    } else {
      EXPECT_STRNE(k->name, "scalar") << isa_name(level);
    }
  }
}

// fp32 bit patterns: a sweep over every exponent and sign with strided mantissas (every e4m3 rounding
// boundary and tie is a mantissa of a few high bits), special values, and random ones.
std::vector<float> e4m3_probe_values(std::mt19937& gen) {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521) v.push_back(f32_from_bits(uint32_t(u)));
  for (uint32_t e = 100; e < 145; ++e)
    for (uint32_t m = 0; m < 64; ++m)
      for (uint32_t low : {0u, 1u, 0x3FFFFu, 0x40000u, 0x7FFFFu})
        for (uint32_t sign : {0u, 1u}) v.push_back(f32_from_bits(sign << 31 | e << 23 | m << 17 | low));
  for (float x : {0.0f, -0.0f, 448.0f, -448.0f, 447.9f, 464.0f, 465.0f, 1e30f, INFINITY, -INFINITY, NAN, -NAN})
    v.push_back(x);
  for (int i = 0; i < 4099; ++i) v.push_back(f32_from_bits(uint32_t(gen())));
  return v;
}

TEST(EpKernels, E4m3RoundingOfFp32MatchesTheDtypeRule) {
  std::mt19937 gen(7);
  const std::vector<float> x = e4m3_probe_values(gen);
  std::vector<KernelSet> sets = vector_sets();
  sets.push_back({"scalar", cpu::ep_kernels_scalar()});
  for (const KernelSet& set : sets) {
    SCOPED_TRACE(set.label);
    for (float mul : {1.0f, 0.03125f, 128.0f}) {
      for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(15), int64_t(17)}) {
        std::vector<uint8_t> got(size_t(n) + 1, 0xA5);
        set.kernels->e4m3_sat_mul(got.data(), x.data(), n, mul);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[size_t(i)], f32_to_e4m3_sat(x[size_t(i)] * mul))
              << "x bits " << std::hex << f32_bits(x[size_t(i)]) << " mul " << mul;
        EXPECT_EQ(got[size_t(n)], 0xA5) << "wrote past n = " << n;
      }
    }
  }
}

TEST(EpKernels, Bf16RoundingOfFp32MatchesTheDtypeRule) {
  std::mt19937 gen(8);
  std::vector<float> x = e4m3_probe_values(gen);  // ties and carries at many exponents, specials, random bits
  for (uint32_t u : {0x3F808000u, 0x3F818000u, 0x7F7F8000u, 0x7F800001u, 0xFFC12345u, 0x00008000u, 0x807FFFFFu})
    x.push_back(f32_from_bits(u));
  std::vector<KernelSet> sets = vector_sets();
  sets.push_back({"scalar", cpu::ep_kernels_scalar()});
  for (const KernelSet& set : sets) {
    SCOPED_TRACE(set.label);
    for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(15), int64_t(17)}) {
      std::vector<uint16_t> got(size_t(n) + 1, 0xA5A5);
      set.kernels->round_bf16(got.data(), x.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[size_t(i)], f32_to_bf16(x[size_t(i)])) << "x bits " << std::hex << f32_bits(x[size_t(i)]);
      EXPECT_EQ(got[size_t(n)], 0xA5A5) << "wrote past n = " << n;
    }
  }
}

TEST(EpKernels, CastMatchesScalarForEveryBf16Code) {
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  std::vector<uint16_t> x(65536 + 77);  // a tail block of 77 values too
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(i * 40503u);
  FOR_EACH_VECTOR_SET(set) {
    SCOPED_TRACE(set.label);
    for (int round_scale = 0; round_scale < 2; ++round_scale) {
      const int64_t n = int64_t(x.size()), blocks = (n + 127) / 128;
      std::vector<uint8_t> q1(x.size()), q2(x.size()), e1(size_t(blocks), 0), e2(size_t(blocks), 0);
      std::vector<float> s1(static_cast<size_t>(blocks)), s2(static_cast<size_t>(blocks));
      set.kernels->cast_e4m3(q1.data(), s1.data(), e1.data(), x.data(), n, round_scale);
      ref.cast_e4m3(q2.data(), s2.data(), e2.data(), x.data(), n, round_scale);
      for (size_t i = 0; i < q1.size(); ++i)
        ASSERT_EQ(q1[i], q2[i]) << "value " << i << " (bf16 0x" << std::hex << x[i] << ")";
      EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
      EXPECT_EQ(e1, e2);
    }
  }
}

TEST(EpKernels, CastMatchesScalarAtEveryChunkingLengthAndOffset) {
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  std::mt19937 gen(11);
  FOR_EACH_VECTOR_SET(set) {
    SCOPED_TRACE(set.label);
    // Lengths around the 128-value blocks and the 64-block chunks; the input starts 0..2 values in
    // (unaligned), the output 0..2 bytes in.
    for (int64_t n : {1, 15, 77, 127, 128, 129, 1000, 64 * 128, 64 * 128 + 5, 65 * 128, 130 * 128 + 1}) {
      const int offset = int(n % 3);
      const auto x = special_bf16(gen, size_t(n + offset));
      const int64_t blocks = (n + 127) / 128;
      for (int round_scale = 0; round_scale < 2; ++round_scale) {
        for (int with_scales = 0; with_scales < 2; ++with_scales) {  // UE8M0 callers pass no fp32 scales
          std::vector<uint8_t> q1(size_t(n + offset) + 1, 0xA5), q2(size_t(n + offset) + 1, 0xA5);
          std::vector<uint8_t> e1(static_cast<size_t>(blocks), 0), e2(static_cast<size_t>(blocks), 0);
          std::vector<float> s1(static_cast<size_t>(blocks), -1.0f), s2(static_cast<size_t>(blocks), -1.0f);
          set.kernels->cast_e4m3(q1.data() + offset, with_scales ? s1.data() : nullptr, e1.data(), x.data() + offset, n,
                                 round_scale);
          ref.cast_e4m3(q2.data() + offset, with_scales ? s2.data() : nullptr, e2.data(), x.data() + offset, n,
                        round_scale);
          ASSERT_EQ(q1, q2) << "n " << n << " round_scale " << round_scale;  // nothing written around it
          EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0) << "n " << n;
          EXPECT_EQ(e1, e2) << "n " << n;
        }
      }
    }
  }
}

// rows: `num_rows` rows of `n` values, each starting `r % 3` values into its buffer (unaligned).
struct Rows {
  std::vector<std::vector<uint16_t>> data;
  std::vector<const uint16_t*> ptrs;
  std::vector<float> weights;
};

Rows make_rows(std::mt19937& gen, int num_rows, int64_t n, bool special) {
  Rows r;
  for (int i = 0; i < num_rows; ++i) {
    r.data.push_back(special ? special_bf16(gen, size_t(n + 2)) : plain_bf16(gen, size_t(n + 2)));
    const float w = std::uniform_real_distribution<float>(-2, 2)(gen);
    r.weights.push_back(i == 1 ? 0.0f : w);
  }
  for (int i = 0; i < num_rows; ++i) r.ptrs.push_back(r.data[size_t(i)].data() + i % 3);
  return r;
}

TEST(EpKernels, ReductionsMatchScalarWithTailsAndSpecials) {
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  std::mt19937 gen(7);
  FOR_EACH_VECTOR_SET(set) {
    SCOPED_TRACE(set.label);
    for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200, 1000, 7168 + 13}) {
      for (int rows = 0; rows <= 9; ++rows) {
        for (int special = 0; special < 2; ++special) {
          const Rows r = make_rows(gen, rows, n, special);
          const auto b0 = special_bf16(gen, size_t(n)), b1 = plain_bf16(gen, size_t(n));
          // Outputs 64-byte aligned (the streaming path) and one value in (never streamed).
          AlignedPtr<uint16_t> o1 = aligned_array<uint16_t>(size_t(n) + 2), o2 = aligned_array<uint16_t>(size_t(n) + 2);
          for (int out_offset = 0; out_offset < 2; ++out_offset) {
            for (int variant = 0; variant < 8; ++variant) {
              const uint16_t* bias0 = variant & 1 ? b0.data() : nullptr;
              const uint16_t* bias1 = variant & 2 ? b1.data() : nullptr;
              std::fill(o1.get(), o1.get() + n + 2, uint16_t(0xBEEF));
              std::fill(o2.get(), o2.get() + n + 2, uint16_t(0xBEEF));
              set.kernels->reduce_bf16(o1.get() + out_offset, r.ptrs.data(), rows, bias0, bias1, n, variant >> 2);
              set.kernels->store_fence();
              ref.reduce_bf16(o2.get() + out_offset, r.ptrs.data(), rows, bias0, bias1, n, 0);
              ASSERT_EQ(std::memcmp(o1.get(), o2.get(), size_t(n + 2) * 2), 0)
                  << "reduce n " << n << " rows " << rows << " variant " << variant << " offset " << out_offset;
            }
            std::fill(o1.get(), o1.get() + n + 2, uint16_t(0xBEEF));
            std::fill(o2.get(), o2.get() + n + 2, uint16_t(0xBEEF));
            set.kernels->weighted_reduce_bf16(o1.get() + out_offset, r.ptrs.data(), r.weights.data(), rows, n);
            ref.weighted_reduce_bf16(o2.get() + out_offset, r.ptrs.data(), r.weights.data(), rows, n);
            ASSERT_EQ(std::memcmp(o1.get(), o2.get(), size_t(n + 2) * 2), 0)
                << "weighted n " << n << " rows " << rows << " offset " << out_offset;
          }
        }
      }
    }
  }
}

TEST(EpKernels, StreamingCopyAtEveryAlignment) {
  std::vector<uint8_t> src(70000), dst(70100);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
  FOR_EACH_VECTOR_SET(set) {
    SCOPED_TRACE(set.label);
    for (size_t offset : {0, 1, 16, 32, 48, 63}) {
      for (size_t bytes : {0, 1, 511, 512, 513, 4096 + 3, 4096 + 32, 65536 + 17}) {
        for (int streaming = 0; streaming < 2; ++streaming) {
          std::fill(dst.begin(), dst.end(), 0xEE);
          set.kernels->copy(dst.data() + offset, src.data() + 3, bytes, streaming);
          set.kernels->store_fence();
          ASSERT_EQ(std::memcmp(dst.data() + offset, src.data() + 3, bytes), 0) << offset << " " << bytes;
          for (size_t i = 0; i < offset; ++i) ASSERT_EQ(dst[i], 0xEE);
          for (size_t i = offset + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote past the end";
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera
