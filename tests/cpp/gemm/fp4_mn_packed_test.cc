// Packed FP4 operands packed along M/N (MN-major) give the same bits as the same values packed along K,
// on every ISA level, for both operands and odd row counts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tessera/core/cpu.h"
#include "tessera/gemm.h"
#include "test_util.h"

namespace tessera::test {
namespace {

// codes[r][k] (e2m1 nibbles) packed along K ([R, K/2]) and along R ([K, ceil(R/2)]).
struct Fp4Operand {
  std::vector<uint8_t> along_k, along_r;
};

Fp4Operand pack(const std::vector<uint8_t>& codes, int64_t rows, int64_t k) {
  Fp4Operand o;
  o.along_k.assign(size_t(rows * k / 2), 0);
  const int64_t rb = (rows + 1) / 2;
  o.along_r.assign(size_t(k * rb), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t v = codes[size_t(r * k + c)];
      o.along_k[size_t(r * k / 2 + c / 2)] |= uint8_t(v << ((c & 1) * 4));
      o.along_r[size_t(c * rb + r / 2)] |= uint8_t(v << ((r & 1) * 4));
    }
  return o;
}

class Fp4MnPacked : public ::testing::TestWithParam<Isa> {};

TEST_P(Fp4MnPacked, MatchesPackedAlongK) {
  if (!test::isa_supported(GetParam())) GTEST_SKIP() << "ISA not available on this CPU";
  IsaCapScope cap(GetParam());
  std::mt19937 rng(11);
  for (int64_t m : {6, 38}) {
    for (int64_t n : {34, 96}) {
      const int64_t k = 192;
      std::vector<uint8_t> ca(size_t(m * k)), cb(size_t(n * k));
      for (auto& c : ca) c = uint8_t(rng() & 15);
      for (auto& c : cb) c = uint8_t(rng() & 15);
      Fp4Operand a = pack(ca, m, k), b = pack(cb, n, k);
      std::vector<float> sa(size_t(m * k / 32), 0.5f), sb(size_t(n * k / 32), 2.0f);
      std::vector<float> sat(sa.size(), 0.5f), sbt(sb.size(), 2.0f);
      std::vector<float> d_kk(size_t(m * n), -1.0f), d_mn(size_t(m * n), -2.0f);
      gemm::Recipe r;
      r.recipe_a = std::array<int, 2>{1, 32};
      r.recipe_b = std::array<int, 2>{1, 32};
      const gemm::ScaledTensor ak{TensorView(a.along_k.data(), DType::kI8, {m, k / 2}),
                                  TensorView(sa.data(), DType::kF32, {m, k / 32})};
      const gemm::ScaledTensor bk{TensorView(b.along_k.data(), DType::kI8, {n, k / 2}),
                                  TensorView(sb.data(), DType::kF32, {n, k / 32})};
      gemm::fp8_fp4_gemm_nt(ak, bk, TensorView(d_kk.data(), DType::kF32, {m, n}), nullptr, r);
      // 'tn': A given [K, M] and B given [K, N], both packed along their M/N dimension.
      const gemm::ScaledTensor am{TensorView(a.along_r.data(), DType::kI8, {k, (m + 1) / 2}),
                                  TensorView(sat.data(), DType::kF32, {k / 32, m})};
      const gemm::ScaledTensor bm{TensorView(b.along_r.data(), DType::kI8, {k, (n + 1) / 2}),
                                  TensorView(sbt.data(), DType::kF32, {k / 32, n})};
      {
        gemm::fp8_fp4_gemm_tn(am, bm, TensorView(d_mn.data(), DType::kF32, {m, n}), nullptr, r);
        for (size_t i = 0; i < d_kk.size(); ++i)
          ASSERT_EQ(d_kk[i], d_mn[i]) << "m=" << m << " n=" << n << " at (" << i / n << ", " << i % n << ")";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, Fp4MnPacked,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace tessera::test
