// T.gemm with float16 and float8-e5m2 operands (alone and mixed with bf16 / e4m3 / fp32) on every level
// of this CPU: fp16 on AMX as its bf16 hi/lo split, elsewhere on the fp32 FMA sets; e5m2 as bf16.
// Products are exact on every path, so C matches a float64 reference to fp32 accumulation error (a
// bf16 rounding of fp16 inputs misses it many times over), bitwise where every partial sum is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "tessera/tl/expr_ops.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

struct Operands {
  DataType a, b;
  bool trans_a, trans_b;
};

std::string describe(const Operands& o) {
  return std::string(type_name(o.a)) + " x " + type_name(o.b) + " trans_a=" + std::to_string(o.trans_a) +
         " trans_b=" + std::to_string(o.trans_b);
}

// C = op(A) op(B) in bm x bn blocks, K steps of bk (the first T.gemm clears).
Kernel gemm_kernel(const Operands& o, int bm, int bn, int bk) {
  KernelBuilder kb("gemm_f16");
  Expr M = kb.dynamic("M"), N = kb.dynamic("N"), K = kb.dynamic("K");
  Buffer A = kb.tensor("A", o.trans_a ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K}, o.a);
  Buffer B = kb.tensor("B", o.trans_b ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, o.b);
  Buffer C = kb.tensor("C", {M, N}, DataType::kFloat32);
  kb.kernel({ceildiv(N, bn), ceildiv(M, bm)}, 128, [&](const std::vector<Expr>& b) {
    Buffer as =
        kb.alloc("A_s", o.trans_a ? std::vector<int64_t>{bk, bm} : std::vector<int64_t>{bm, bk}, o.a, Scope::kShared);
    Buffer bs =
        kb.alloc("B_s", o.trans_b ? std::vector<int64_t>{bn, bk} : std::vector<int64_t>{bk, bn}, o.b, Scope::kShared);
    Buffer cl = kb.alloc("C_l", {bm, bn}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(cl));
    kb.pipelined(ceildiv(K, bk), 2, [&](Expr k) {
      kb.copy(corner(A, o.trans_a ? std::vector<Expr>{k * bk, b[1] * bm} : std::vector<Expr>{b[1] * bm, k * bk}),
              whole(as));
      kb.copy(corner(B, o.trans_b ? std::vector<Expr>{b[0] * bn, k * bk} : std::vector<Expr>{k * bk, b[0] * bn}),
              whole(bs));
      kb.gemm(whole(as), whole(bs), whole(cl), o.trans_a, o.trans_b);
    });
    kb.copy(whole(cl), corner(C, {b[1] * bm, b[0] * bn}));
  });
  return compile(kb.finish(), tl_options());
}

// Mostly normal(0, 1) values (fp16 ones mostly need their lo part: 11 significant bits), some
// subnormals of the type and some near its largest finite value (65504 fp16, 57344 e5m2).
float random_value(DataType t, Rng& rng) {
  const int pick = rng.uniform_int(0, 9);
  const float sign = rng.uniform_int(0, 1) ? -1.0f : 1.0f;
  if (pick == 0 && t == DataType::kFloat16) return sign * std::ldexp(float(rng.uniform_int(1, 1023)), -24);
  if (pick == 0 && t == DataType::kFloat8E5M2) return sign * std::ldexp(float(rng.uniform_int(1, 3)), -16);
  if (pick == 1 && t == DataType::kFloat16) return round_to(t, sign * float(rng.uniform(30000, 65504)));
  if (pick == 1 && t == DataType::kFloat8E5M2) return round_to(t, sign * float(rng.uniform(20000, 57344)));
  return round_to(t, float(rng.normal()));
}

