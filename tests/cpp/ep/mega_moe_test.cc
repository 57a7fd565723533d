// Mega MoE on one rank (no MPI): the activation's rounding rules, a small bf16 layer against a double
// reference, the receive statistics and the named argument errors. The multi-rank cases and the
// FP8 x FP4 layer against a float64 reference are in tests/python/test_mega_moe.py.
#include "tessera/mega_moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "moe/mega_moe_activation.h"
#include "tessera/core/dtype.h"

namespace tessera::mega_moe {
namespace {

double bf16_round(double v) {
  return bf16_to_f32(f32_to_bf16(float(v)));
}

TEST(MegaMoeActivation, QuantisesPer32WithCeilPowerOfTwoScales) {
  std::vector<float> v(64, 0.0f);
  v[32] = 448.0f;  // amax 448: scale 2^0
  v[33] = -1.0f;
  std::vector<uint8_t> q(64), exps(2);
  detail::quantize_row_e4m3_ue8m0(v.data(), 64, q.data(), exps.data());
  EXPECT_EQ(exps[0], 0);  // an all-zero group
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_EQ(exps[1], 127);
  EXPECT_EQ(e4m3_to_f32(q[32]), 448.0f);
  EXPECT_EQ(e4m3_to_f32(q[33]), -1.0f);
  v[32] = 449.0f;  // just above 448: scale 2^1, values halved
  detail::quantize_row_e4m3_ue8m0(v.data(), 64, q.data(), exps.data());
  EXPECT_EQ(exps[1], 128);
  EXPECT_EQ(e4m3_to_f32(q[33]), -0.5f);
}

TEST(MegaMoeActivation, ClampsGateAboveAndUpBothSides) {
  const uint16_t gate_up[4] = {f32_to_bf16(5.0f), f32_to_bf16(-3.0f), f32_to_bf16(-9.0f), f32_to_bf16(0.5f)};
  float out[2];
  detail::swiglu_row(gate_up, 2, 2.0f, 1.5f, out);
  const auto silu = [](double g) { return g / (1 + std::exp(-g)); };
  EXPECT_NEAR(out[0], silu(1.5) * -1.5 * 2.0, 1e-6);  // gate 5 -> 1.5, up -9 -> -1.5
  EXPECT_NEAR(out[1], silu(-3.0) * 0.5 * 2.0, 1e-6);  // gate only clamped from above
}

struct SmallLayer {
  static constexpr int64_t kTokens = 3, kHidden = 4, kInter = 2, kExperts = 2, kTopk = 2;
  std::shared_ptr<SymmBuffer> buffer;
  std::vector<uint16_t> l1, l2, y;
  std::vector<int64_t> idx = {0, 1, -1, -1, 1, -1};
  std::vector<float> w = {0.5f, 0.25f, 0.0f, 0.0f, 1.0f, 0.0f};
  std::vector<float> x = {1, -1, 0.5f, 2, 0, 1, 1, 0, -2, 1, 0.25f, -1};

  SmallLayer() : l1(kExperts * 2 * kInter * kHidden), l2(kExperts * kHidden * kInter), y(kTokens * kHidden) {
    BufferShape s;
    s.num_experts = kExperts;
    s.num_max_tokens_per_rank = 4;
    s.num_topk = kTopk;
    s.hidden = kHidden;
    s.intermediate_hidden = kInter;
    s.mma_type = MmaType::kBf16xBf16;
    buffer = SymmBuffer::create(nullptr, s);
    for (size_t i = 0; i < l1.size(); ++i) l1[i] = f32_to_bf16(float(int(i % 7) - 3) * 0.25f);
    for (size_t i = 0; i < l2.size(); ++i) l2[i] = f32_to_bf16(float(int(i % 5) - 2) * 0.5f);
    const BufferLayout& l = buffer->layout();
    auto* bx = reinterpret_cast<uint16_t*>(buffer->data() + l.x);
    for (size_t i = 0; i < x.size(); ++i) bx[i] = f32_to_bf16(x[i]);
    std::memcpy(buffer->data() + l.topk_idx, idx.data(), idx.size() * 8);
    std::memcpy(buffer->data() + l.topk_weights, w.data(), w.size() * 4);
  }
  TensorView l1_view() { return TensorView(l1.data(), DType::kBF16, {kExperts, 2 * kInter, kHidden}); }
  TensorView l2_view() { return TensorView(l2.data(), DType::kBF16, {kExperts, kHidden, kInter}); }
  TensorView y_view(int64_t rows = kTokens) { return TensorView(y.data(), DType::kBF16, {rows, kHidden}); }

