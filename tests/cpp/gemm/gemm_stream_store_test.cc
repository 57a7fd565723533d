// A large D (>= 4 MiB written by the call, all groups together) is written with non-temporal stores
// wherever a row's 64-byte line is whole and aligned (backends/cpu/avx512/gemm_finalize.cc); a D whose
// rows all start at the same place in a line writes the columns before the first boundary with ordinary
// stores and streams the rest. The same call into D views that are line-aligned, misaligned by one
// element or by 16 bytes (numpy's alignment) and of a padded stride (some rows aligned) must give the
// same bits, agree with a float64 dot product, and leave the padding around the view untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/gemm.h"
#include "tessera/gemm_grouped.h"

namespace tessera::test {
namespace {

constexpr uint8_t kPoison = 0xA5;

enum class CUse { kNone, kSeparate, kInPlace };

struct Problem {
  int64_t m, n, k;
  DType d_type;
  CUse c_use;
  std::vector<uint16_t> a, b;  // bf16, K-major
  std::vector<float> c;        // C's values (stored as d_type)
};

Problem make_problem(int64_t m, int64_t n, int64_t k, DType d_type, CUse c_use) {
  Problem p{m, n, k, d_type, c_use, {}, {}, {}};
  std::mt19937 rng(uint32_t(m * 31 + n * 7 + k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.a.resize(size_t(m * k));
  p.b.resize(size_t(n * k));
  for (uint16_t& v : p.a) v = f32_to_bf16(normal(rng));
  for (uint16_t& v : p.b) v = f32_to_bf16(normal(rng));
  if (c_use != CUse::kNone) {
    p.c.resize(size_t(m * n));
    // Values representable in d_type, so C read back from D (in place) is the same C.
    for (float& v : p.c) v = bf16_to_f32(f32_to_bf16(4.0f * normal(rng)));
  }
  return p;
}

void put(uint8_t* base, DType t, int64_t at, float v) {
  if (t == DType::kF32) {
    std::memcpy(base + at * 4, &v, 4);
  } else {
    const uint16_t h = f32_to_bf16(v);
    std::memcpy(base + at * 2, &h, 2);
  }
}

// Runs bf16_gemm_nt into a D view `offset` bytes past a 64-byte boundary with row stride `ldd`.
// Returns D's m x n elements as bytes (row-major, no padding); checks the bytes around the view.
std::vector<uint8_t> run(const Problem& p, int64_t offset, int64_t ldd) {
  const int64_t es = dtype_storage_bytes(p.d_type), span = (p.m - 1) * ldd + p.n;
  const int64_t total = offset + span * es + 64;
  AlignedPtr<uint8_t> buffer = aligned_array<uint8_t>(size_t(total));
  std::memset(buffer.get(), kPoison, size_t(total));
  uint8_t* d = buffer.get() + offset;
  std::vector<uint8_t> c_storage;
  TensorView c_view;
  if (p.c_use == CUse::kInPlace) {
    for (int64_t r = 0; r < p.m; ++r)
      for (int64_t j = 0; j < p.n; ++j) put(d, p.d_type, r * ldd + j, p.c[size_t(r * p.n + j)]);
    c_view = TensorView(d, p.d_type, {p.m, p.n}, {ldd, 1});
  } else if (p.c_use == CUse::kSeparate) {
    c_storage.resize(size_t(p.m * p.n * es));
    for (int64_t i = 0; i < p.m * p.n; ++i) put(c_storage.data(), p.d_type, i, p.c[size_t(i)]);
    c_view = TensorView(c_storage.data(), p.d_type, {p.m, p.n});
  }
  const TensorView a(const_cast<uint16_t*>(p.a.data()), DType::kBF16, {p.m, p.k});
  const TensorView b(const_cast<uint16_t*>(p.b.data()), DType::kBF16, {p.n, p.k});
  const TensorView dv(d, p.d_type, {p.m, p.n}, {ldd, 1});
  gemm::bf16_gemm_nt(a, b, dv, p.c_use == CUse::kNone ? nullptr : &c_view);

  std::vector<uint8_t> out(size_t(p.m * p.n * es));
  for (int64_t r = 0; r < p.m; ++r) std::memcpy(&out[size_t(r * p.n * es)], d + r * ldd * es, size_t(p.n * es));
  // Untouched: the bytes before and after the view and each row's padding.
  for (int64_t i = 0; i < offset; ++i) EXPECT_EQ(buffer.get()[i], kPoison) << "byte " << i << " before D";
  for (int64_t i = offset + span * es; i < total; ++i) EXPECT_EQ(buffer.get()[i], kPoison) << "byte after D";
  for (int64_t r = 0; r + 1 < p.m && ldd > p.n; ++r)
    for (int64_t i = (r * ldd + p.n) * es; i < (r + 1) * ldd * es; ++i)
      if (d[i] != kPoison) {
        ADD_FAILURE() << "row " << r << " padding written";
        return out;
      }
  return out;
}

float element(const Problem& p, const std::vector<uint8_t>& out, int64_t r, int64_t j) {
  const int64_t at = r * p.n + j;
  if (p.d_type == DType::kF32) {
    float v;
    std::memcpy(&v, &out[size_t(at * 4)], 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, &out[size_t(at * 2)], 2);
  return bf16_to_f32(h);
}

void check_case(int64_t m, int64_t n, int64_t k, DType d_type, CUse c_use) {
  SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " d=" << dtype_name(d_type)
                                    << " c=" << int(c_use));
  const Problem p = make_problem(m, n, k, d_type, c_use);
  const int64_t es = dtype_storage_bytes(d_type);
  ASSERT_GE(m * n * es, int64_t(4) << 20) << "the case must be large enough to stream";
  const std::vector<uint8_t> aligned = run(p, 0, n);
  EXPECT_EQ(aligned, run(p, es, n)) << "D one element past a line boundary differs";
  EXPECT_EQ(aligned, run(p, 16, n)) << "D 16 bytes past a line boundary differs";
  EXPECT_EQ(aligned, run(p, 0, n + 8)) << "padded stride (some rows aligned) differs";
  // Spot checks against float64 dot products (bf16 products are exact in fp32; tolerance covers the
  // fp32 summation and D's rounding).
  std::mt19937 rng(7);
  for (int i = 0; i < 64; ++i) {
    const int64_t r = int64_t(rng() % uint32_t(m)), j = int64_t(rng() % uint32_t(n));
    double want = c_use == CUse::kNone ? 0.0 : double(p.c[size_t(r * n + j)]), mag = std::fabs(want);
    for (int64_t kk = 0; kk < k; ++kk) {
      const double t = double(bf16_to_f32(p.a[size_t(r * k + kk)])) * double(bf16_to_f32(p.b[size_t(j * k + kk)]));
      want += t;
      mag += std::fabs(t);
    }
    const double tol = (d_type == DType::kF32 ? 1e-5 : 1e-2) * mag + 1e-6;
    EXPECT_NEAR(element(p, aligned, r, j), want, tol) << "D[" << r << "][" << j << "]";
  }
}

// Which cases finalize transposed tiles (the wide or the tall) depends on the kernel set's plan.
TEST(GemmStreamStore, WideBf16D) {
  check_case(260, 8200, 96, DType::kBF16, CUse::kNone);
}
TEST(GemmStreamStore, WideF32DWithC) {
  check_case(130, 8200, 64, DType::kF32, CUse::kSeparate);
}
TEST(GemmStreamStore, TallBf16DInPlace) {
  check_case(8200, 260, 64, DType::kBF16, CUse::kInPlace);
}
TEST(GemmStreamStore, WideF32D) {
  check_case(260, 4100, 80, DType::kF32, CUse::kNone);
}
// Rows of whole lines (N a multiple of 32 bf16 / 16 fp32 values): a misaligned D keeps one offset in
// every row, so each row writes a head with ordinary stores and streams from the first boundary on.
TEST(GemmStreamStore, WideBf16DWholeLineRows) {
  check_case(260, 8192, 96, DType::kBF16, CUse::kNone);
}
TEST(GemmStreamStore, TallBf16DWholeLineRowsInPlace) {
  check_case(8200, 256, 64, DType::kBF16, CUse::kInPlace);
}
TEST(GemmStreamStore, WideF32DWholeLineRowsWithC) {
  check_case(130, 8192, 64, DType::kF32, CUse::kSeparate);
}
TEST(GemmStreamStore, TallF32DWholeLineRows) {
  check_case(8200, 256, 64, DType::kF32, CUse::kNone);
}

// An MoE GEMM whose groups' D are 1 MiB each and 4.2 MiB together: the call's D decides.
TEST(GemmStreamStore, GroupedContiguousBf16D) {
  constexpr int64_t kGroups = 4, kRows = 256, m = kGroups * kRows, n = 2100, k = 64;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(size_t(m * k)), b(size_t(kGroups * n * k));
  for (uint16_t& v : a) v = f32_to_bf16(normal(rng));
  for (uint16_t& v : b) v = f32_to_bf16(normal(rng));
  std::vector<int32_t> groups(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) groups[size_t(r)] = int32_t(r / kRows);
  gemm::ContiguousLayout layout;
  layout.grouped_layout = TensorView(groups.data(), DType::kI32, {m});
  auto run_at = [&](int64_t offset) {
    AlignedPtr<uint8_t> buffer = aligned_array<uint8_t>(size_t(offset + m * n * 2 + 64));
    std::memset(buffer.get(), kPoison, size_t(offset + m * n * 2 + 64));
    gemm::m_grouped_bf16_gemm_nt_contiguous(TensorView(a.data(), DType::kBF16, {m, k}),
                                            TensorView(b.data(), DType::kBF16, {kGroups, n, k}),
                                            TensorView(buffer.get() + offset, DType::kBF16, {m, n}), layout);
    return std::vector<uint8_t>(buffer.get() + offset, buffer.get() + offset + m * n * 2);
  };
  const std::vector<uint8_t> aligned = run_at(0);
  EXPECT_EQ(aligned, run_at(2)) << "D one element past a line boundary differs";
  EXPECT_EQ(aligned, run_at(16)) << "D 16 bytes past a line boundary differs";
  for (int i = 0; i < 64; ++i) {
    const int64_t r = int64_t(rng() % uint32_t(m)), j = int64_t(rng() % uint32_t(n)), g = r / kRows;
    double want = 0.0, mag = 0.0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const double t =
          double(bf16_to_f32(a[size_t(r * k + kk)])) * double(bf16_to_f32(b[size_t((g * n + j) * k + kk)]));
      want += t;
      mag += std::fabs(t);
    }
    uint16_t h;
    std::memcpy(&h, &aligned[size_t((r * n + j) * 2)], 2);
    EXPECT_NEAR(bf16_to_f32(h), want, 1e-2 * mag + 1e-6) << "D[" << r << "][" << j << "]";
  }
}

}  // namespace
}  // namespace tessera::test