// a is A as [M, K], b is B as [K, N] (values of their types); runs k and returns C.
std::vector<float> run(const Operands& o, Kernel& k, const std::vector<float>& a, const std::vector<float>& b,
                       int64_t m, int64_t n, int64_t kk) {
  std::vector<float> as(a.size()), bs(b.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < kk; ++q) as[size_t(o.trans_a ? q * m + i : i * kk + q)] = a[size_t(i * kk + q)];
  for (int64_t q = 0; q < kk; ++q)
    for (int64_t j = 0; j < n; ++j) bs[size_t(o.trans_b ? j * kk + q : q * n + j)] = b[size_t(q * n + j)];
  std::vector<uint8_t> ab = store_as(o.a, as), bb = store_as(o.b, bs);
  std::vector<float> c(size_t(m * n), -1.0f);
  const DType at = dtype_of(o.a), bt = dtype_of(o.b);
  k({o.trans_a ? TensorView(ab.data(), at, {kk, m}) : TensorView(ab.data(), at, {m, kk}),
     o.trans_b ? TensorView(bb.data(), bt, {n, kk}) : TensorView(bb.data(), bt, {kk, n}),
     TensorView(c.data(), DType::kF32, {m, n})});
  return c;
}

// Random operands against float64: within 1e-5 of the sum of |products| (fp32 accumulation; bf16 inputs
// would be off by ~2^-9 of each product).
void check_random(const Operands& o, Kernel& k, int64_t m, int64_t n, int64_t kk, Rng& rng) {
  std::vector<float> a(size_t(m * kk)), b(size_t(kk * n));
  for (float& x : a) x = random_value(o.a, rng);
  for (float& x : b) x = random_value(o.b, rng);
  const std::vector<float> c = run(o, k, a, b, m, n, kk);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int64_t q = 0; q < kk; ++q) {
        const double p = double(a[size_t(i * kk + q)]) * b[size_t(q * n + j)];
        want += p, mag += std::fabs(p);
      }
      ASSERT_NEAR(c[size_t(i * n + j)], want, 1e-5 * mag + 1e-30)
          << isa_name(active_isa()) << " " << describe(o) << " M=" << m << " N=" << n << " K=" << kk << " at (" << i
          << ", " << j << ")";
    }
}

// Values 1 + j/1024 (fp16 has them all, bf16 none with j % 8 != 0; e5m2 rounds them) and K = 3: every product and
// partial sum is a multiple of 2^-20 below 2^4, exact in fp32 in any order, so C equals the reference bitwise.
void check_exact(const Operands& o, Kernel& k, int64_t m, int64_t n, Rng& rng) {
  const int64_t kk = 3;
  auto value = [&] { return (rng.uniform_int(0, 1) ? -1.0f : 1.0f) * (1.0f + float(rng.uniform_int(0, 1023)) / 1024); };
  std::vector<float> a(size_t(m * kk)), b(size_t(kk * n));
  for (float& x : a) x = round_to(o.a, value());
  for (float& x : b) x = round_to(o.b, value());
  const std::vector<float> c = run(o, k, a, b, m, n, kk);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t q = 0; q < kk; ++q) want += double(a[size_t(i * kk + q)]) * b[size_t(q * n + j)];
      ASSERT_EQ(c[size_t(i * n + j)], want)
          << isa_name(active_isa()) << " " << describe(o) << " at (" << i << ", " << j << ")";
    }
}

// Every level of this CPU up to the one the run started at (TESSERA_ISA caps it); under an emulator
// (scripts/test_arm64.sh runs one level per CPU model) only that level.
std::vector<Isa> levels() {
  if (emulated()) return {active_isa()};
  std::vector<Isa> out;
  for (Isa level : {Isa::kAmx, Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2, Isa::kSve, Isa::kNeonBf16, Isa::kNeon})
    if (isa_supported(level) && isa_includes(active_isa(), level)) out.push_back(level);
  return out;
}