  double expected(int64_t t, int64_t h) const {
    double sum = 0;
    for (int64_t k = 0; k < kTopk; ++k) {
      const int64_t e = idx[size_t(t * kTopk + k)];
      if (e < 0) continue;
      double act[kInter];
      for (int64_t i = 0; i < kInter; ++i) {
        double g = 0, u = 0;
        for (int64_t j = 0; j < kHidden; ++j) {
          g += bf16_to_f32(l1[size_t((e * 2 * kInter + i) * kHidden + j)]) * x[size_t(t * kHidden + j)];
          u += bf16_to_f32(l1[size_t((e * 2 * kInter + kInter + i) * kHidden + j)]) * x[size_t(t * kHidden + j)];
        }
        g = bf16_round(g);
        u = bf16_round(u);
        act[i] = bf16_round(g / (1 + std::exp(-g)) * u * w[size_t(t * kTopk + k)]);
      }
      double o = 0;
      for (int64_t i = 0; i < kInter; ++i) o += bf16_to_f32(l2[size_t((e * kHidden + h) * kInter + i)]) * act[i];
      sum += bf16_round(o);
    }
    return bf16_round(sum);
  }
};

TEST(MegaMoe, Bf16LayerMatchesDoubleReferenceAndCountsSlots) {
  SmallLayer layer;
  std::vector<int32_t> stats = {10, 20};
  const TensorView stats_view(stats.data(), DType::kI32, {2});
  bf16_mega_moe(layer.y_view(), layer.l1_view(), layer.l2_view(), &stats_view, *layer.buffer);
  for (int64_t t = 0; t < SmallLayer::kTokens; ++t)
    for (int64_t h = 0; h < SmallLayer::kHidden; ++h) {
      const double want = layer.expected(t, h);  // within one bf16 step (fp32 vs double sums)
      EXPECT_NEAR(bf16_to_f32(layer.y[size_t(t * SmallLayer::kHidden + h)]), want, std::ldexp(std::fabs(want), -7))
          << "t=" << t << " h=" << h;
    }
  for (int64_t h = 0; h < SmallLayer::kHidden; ++h) EXPECT_EQ(layer.y[size_t(SmallLayer::kHidden + h)], 0);
  EXPECT_EQ(stats, (std::vector<int32_t>{11, 22}));
}

void expect_error(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MegaMoe, NamedErrors) {
  SmallLayer layer;
  std::vector<uint16_t> big(5 * SmallLayer::kHidden);
  expect_error(
      [&] {
        bf16_mega_moe(TensorView(big.data(), DType::kBF16, {5, 4}), layer.l1_view(), layer.l2_view(), nullptr,
                      *layer.buffer);
      },
      "num_max_tokens_per_rank");
  expect_error([&] { bf16_mega_moe(layer.y_view(), layer.l2_view(), layer.l2_view(), nullptr, *layer.buffer); },
               "l1_weights");
  Options clamp;
  clamp.activation_clamp = -1.0f;
  expect_error([&] { bf16_mega_moe(layer.y_view(), layer.l1_view(), layer.l2_view(), nullptr, *layer.buffer, clamp); },
               "activation_clamp");
  layer.idx[3] = 2;
  std::memcpy(layer.buffer->data() + layer.buffer->layout().topk_idx, layer.idx.data(), layer.idx.size() * 8);
  expect_error([&] { bf16_mega_moe(layer.y_view(), layer.l1_view(), layer.l2_view(), nullptr, *layer.buffer); },
               "topk_idx");
  expect_error([&] { fp8_fp4_mega_moe(layer.y_view(), {}, {}, nullptr, *layer.buffer); }, "sym_buffer");
  expect_error([] { parse_mma_type("get_symm_buffer_for_mega_moe", "fp4xfp4"); }, "mma_type");
}

}  // namespace
}  // namespace tessera::mega_moe
