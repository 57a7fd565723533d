// The MQA-logits kernel sets of every level, below the drivers: key conversions exact for every FP8 and
// FP4 code and MX exponent; the rows kernel against float64 for head counts around the vector widths,
// every head dimension and row counts around the register block; a row's bits independent of the
// block it lands in; the AMX set against the vdpbf16ps set where the CPU has AMX.
#include "backends/cpu/mqa_logits_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/registry.h"
#include "tessera/core/dtype.h"
#include "test_util.h"

namespace tessera::test {
namespace {

class MqaKernels : public ::testing::TestWithParam<Isa> {
 protected:
  const cpu::MqaLogitsKernels& set() {
    return *static_cast<const cpu::MqaLogitsKernels*>(
        cpu::choose_kernel_at(cpu::Slot::kMqaLogits, GetParam(), "mqa_kernels_test").table);
  }
  // Tile element i as fp32.
  static float element(const cpu::MqaLogitsKernels& k, const std::vector<char>& tile, int64_t i) {
    if (k.key_bytes == 4) {
      float f;
      std::memcpy(&f, tile.data() + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, tile.data() + 2 * i, 2);
    return bf16_to_f32(h);
  }
  // The value a set must hold for an exact fp32 product: itself (fp32 sets) or its bf16 rounding.
  static float expected(const cpu::MqaLogitsKernels& k, float v) {
    return k.key_bytes == 4 ? v : bf16_to_f32(f32_to_bf16(v));
  }
  static bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || f32_bits(a) == f32_bits(b); }
};

TEST_P(MqaKernels, E4m3ConversionsAreExactForEveryCode) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  const cpu::MqaLogitsKernels& k = set();
  for (int64_t n : {256, 256 + 37, 5}) {  // whole vectors, a tail, a call shorter than one vector
    std::vector<uint8_t> src(size_t(n + 1));
    for (int64_t i = 0; i <= n; ++i) src[size_t(i)] = uint8_t((i * 113 + 1) % 256);
    std::vector<char> tile(size_t(n * k.key_bytes + 64), 0x55);
    k.e4m3_keys(src.data() + 1, n, tile.data());  // unaligned source
    std::vector<uint16_t> bf16(size_t(n + 1), 0xAAAA);
    k.e4m3_to_bf16(src.data() + 1, n, bf16.data());
    for (int64_t i = 0; i < n; ++i) {
      const float want = e4m3_to_f32(src[size_t(i + 1)]);
      ASSERT_TRUE(same(element(k, tile, i), want)) << k.name << " code " << int(src[size_t(i + 1)]);
      ASSERT_EQ(bf16[size_t(i)], f32_to_bf16(want)) << k.name << " code " << int(src[size_t(i + 1)]);
    }
    ASSERT_EQ(bf16[size_t(n)], 0xAAAA) << k.name << ": wrote past n";
    ASSERT_EQ(tile[size_t(n * k.key_bytes)], 0x55) << k.name << ": wrote past n";
  }
}

// Sets may convert blocks of only normal finite codes by another path (AMX: arithmetic): every normal
// code in such blocks, one block with a subnormal and one with NaN in between, and a tail.
TEST_P(MqaKernels, E4m3KeysAreExactInBlocksOfNormalCodes) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  const cpu::MqaLogitsKernels& k = set();
  std::vector<uint8_t> normal;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x78) != 0 && (c & 0x7F) != 0x7F) normal.push_back(uint8_t(c));
  const int64_t n = 64 * 7 + 19;
  std::vector<uint8_t> src(size_t(n + 1));
  for (int64_t i = 0; i <= n; ++i) src[size_t(i)] = normal[size_t((i * 37) % int64_t(normal.size()))];
  src[1 + 64 * 2 + 5] = 0x83;   // a negative subnormal in block 2
  src[1 + 64 * 4 + 63] = 0x7F;  // NaN in block 4
  std::vector<char> tile(size_t(n * k.key_bytes + 64), 0x55);
  k.e4m3_keys(src.data() + 1, n, tile.data());  // unaligned source
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(element(k, tile, i), e4m3_to_f32(src[size_t(i + 1)])))
        << k.name << " code " << int(src[size_t(i + 1)]) << " at " << i;
  ASSERT_EQ(tile[size_t(n * k.key_bytes)], 0x55) << k.name << ": wrote past n";
}