const Operands kSameType[] = {{DataType::kFloat16, DataType::kFloat16, false, true},
                              {DataType::kFloat16, DataType::kFloat16, false, false},
                              {DataType::kFloat16, DataType::kFloat16, true, false},
                              {DataType::kFloat16, DataType::kFloat16, true, true},
                              {DataType::kFloat8E5M2, DataType::kFloat8E5M2, false, true},
                              {DataType::kFloat8E5M2, DataType::kFloat8E5M2, false, false},
                              {DataType::kFloat8E5M2, DataType::kFloat8E5M2, true, false}};

const Operands kMixed[] = {{DataType::kFloat16, DataType::kBFloat16, false, true},
                           {DataType::kBFloat16, DataType::kFloat16, false, true},
                           {DataType::kFloat16, DataType::kFloat32, false, false},
                           {DataType::kFloat16, DataType::kFloat8E5M2, false, true},
                           {DataType::kFloat8E5M2, DataType::kBFloat16, false, true},
                           {DataType::kFloat8E4M3, DataType::kFloat8E5M2, false, true},
                           {DataType::kFloat32, DataType::kFloat8E5M2, true, false}};

// Small tiles (vector sets, tails in every dimension, M of 1) and tiles large enough for AMX's K chunks
// of 128 bf16 values (a 320-value fp16 step is 1280 split values: ten chunks).
TEST(TlRunGemmF16, SameTypeEveryLevelLayoutAndTail) {
  Rng rng = Rng::for_current_test();
  for (const Operands& o : kSameType) {
    Kernel small = gemm_kernel(o, 32, 48, 16), large = gemm_kernel(o, 96, 80, 320);
    for (Isa level : levels()) {
      IsaCapScope cap(level);
      for (auto [m, n, kk] : {std::tuple<int64_t, int64_t, int64_t>{45, 61, 37}, {1, 5, 3}, {32, 48, 16}})
        check_random(o, small, m, n, kk, rng);
      for (auto [m, n, kk] : {std::tuple<int64_t, int64_t, int64_t>{150, 170, 700}, {33, 17, 45}})
        if (!emulated() || m < 100) check_random(o, large, m, n, kk, rng);
      check_exact(o, small, 45, 61, rng);
      check_exact(o, large, emulated() ? 40 : 100, 90, rng);
    }
  }
}

TEST(TlRunGemmF16, MixedWithOtherTypesEveryLevel) {
  Rng rng = Rng::for_current_test();
  for (const Operands& o : kMixed) {
    Kernel small = gemm_kernel(o, 32, 48, 16), large = gemm_kernel(o, 96, 80, 320);
    for (Isa level : levels()) {
      IsaCapScope cap(level);
      check_random(o, small, 45, 61, 37, rng);
      if (emulated()) continue;  // tens of times slower: the small case only
      check_random(o, large, 150, 170, 700, rng);
    }
  }
}

// The split's four products per K value are summed in a fixed order: no dependence on the thread count.
TEST(TlRunGemmF16, BitwiseIdenticalForAnyThreadCount) {
  Rng rng = Rng::for_current_test();
  const int64_t m = emulated() ? 70 : 200, n = emulated() ? 50 : 150, kk = 333;
  for (const Operands& o : {kSameType[0], kSameType[4]}) {
    std::vector<float> a(size_t(m * kk)), b(size_t(kk * n));
    for (float& x : a) x = random_value(o.a, rng);
    for (float& x : b) x = random_value(o.b, rng);
    Kernel k = gemm_kernel(o, 96, 80, 320);
    for (Isa level : levels()) {
      IsaCapScope cap(level);
      std::vector<std::vector<float>> results;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        results.push_back(run(o, k, a, b, m, n, kk));
      }
      set_num_threads(0);
      for (size_t t = 1; t < results.size(); ++t)
        EXPECT_EQ(0, std::memcmp(results[0].data(), results[t].data(), results[0].size() * 4))
            << isa_name(level) << " " << describe(o) << ", thread count index " << t;
    }
  }
}

}  // namespace
}  // namespace tessera::test
