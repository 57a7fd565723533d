// The FP8 KV-cache quantiser byte for byte against an independent implementation of the spec (section 4),
// the dequantiser, and the kernel sets' per-token dequantisation (every set must produce the same bf16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "attention/mla_harness.h"
#include "backends/cpu/mla_kernel_set.h"

namespace tessera::test {
namespace {

using flash_mla::KvCacheLayout;

// The spec's scale: smallest power of two >= max(amax / 448, 1e-4), by repeated doubling (independent of
// the library's bit manipulation).
float spec_scale(float amax) {
  const float x = std::fmax(amax / 448.0f, 1e-4f);
  float s = 0x1p-20f;
  while (s < x) s *= 2;
  return s;
}

// Expected bytes of one token (V32: 656 bytes; MODEL1: 576 data bytes + 8 scale bytes).
void expect_token(const uint16_t* x, KvCacheLayout layout, std::vector<uint8_t>* data, std::vector<uint8_t>* scales) {
  const bool v32 = layout == KvCacheLayout::kV32;
  const int nope = v32 ? 512 : 448, tile = v32 ? 128 : 64;
  data->assign(v32 ? 656 : 576, 0);
  scales->assign(8, 0);
  for (int t = 0; t < nope / tile; ++t) {
    float amax = 0;
    for (int i = t * tile; i < (t + 1) * tile; ++i) amax = std::fmax(amax, std::fabs(bf16_to_f32(x[i])));
    const float s = spec_scale(amax);
    for (int i = t * tile; i < (t + 1) * tile; ++i) (*data)[size_t(i)] = f32_to_e4m3_sat(bf16_to_f32(x[i]) / s);
    if (v32) {
      std::memcpy(data->data() + 512 + 4 * t, &s, 4);
    } else {
      int e;
      std::frexp(s, &e);
      (*scales)[size_t(t)] = uint8_t(e - 1 + 127);
    }
  }
  std::memcpy(data->data() + (v32 ? 528 : 448), x + nope, 128);
}

class KvQuant : public ::testing::TestWithParam<KvCacheLayout> {};

TEST_P(KvQuant, BytesMatchTheSpecAndPaddingIsUntouched) {
  const KvCacheLayout layout = GetParam();
  const int d = int(flash_mla::kv_cache_head_dim(layout)), bpt = int(flash_mla::kv_cache_bytes_per_token(layout));
  const int blocks = 3, bs = 5;
  Rng rng = Rng::for_current_test();
  Buffer k = make_buffer(DType::kBF16, {blocks, bs, 1, d});
  fill_normal(&k, rng, 3.0);
  uint16_t* kx = reinterpret_cast<uint16_t*>(k.bytes.data());
  std::fill_n(kx + d, 200, uint16_t(0));  // an all-zero tile (amax 0 -> scale 2^-13) in token 1
  kx[2 * d + 3] = f32_to_bf16(1e6f);      // a large amax
  const int64_t stride = int64_t(bs) * bpt + 100;
  std::vector<uint8_t> out(size_t(blocks * stride), 0xA5);
  flash_mla::quantize_k_cache(k.view, layout,
                              TensorView(out.data(), DType::kU8, {blocks, bs, 1, bpt}, {stride, bpt, bpt, 1}));
  std::vector<uint8_t> data, scales;
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* base = out.data() + b * stride;
    for (int t = 0; t < bs; ++t) {
      expect_token(kx + (b * bs + t) * d, layout, &data, &scales);
      const uint8_t* got = base + t * (layout == KvCacheLayout::kV32 ? 656 : 576);
      EXPECT_EQ(std::memcmp(got, data.data(), data.size()), 0) << "block " << b << " token " << t;
      if (layout == KvCacheLayout::kModel1) {
        EXPECT_EQ(std::memcmp(base + bs * 576 + t * 8, scales.data(), 8), 0)
            << "scales of block " << b << " token " << t;
      }
    }
    for (int64_t i = int64_t(bs) * bpt; i < stride; ++i) ASSERT_EQ(base[i], 0xA5) << "padding byte " << i << " written";
  }
}

TEST_P(KvQuant, DequantiseInvertsWithinOneE4m3Step) {
  const KvCacheLayout layout = GetParam();
  const int d = int(flash_mla::kv_cache_head_dim(layout)), bpt = int(flash_mla::kv_cache_bytes_per_token(layout));
  Rng rng = Rng::for_current_test();
  Buffer k = make_buffer(DType::kBF16, {2, 4, 1, d});
  fill_normal(&k, rng);
  std::vector<uint8_t> q(size_t(2 * 4 * bpt));
  const TensorView qv(q.data(), DType::kU8, {2, 4, 1, bpt});
  flash_mla::quantize_k_cache(k.view, layout, qv);
  Buffer back = make_buffer(DType::kBF16, {2, 4, 1, d});
  flash_mla::dequantize_k_cache(qv, layout, back.view);
  const std::vector<double> x = to_doubles(k), y = to_doubles(back);
  const int nope = layout == KvCacheLayout::kV32 ? 512 : 448;
  for (size_t i = 0; i < x.size(); ++i) {
    if (int(i % size_t(d)) >= nope) {
      EXPECT_EQ(x[i], y[i]) << "RoPE element " << i << " must be copied";
    } else {
      EXPECT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) / 16 + 0.02) << "element " << i;
    }
  }
}

