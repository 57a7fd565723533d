// DeepGEMM's scale-factor layout utilities (DeepGEMM's API, docs/gemm.md): exact values, shapes and
// strides; errors leave dst untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "gemm/gemm_harness.h"

namespace tessera::test {
namespace {

int64_t align_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

TEST(GemmLayoutUtils, TmaAlignedSize) {
  for (int64_t es : {1, 2, 4, 8, 16})
    for (int64_t x : {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 127, 128, 129, 7168})
      EXPECT_EQ(gemm::get_tma_aligned_size(x, es), align_up(x, 16 / es)) << "x=" << x << " element_size=" << es;
  EXPECT_EQ(gemm::get_tma_aligned_size(5, 4), 8);
  for (int64_t bad : {0, 3, 32, -4})
    EXPECT_TRUE(throws_invalid([&] { gemm::get_tma_aligned_size(5, bad); },
                               {"get_tma_aligned_size", "'element_size'", "divide 16"}));
}

// Random fp32 SF [groups, mn, sfk] as a K-major (contiguous) or MN-major view.
struct SfInput {
  std::vector<float> data;
  TensorView view;
};
SfInput make_sf(int64_t groups, int64_t mn, int64_t sfk, bool mn_major, bool powers_of_two, Rng& rng) {
  SfInput s;
  s.data.resize(size_t(std::max<int64_t>(groups * mn * sfk, 1)));
  for (float& v : s.data)
    v = powers_of_two ? std::ldexp(1.0f, rng.uniform_int(-20, 20)) : float(rng.uniform(0.01, 10.0));
  const int64_t s_mn = mn_major ? 1 : sfk, s_k = mn_major ? mn : 1;
  s.view = groups > 1 ? TensorView(s.data.data(), DType::kF32, {groups, mn, sfk}, {mn * sfk, s_mn, s_k})
                      : TensorView(s.data.data(), DType::kF32, {mn, sfk}, {s_mn, s_k});
  return s;
}
float sf_at(const SfInput& s, int64_t g, int64_t r, int64_t c) {
  const TensorView& v = s.view;
  return s.data[size_t((v.ndim == 3 ? g * v.strides[0] : 0) + r * v.stride(-2) + c * v.stride(-1))];
}

// dst with DeepGEMM's MN-major TMA-aligned strides: (1, aMN) or (aMN*cols, 1, aMN), inside a buffer
// of poison so writes to the alignment rows would show.
struct DstBuffer {
  std::vector<uint32_t> words;
  TensorView view;
};
DstBuffer make_dst(DType dtype, int64_t groups, int64_t mn, int64_t cols) {
  DstBuffer d;
  const int64_t amn = align_up(mn, 4);
  d.words.assign(size_t(std::max<int64_t>(groups * amn * cols, 1)), kPoisonF32);
  d.view = groups > 1 ? TensorView(d.words.data(), dtype, {groups, mn, cols}, {amn * cols, 1, amn})
                      : TensorView(d.words.data(), dtype, {mn, cols}, {1, amn});
  return d;
}

TEST(GemmLayoutUtils, CopyToMnMajorTmaAligned) {
  Rng rng = Rng::for_current_test();
  for (int64_t groups : {1, 3})
    for (int64_t mn : {1, 5, 8, 129})
      for (int64_t sfk : {1, 3, 56})
        for (bool src_mn_major : {false, true}) {
          const SfInput sf = make_sf(groups, mn, sfk, src_mn_major, false, rng);
          DstBuffer dst = make_dst(DType::kF32, groups, mn, sfk);
          gemm::copy_to_mn_major_tma_aligned(sf.view, dst.view);
          const int64_t amn = align_up(mn, 4);
          for (int64_t g = 0; g < groups; ++g)
            for (int64_t r = 0; r < amn; ++r)
              for (int64_t c = 0; c < sfk; ++c) {
                const uint32_t got = dst.words[size_t(g * amn * sfk + c * amn + r)];
                const uint32_t want = r < mn ? f32_bits(sf_at(sf, g, r, c)) : kPoisonF32;
                ASSERT_EQ(got, want) << "groups=" << groups << " mn=" << mn << " sfk=" << sfk
                                     << " src_mn_major=" << src_mn_major << " at (" << g << ", " << r << ", " << c
                                     << ")";
              }
        }
}

TEST(GemmLayoutUtils, CopyRejectsBadArguments) {
  Rng rng = Rng::for_current_test();
  const SfInput sf = make_sf(1, 5, 3, false, false, rng);
  std::vector<float> buf(64, 0.0f);
  const std::vector<float> before = buf;
  const char* fn = "get_mn_major_tma_aligned_tensor";
  // Unaligned MN stride (5 instead of 8), row-major dst, wrong shape, wrong dtype, wrong source dtype.
  EXPECT_TRUE(throws_invalid(
      [&] {
        gemm::copy_to_mn_major_tma_aligned(sf.view, TensorView(buf.data(), DType::kF32, {5, 3}, {1, 5}));
      },
      {fn, "'dst'", "MN-major", "(1, 8)"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gemm::copy_to_mn_major_tma_aligned(sf.view, TensorView(buf.data(), DType::kF32, {5, 3}, {3, 1}));
      },
      {fn, "'dst'", "(1, 8)"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gemm::copy_to_mn_major_tma_aligned(sf.view, TensorView(buf.data(), DType::kF32, {5, 4}, {1, 8}));
      },
      {fn, "'dst'", "shape [5, 3]"}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gemm::copy_to_mn_major_tma_aligned(sf.view, TensorView(buf.data(), DType::kI32, {5, 3}, {1, 8}));
      },
      {fn, "'dst'", "dtype float32"}));
  TensorView sf_i32 = sf.view;
  sf_i32.dtype = DType::kI32;
  EXPECT_TRUE(throws_invalid(
      [&] {
        gemm::copy_to_mn_major_tma_aligned(sf_i32, TensorView(buf.data(), DType::kF32, {5, 3}, {1, 8}));
      },
      {fn, "'sf'", "dtype float32"}));
  EXPECT_EQ(buf, before);
}

// Expected packed word from the definition: byte j = biased exponent of SF index 4i+j, 0 past SFK.
uint32_t expected_word(const SfInput& sf, int64_t g, int64_t r, int64_t i, int64_t sfk) {
  uint32_t word = 0;
  for (int j = 0; j < 4; ++j) {
    if (4 * i + j >= sfk) continue;
    int e;
    std::frexp(double(sf_at(sf, g, r, 4 * i + j)), &e);  // v = 0.5 * 2^e = 2^(e-1)
    word |= uint32_t(e - 1 + 127) << (8 * j);
  }
  return word;
}

TEST(GemmLayoutUtils, PackUe8m0MnMajor) {
  Rng rng = Rng::for_current_test();
  for (int64_t groups : {1, 2})
    for (int64_t mn : {1, 6, 8, 130})
      for (int64_t sfk : {1, 4, 5, 7, 56})
        for (bool src_mn_major : {false, true}) {
          const SfInput sf = make_sf(groups, mn, sfk, src_mn_major, true, rng);
          const int64_t packed = (sfk + 3) / 4, amn = align_up(mn, 4);
          DstBuffer dst = make_dst(DType::kI32, groups, mn, packed);
          gemm::pack_ue8m0_mn_major(sf.view, dst.view);
          for (int64_t g = 0; g < groups; ++g)
            for (int64_t r = 0; r < amn; ++r)
              for (int64_t i = 0; i < packed; ++i) {
                const uint32_t got = dst.words[size_t(g * amn * packed + i * amn + r)];
                const uint32_t want = r < mn ? expected_word(sf, g, r, i, sfk) : kPoisonF32;
                ASSERT_EQ(got, want) << "groups=" << groups << " mn=" << mn << " sfk=" << sfk
                                     << " src_mn_major=" << src_mn_major << " at (" << g << ", " << r << ", " << i
                                     << ")";
              }
        }
}

TEST(GemmLayoutUtils, PackUe8m0KnownWord) {
  // SF row {1, 2, 0.5, 2^-10, 4}: bytes 127, 128, 126, 117 | 129, 0, 0, 0.
  float sf[5] = {1.0f, 2.0f, 0.5f, std::ldexp(1.0f, -10), 4.0f};
  DstBuffer dst = make_dst(DType::kI32, 1, 1, 2);
  gemm::pack_ue8m0_mn_major(TensorView(sf, DType::kF32, {1, 5}), dst.view);
  EXPECT_EQ(dst.words[0], 0x757E807Fu);
  EXPECT_EQ(dst.words[4], 0x00000081u);  // second word at MN stride align(1, 4) = 4
}

TEST(GemmLayoutUtils, PackRejectsValuesThatAreNotPowersOfTwo) {
  const char* fn = "get_mn_major_tma_aligned_packed_ue8m0_tensor";
  for (float bad : {3.0f, 0.0f, -2.0f, std::numeric_limits<float>::infinity(), std::nanf(""), 1.5f}) {
    float sf[6] = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f, 32.0f};
    sf[4] = bad;
    DstBuffer dst = make_dst(DType::kI32, 1, 2, 1);
    const std::vector<uint32_t> before = dst.words;
    EXPECT_TRUE(throws_invalid(
        [&] {
          gemm::pack_ue8m0_mn_major(TensorView(sf, DType::kF32, {2, 3}), dst.view);
        },
        {fn, "'sf'", "powers of two", "(1, 1)"}))
        << bad;
    EXPECT_EQ(dst.words, before) << "dst modified for bad value " << bad;
  }
  DstBuffer wrong = make_dst(DType::kF32, 1, 2, 1);
  float ok[6] = {1, 2, 4, 8, 16, 32};
  EXPECT_TRUE(throws_invalid(
      [&] {
        gemm::pack_ue8m0_mn_major(TensorView(ok, DType::kF32, {2, 3}), wrong.view);
      },
      {fn, "'dst'", "dtype int32"}));
}

}  // namespace
}  // namespace tessera::test
