// Dispatch smoke: every public GEMM entry once at this CPU's own level, on small shapes - dense bf16,
// FP8 and FP4 (M = 1 and 4 take the decode GEMV paths), M-grouped contiguous and masked - each
// against a float64 reference. Run natively and under QEMU CPU models by scripts/test.sh, so an
// instruction the CPU lacks shows as SIGILL here.
#include <gtest/gtest.h>

#include "gemm/gemm_cases.h"
#include "smoke_util.h"
#include "tessera/gemm_grouped.h"

namespace tessera::test::smoke {
namespace {

constexpr int64_t kN = 160, kK = 256;
const int64_t kRows[] = {1, 4, 37};  // GEMV with one and four rows, then the packed GEMM

GemmShape shape(int64_t m) {
  return {m, kN, kK, Major::kK, Major::kK, 0, DType::kBF16, CMode::kNone};
}

TEST(DispatchSmoke, DenseBf16) {
  Rng rng(1);
  for (int64_t m : kRows) {
    PreparedGemm g = prepare_plain(Family::kBf16, DType::kBF16, Layout::kNT, shape(m), rng);
    EXPECT_TRUE(run_and_check(g)) << "m=" << m;
  }
}

TEST(DispatchSmoke, DenseScaledFp8AndFp4) {
  Rng rng(2);
  for (const char* recipe :
       {"fp8 token(1,128) x block(128,128) f32", "fp8 x fp4 f32 (defaults)", "fp4 x fp4 ue8m0 packed (defaults)"})
    for (int64_t m : kRows) {
      PreparedGemm g = prepare_scaled(scale_recipe(recipe), Layout::kNT, shape(m), rng);
      EXPECT_TRUE(run_and_check(g)) << recipe << ", m=" << m;
    }
}

// D[r, :] = A[r, :] . B[group(r)]^T for rows with a group; `scale_a` / `scale_b` give the FP8 scales
// (1 for bf16) of an element.
template <class ScaleA, class ScaleB>
std::vector<double> grouped_reference(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<int32_t>& group, ScaleA scale_a, ScaleB scale_b) {
  std::vector<double> d(group.size() * size_t(kN), 0.0);
  for (size_t r = 0; r < group.size(); ++r) {
    if (group[r] < 0) continue;
    for (int64_t n = 0; n < kN; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < kK; ++k)
        sum += a[r * kK + size_t(k)] * scale_a(int64_t(r), k) *
               b[(size_t(group[r]) * kN + size_t(n)) * kK + size_t(k)] * scale_b(group[r], n, k);
      d[r * kN + size_t(n)] = sum;
    }
  }
  return d;
}

std::vector<double> bf16_values(const std::vector<uint16_t>& d, size_t count) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = bf16_to_f32(d[i]);
  return v;
}

TEST(DispatchSmoke, GroupedBf16Masked) {
  Rng rng(3);
  const int64_t groups = 2, max_m = 8;
  std::vector<int32_t> masked = {5, 1};
  std::vector<double> a, b;
  auto a_bits = random_bf16(rng, groups * max_m * kK, &a), b_bits = random_bf16(rng, groups * kN * kK, &b);
  std::vector<uint16_t> d(size_t(groups * max_m * kN), 0);
  gemm::m_grouped_bf16_gemm_nt_masked(TensorView(a_bits.data(), DType::kBF16, {groups, max_m, kK}),
                                      TensorView(b_bits.data(), DType::kBF16, {groups, kN, kK}),
                                      TensorView(d.data(), DType::kBF16, {groups, max_m, kN}),
                                      TensorView(masked.data(), DType::kI32, {groups}), 4);
  // Rows at or past masked_m are not written: compare the masked rows only (their group is -1).
  std::vector<int32_t> group(size_t(groups * max_m));
  for (int64_t r = 0; r < groups * max_m; ++r)
    group[size_t(r)] = r % max_m < masked[size_t(r / max_m)] ? int32_t(r / max_m) : -1;
  const auto one2 = [](int64_t, int64_t) { return 1.0; };
  const auto one3 = [](int64_t, int64_t, int64_t) { return 1.0; };
  std::vector<double> ref = grouped_reference(a, b, group, one2, one3), got = bf16_values(d, d.size());
  for (size_t r = 0; r < group.size(); ++r)
    if (group[r] < 0)
      for (int64_t n = 0; n < kN; ++n) got[r * kN + size_t(n)] = 0;
  EXPECT_TRUE(close_to("m_grouped_bf16_gemm_nt_masked", got, ref, 2e-2));
}

TEST(DispatchSmoke, GroupedFp8Contiguous) {
  Rng rng(4);
  // Two groups of 6 and 3 rows at alignment 8, padding rows marked -1 (written as zero).
  std::vector<int32_t> group = {0, 0, 0, 0, 0, 0, -1, -1, 1, 1, 1, -1, -1, -1, -1, -1};
  const int64_t m = int64_t(group.size()), groups = 2, sf_k = kK / 128, sf_n = (kN + 127) / 128;
  std::vector<double> a, b;
  auto a_bits = random_e4m3(rng, m * kK, &a), b_bits = random_e4m3(rng, groups * kN * kK, &b);
  // Powers of two, so the reference is exact whatever order the kernel applies them in.
  std::vector<float> sfa(size_t(m * sf_k)), sfb(size_t(groups * sf_n * sf_k));
  for (float& s : sfa) s = std::ldexp(1.0f, rng.uniform_int(-3, 3));
  for (float& s : sfb) s = std::ldexp(1.0f, rng.uniform_int(-3, 3));
  std::vector<uint16_t> d(size_t(m * kN), kPoisonBf16);
  gemm::ContiguousLayout layout;
  layout.grouped_layout = TensorView(group.data(), DType::kI32, {m});
  layout.mk_alignment = 8;
  gemm::m_grouped_fp8_fp4_gemm_nt_contiguous(
      {TensorView(a_bits.data(), DType::kF8E4M3, {m, kK}), TensorView(sfa.data(), DType::kF32, {m, sf_k})},
      {TensorView(b_bits.data(), DType::kF8E4M3, {groups, kN, kK}),
       TensorView(sfb.data(), DType::kF32, {groups, sf_n, sf_k})},
      TensorView(d.data(), DType::kBF16, {m, kN}), layout);
  const auto scale_a = [&](int64_t r, int64_t k) { return double(sfa[size_t(r * sf_k + k / 128)]); };
  const auto scale_b = [&](int64_t g, int64_t n, int64_t k) {
    return double(sfb[size_t((g * sf_n + n / 128) * sf_k + k / 128)]);
  };
  EXPECT_TRUE(close_to("m_grouped_fp8_fp4_gemm_nt_contiguous", bf16_values(d, d.size()),
                       grouped_reference(a, b, group, scale_a, scale_b), 2e-2));
}

}  // namespace
}  // namespace tessera::test::smoke