TEST_P(MqaKernels, MxKeyRowsMatchTheScaledCodes) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  const cpu::MqaLogitsKernels& k = set();
  Rng rng = Rng::for_current_test();
  // Both ends of the ranges that keep every product a normal bf16 (FP8 10..246, FP4 2..252), and past them.
  const uint8_t exponents[] = {0, 1, 2, 9, 10, 100, 127, 140, 246, 247, 252, 253, 254, 255};
  for (bool fp4 : {false, true})
    for (int dim : {32, 64, 128}) {
      if (fp4 && dim == 32) continue;
      const int rows = 9, row_bytes = fp4 ? dim / 2 : dim, stride = row_bytes + 3;
      std::vector<uint8_t> values(size_t(rows * stride));
      for (auto& v : values) v = uint8_t(rng.bits32());
      std::vector<uint8_t> scales(size_t(rows * 8));
      for (int r = 0; r < rows; ++r)
        for (int b = 0; b < 4; ++b)
          scales[size_t(r * 8 + b)] = exponents[size_t(r * 4 + b) % sizeof(exponents)];  // each at least twice
      std::vector<char> tile(size_t(rows * dim * k.key_bytes));
      k.mx_keys({values.data(), stride, scales.data(), 8, rows, dim, fp4, tile.data()});
      for (int r = 0; r < rows; ++r)
        for (int d = 0; d < dim; ++d) {
          const uint8_t byte = values[size_t(r * stride + (fp4 ? d / 2 : d))];
          const float v = fp4 ? e2m1_to_f32(d % 2 ? uint8_t(byte >> 4) : uint8_t(byte & 0xF)) : e4m3_to_f32(byte);
          const float want = expected(k, v * ue8m0_to_f32(scales[size_t(r * 8 + d / 32)]));
          ASSERT_TRUE(same(element(k, tile, int64_t(r) * dim + d), want))
              << k.name << (fp4 ? " fp4" : " fp8") << " dim " << dim << " (" << r << ", " << d << ")";
        }
    }
}