TEST_P(KvQuant, KernelSetsDequantiseIdentically) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "this CPU lacks avx512bf16";
  const KvCacheLayout layout = GetParam();
  const int d = int(flash_mla::kv_cache_head_dim(layout));
  const cpu::MlaKernelSet* scalar = cpu::mla_kernels_scalar();
  const cpu::MlaKernelSet* fast = cpu::mla_kernels_avx512bf16();
  Rng rng = Rng::for_current_test();
  // Every e4m3 code with power-of-two scales (fast path), awkward fp32 scales, zero and NaN codes.
  const float v32_scales[] = {0x1p-13f, 3.0f, 0x1p5f, 0.3f};
  const uint8_t model1_scales[8] = {127 - 13, 127, 120, 130, 0, 127 + 20, 1, 0};
  std::vector<uint8_t> token(656);
  for (int i = 0; i < 512; ++i) token[size_t(i)] = uint8_t(rng.bits32());
  for (int i = 0; i < 256; ++i) token[size_t(i)] = uint8_t(i);
  std::memcpy(token.data() + 512, v32_scales, 16);
  for (int i = 528; i < 656; ++i) token[size_t(i)] = uint8_t(rng.bits32() & 0x3F);
  std::vector<float> ref(static_cast<size_t>(d));
  std::vector<uint16_t> got(static_cast<size_t>(d));
  if (layout == KvCacheLayout::kV32) {
    scalar->dequant_v32(token.data(), ref.data());
    fast->dequant_v32(token.data(), got.data());
  } else {
    scalar->dequant_model1(token.data(), model1_scales, ref.data());
    fast->dequant_model1(token.data(), model1_scales, got.data());
  }
  for (int i = 0; i < d; ++i) {
    const float r = ref[size_t(i)], g = bf16_to_f32(got[size_t(i)]);
    if (std::isnan(r)) {
      EXPECT_TRUE(std::isnan(g)) << "element " << i;
    } else if (std::fabs(r) < 0x1p-126f) {  // the bf16 conversion instruction may flush subnormals
      EXPECT_TRUE(g == 0.0f || f32_to_bf16(r) == got[size_t(i)]) << "element " << i;
    } else {
      EXPECT_EQ(f32_to_bf16(r), got[size_t(i)]) << "element " << i << " code " << int(token[size_t(i)]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvQuant, ::testing::Values(KvCacheLayout::kV32, KvCacheLayout::kModel1),
                         [](const ::testing::TestParamInfo<KvCacheLayout>& p) {
                           return std::string(p.param == KvCacheLayout::kV32 ? "V32" : "MODEL1");
                         });

}  // namespace
}  // namespace tessera::test