TEST_P(MqaKernels, RowsMatchFloat64AndDoNotDependOnTheBlock) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  const cpu::MqaLogitsKernels& k = set();
  Rng rng = Rng::for_current_test();
  for (int heads : {1, 7, 8, 16, 20, 33, 64, 100, 128})
    for (int dim : {32, 34, 36, 38, 64, 128}) {  // 17-19 pairs of D: a tail after whole groups of 4 or 8
      const int rows = 1 + int(rng.index(40)), nv = (heads + 15) / 16;
      // Operands exact in bf16 and fp32: e4m3 codes (finite), so every set reads the same values.
      auto code = [&] {
        uint8_t c;
        do c = uint8_t(rng.bits32());
        while ((c & 0x7F) == 0x7F);
        return c;
      };
      std::vector<uint16_t> q(size_t(heads * dim));
      std::vector<uint8_t> kc(size_t(rows * dim));
      for (auto& v : q) v = f32_to_bf16(e4m3_to_f32(code()));
      for (auto& v : kc) v = code();
      std::vector<float> weights(size_t(16 * nv), std::nanf(""));
      std::vector<float> scale(static_cast<size_t>(rows));
      for (int h = 0; h < heads; ++h) weights[size_t(h)] = float(rng.uniform(-1, 1));
      for (auto& s : scale) s = float(rng.uniform(-0.5, 2));
      std::vector<char> panel(size_t(k.panel_bytes(heads, dim)) + 64);
      char* p = panel.data() + (64 - reinterpret_cast<uintptr_t>(panel.data()) % 64) % 64;
      k.pack_query(q.data(), heads, dim, p);
      std::vector<char> tile(size_t(rows * dim * k.key_bytes));
      k.e4m3_keys(kc.data(), int64_t(rows) * dim, tile.data());

      std::vector<float> out(static_cast<size_t>(rows));
      k.rows({p, weights.data(), heads, nv, dim, tile.data(), dim, scale.data(), rows, out.data()});
      for (int r = 0; r < rows; ++r) {
        double want = 0, mag = 0;
        for (int h = 0; h < heads; ++h) {
          double dot = 0, dot_mag = 0;
          for (int d = 0; d < dim; ++d) {
            const double t = double(bf16_to_f32(q[size_t(h * dim + d)])) * e4m3_to_f32(kc[size_t(r * dim + d)]);
            dot += t;
            dot_mag += std::fabs(t);
          }
          want += weights[size_t(h)] * std::max(0.0, dot * scale[size_t(r)]);
          mag += std::fabs(weights[size_t(h)]) * dot_mag * std::fabs(scale[size_t(r)]);
        }
        ASSERT_NEAR(out[size_t(r)], want, 1e-5 * mag + 1e-30)
            << k.name << " heads " << heads << " dim " << dim << " row " << r << " of " << rows;
      }
      // Each row alone and the rows from 1 on: the same bits.
      for (int r = 0; r < rows; ++r) {
        float one;
        k.rows({p, weights.data(), heads, nv, dim, tile.data() + int64_t(r) * dim * k.key_bytes, dim, scale.data() + r,
                1, &one});
        ASSERT_EQ(f32_bits(one), f32_bits(out[size_t(r)])) << k.name << " heads " << heads << " row " << r;
      }
      if (rows > 1) {
        std::vector<float> rest(size_t(rows - 1));
        k.rows({p, weights.data(), heads, nv, dim, tile.data() + int64_t(dim) * k.key_bytes, dim, scale.data() + 1,
                rows - 1, rest.data()});
        for (int r = 1; r < rows; ++r)
          ASSERT_EQ(f32_bits(rest[size_t(r - 1)]), f32_bits(out[size_t(r)])) << k.name << " heads " << heads;
      }
    }
}

TEST_P(MqaKernels, ReluPassesNaNAndPaddedHeadsStayOut) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  const cpu::MqaLogitsKernels& k = set();
  const int heads = 5, dim = 32, rows = 3;
  std::vector<uint16_t> q(size_t(heads * dim), f32_to_bf16(0.0f));
  std::vector<uint8_t> kc(size_t(rows * dim), 0x38);                       // 1.0
  for (int h = 0; h < heads; ++h) q[size_t(h * dim)] = f32_to_bf16(1.0f);  // every head dots to 1
  std::vector<float> weights(16, std::nanf("")), scale = {INFINITY, std::nanf(""), 1.0f}, out(3);
  for (int h = 0; h < heads; ++h) weights[size_t(h)] = 1.0f;  // entries >= heads are ignored
  std::vector<char> panel(size_t(k.panel_bytes(heads, dim)) + 64);
  char* p = panel.data() + (64 - reinterpret_cast<uintptr_t>(panel.data()) % 64) % 64;
  k.pack_query(q.data(), heads, dim, p);
  std::vector<char> tile(size_t(rows * dim * k.key_bytes));
  k.e4m3_keys(kc.data(), rows * dim, tile.data());
  k.rows({p, weights.data(), heads, 1, dim, tile.data(), dim, scale.data(), rows, out.data()});
  // Padded heads (zero query, NaN weight) must stay out even when the scale is infinite.
  EXPECT_EQ(out[0], INFINITY) << k.name;
  EXPECT_TRUE(std::isnan(out[1])) << k.name;  // NaN passes relu
  EXPECT_EQ(out[2], 5.0f) << k.name;
}

// The AMX set against the vdpbf16ps set on the same bf16 operands: identical panels, logits equal to
// fp32 summation-order differences, and a row's bits independent of the call (rows across several
// 32-key blocks and tails).
TEST(MqaKernelsAmx, MatchesTheVectorSetAndDoesNotDependOnTheBlock) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "AMX not supported here";
  auto set_at = [](Isa level) {
    return static_cast<const cpu::MqaLogitsKernels*>(
        cpu::choose_kernel_at(cpu::Slot::kMqaLogits, level, "mqa_kernels_test").table);
  };
  const cpu::MqaLogitsKernels& amx = *set_at(Isa::kAmx);
  const cpu::MqaLogitsKernels& vec = *set_at(Isa::kAvx512Bf16);
  ASSERT_STREQ(amx.name, "mqa_amx");
  Rng rng = Rng::for_current_test();
  for (int heads : {1, 7, 16, 20, 33, 64, 100, 128})
    for (int dim : {32, 64, 128}) {
      const int rows = 1 + int(rng.index(150)), nv = (heads + 15) / 16;
      std::vector<uint16_t> q(size_t(heads * dim));
      for (auto& v : q) v = f32_to_bf16(float(rng.uniform(-2, 2)));
      std::vector<uint8_t> kc(size_t(rows * dim));
      for (auto& v : kc) {
        do v = uint8_t(rng.bits32());
        while ((v & 0x7F) == 0x7F);
      }
      std::vector<float> weights(size_t(16 * nv), std::nanf("")), scale(static_cast<size_t>(rows));
      for (int h = 0; h < heads; ++h) weights[size_t(h)] = float(rng.uniform(-1, 1));
      for (auto& x : scale) x = float(rng.uniform(-0.5, 2));
      const size_t bytes = size_t(amx.panel_bytes(heads, dim));
      ASSERT_EQ(bytes, size_t(vec.panel_bytes(heads, dim)));
      std::vector<char> panels(2 * bytes + 64, 0x5A);
      char* p_amx = panels.data() + (64 - reinterpret_cast<uintptr_t>(panels.data()) % 64) % 64;
      char* p_vec = p_amx + bytes;
      amx.pack_query(q.data(), heads, dim, p_amx);
      vec.pack_query(q.data(), heads, dim, p_vec);
      ASSERT_EQ(std::memcmp(p_amx, p_vec, bytes), 0) << "panels differ, heads " << heads << " dim " << dim;
      std::vector<uint16_t> tile(size_t(rows * dim));
      amx.e4m3_keys(kc.data(), int64_t(rows) * dim, tile.data());

      std::vector<float> got(static_cast<size_t>(rows)), want(static_cast<size_t>(rows));
      amx.rows({p_amx, weights.data(), heads, nv, dim, tile.data(), dim, scale.data(), rows, got.data()});
      vec.rows({p_vec, weights.data(), heads, nv, dim, tile.data(), dim, scale.data(), rows, want.data()});
      for (int r = 0; r < rows; ++r) {
        double mag = 0;
        for (int h = 0; h < heads; ++h) {
          double dot_mag = 0;
          for (int d = 0; d < dim; ++d)
            dot_mag += std::fabs(double(bf16_to_f32(q[size_t(h * dim + d)])) * bf16_to_f32(tile[size_t(r * dim + d)]));
          mag += std::fabs(weights[size_t(h)]) * dot_mag * std::fabs(scale[size_t(r)]);
        }
        ASSERT_NEAR(got[size_t(r)], want[size_t(r)], 2e-6 * mag + 1e-30)
            << "heads " << heads << " dim " << dim << " row " << r << " of " << rows;
      }
      // Every row again in calls of 1, 17 and 40 rows starting anywhere (tails, split blocks).
      for (int len : {1, 17, 40}) {
        std::vector<float> part(static_cast<size_t>(len));
        for (int r0 = 0; r0 < rows; r0 += len) {
          const int n = std::min(len, rows - r0);
          amx.rows({p_amx, weights.data(), heads, nv, dim, tile.data() + int64_t(r0) * dim, dim, scale.data() + r0, n,
                    part.data()});
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(f32_bits(part[size_t(r)]), f32_bits(got[size_t(r0 + r)]))
                << "heads " << heads << " dim " << dim << " row " << r0 + r << " in a call of " << n;
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, MqaKernels, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) { return std::string(isa_name(i.param)); });

}  // namespace
}  // namespace tessera::test
