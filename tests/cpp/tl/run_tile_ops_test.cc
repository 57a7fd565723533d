// Compiled kernels, tile operations: reductions (every kind, both dims, clear or not), cumsum, gemm
// (dtypes, transposes, tails, clear_accum; large tiles on every level, AMX included), atomics across parallel blocks,
// several grids in one program, and bitwise determinism across thread counts.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/tl/expr_ops.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

constexpr int kRows = 6, kCols = 37;  // not multiples of the vector width

TEST(TlRunTileOps, ReductionsAndCumsum) {
  KernelBuilder kb("reductions");
  Buffer x = kb.tensor("X", {make_int(kRows), make_int(kCols)}, DataType::kFloat32);
  Buffer rows = kb.tensor("R", {make_int(5), make_int(kRows)}, DataType::kFloat32);
  Buffer cols = kb.tensor("Cl", {make_int(5), make_int(kCols)}, DataType::kFloat32);
  Buffer acc = kb.tensor("Acc", {make_int(kRows)}, DataType::kFloat32);
  Buffer cs0 = kb.tensor("Cs0", {make_int(kRows), make_int(kCols)}, DataType::kFloat32);
  Buffer cs1 = kb.tensor("Cs1", {make_int(kRows), make_int(kCols)}, DataType::kFloat32);
  kb.kernel({make_int(1)}, 128, [&](const std::vector<Expr>&) {
    Buffer t = kb.alloc("t", {kRows, kCols}, DataType::kFloat32, Scope::kFragment);
    Buffer r = kb.alloc("r", {kRows}, DataType::kFloat32, Scope::kFragment);
    Buffer c = kb.alloc("c", {kCols}, DataType::kFloat32, Scope::kFragment);
    kb.copy(whole(x), whole(t));
    const ReduceKind kinds[] = {ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kSum, ReduceKind::kAbsSum,
                                ReduceKind::kAbsMax};
    for (int q = 0; q < 5; ++q) {
      kb.reduce(kinds[q], whole(t), whole(r), 1);
      kb.copy(whole(r), region(rows, {make_int(q), make_int(0)}, {make_int(1), make_int(kRows)}));
      kb.reduce(kinds[q], whole(t), whole(c), 0);
      kb.copy(whole(c), region(cols, {make_int(q), make_int(0)}, {make_int(1), make_int(kCols)}));
    }
    kb.fill(whole(r), lift(1.0f));  // clear=false: accumulates onto 1
    kb.reduce(ReduceKind::kSum, whole(t), whole(r), 1, false);
    kb.copy(whole(r), whole(acc));
    Buffer u = kb.alloc("u", {kRows, kCols}, DataType::kFloat32, Scope::kFragment);
    kb.cumsum(whole(t), whole(u), 0, false);
    kb.copy(whole(u), whole(cs0));
    kb.cumsum(whole(t), whole(t), 1, true);  // in place, from the end
    kb.copy(whole(t), whole(cs1));
  });
  Kernel k = compile(kb.finish(), tl_options());
  Rng rng = Rng::for_current_test();
  std::vector<float> in = random_floats(rng, kRows * kCols), r(5 * kRows), c(5 * kCols), a(kRows), s0(kRows * kCols),
                     s1(kRows * kCols);
  k({TensorView(in.data(), DType::kF32, {kRows, kCols}), TensorView(r.data(), DType::kF32, {5, kRows}),
     TensorView(c.data(), DType::kF32, {5, kCols}), TensorView(a.data(), DType::kF32, {kRows}),
     TensorView(s0.data(), DType::kF32, {kRows, kCols}), TensorView(s1.data(), DType::kF32, {kRows, kCols})});
  auto at = [&](int i, int j) { return double(in[size_t(i * kCols + j)]); };
  for (int dim = 0; dim < 2; ++dim) {
    const int outer = dim == 1 ? kRows : kCols, inner = dim == 1 ? kCols : kRows;
    for (int o = 0; o < outer; ++o) {
      double mx = -INFINITY, mn = INFINITY, sum = 0, asum = 0, amax = 0;
      for (int q = 0; q < inner; ++q) {
        const double v = dim == 1 ? at(o, q) : at(q, o);
        mx = std::max(mx, v), mn = std::min(mn, v), sum += v, asum += std::fabs(v), amax = std::max(amax, std::fabs(v));
      }
      const double want[5] = {mx, mn, sum, asum, amax};
      for (int q = 0; q < 5; ++q) {
        const float got = dim == 1 ? r[size_t(q * kRows + o)] : c[size_t(q * kCols + o)];
        EXPECT_NEAR(got, want[q], 1e-5 * (1 + std::fabs(want[q]))) << "kind " << q << " dim " << dim << " at " << o;
      }
      if (dim == 1) {
        EXPECT_NEAR(a[size_t(o)], 1 + sum, 1e-5 * (2 + std::fabs(sum))) << "clear=false row " << o;
      }
    }
  }
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) {
      double down = 0, back = 0;
      for (int q = 0; q <= i; ++q) down += at(q, j);
      for (int q = j; q < kCols; ++q) back += at(i, q);
      ASSERT_NEAR(s0[size_t(i * kCols + j)], down, 1e-5 * (1 + std::fabs(down))) << i << "," << j;
      ASSERT_NEAR(s1[size_t(i * kCols + j)], back, 1e-5 * (1 + std::fabs(back))) << i << "," << j;
    }
}

// C (+)= op(A) op(B) through T.gemm for several operand dtypes and layouts, M, N, K with tails.
struct GemmCase {
  DataType dtype;
  bool trans_a, trans_b;
};

Kernel gemm_kernel(const GemmCase& g, int bm, int bn, int bk) {
  KernelBuilder kb("gemm");
  Expr M = kb.dynamic("M"), N = kb.dynamic("N"), K = kb.dynamic("K");
  Buffer A = kb.tensor("A", g.trans_a ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K}, g.dtype);
  Buffer B = kb.tensor("B", g.trans_b ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N}, g.dtype);
  Buffer C = kb.tensor("C", {M, N}, DataType::kFloat32);
  kb.kernel({ceildiv(N, bn), ceildiv(M, bm)}, 128, [&](const std::vector<Expr>& b) {
    Buffer as = kb.alloc("A_s", g.trans_a ? std::vector<int64_t>{bk, bm} : std::vector<int64_t>{bm, bk}, g.dtype,
                         Scope::kShared);
    Buffer bs = kb.alloc("B_s", g.trans_b ? std::vector<int64_t>{bn, bk} : std::vector<int64_t>{bk, bn}, g.dtype,
                         Scope::kShared);
    Buffer cl = kb.alloc("C_l", {bm, bn}, DataType::kFloat32, Scope::kFragment);
    kb.fill(whole(cl), lift(1000.0f));  // cleared by the first gemm's clear_accum
    kb.pipelined(ceildiv(K, bk), 2, [&](Expr k) {
      kb.copy(corner(A, g.trans_a ? std::vector<Expr>{k * bk, b[1] * bm} : std::vector<Expr>{b[1] * bm, k * bk}),
              whole(as));
      kb.copy(corner(B, g.trans_b ? std::vector<Expr>{b[0] * bn, k * bk} : std::vector<Expr>{k * bk, b[0] * bn}),
              whole(bs));
      kb.if_then(
          eq(k, lift(0)), [&] { kb.gemm(whole(as), whole(bs), whole(cl), g.trans_a, g.trans_b, true); },
          [&] { kb.gemm(whole(as), whole(bs), whole(cl), g.trans_a, g.trans_b, false); });
    });
    kb.copy(whole(cl), corner(C, {b[1] * bm, b[0] * bn}));
  });
  return compile(kb.finish(), tl_options());
}

// Runs kernel k (from gemm_kernel(g, ...)) on random M x N x K operands and checks C against float64.
void check_gemm(const GemmCase& g, Kernel& k, int64_t m, int64_t n, int64_t kk, Rng& rng) {
  std::vector<float> a(size_t(m * kk)), b(size_t(kk * n));
  for (float& x : a) x = round_to(g.dtype, float(rng.normal()));
  for (float& x : b) x = round_to(g.dtype, float(rng.normal()));
  // a holds A as [M, K] (row-major) and b holds B as [K, N]; transposed operands are stored transposed.
  std::vector<float> as(a.size()), bs(b.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < kk; ++q) as[size_t(g.trans_a ? q * m + i : i * kk + q)] = a[size_t(i * kk + q)];
  for (int64_t q = 0; q < kk; ++q)
    for (int64_t j = 0; j < n; ++j) bs[size_t(g.trans_b ? j * kk + q : q * n + j)] = b[size_t(q * n + j)];
  std::vector<uint8_t> ab = store_as(g.dtype, as), bb = store_as(g.dtype, bs);
  std::vector<float> c(size_t(m * n), -1.0f);
  const DType dt = dtype_of(g.dtype);
  k({g.trans_a ? TensorView(ab.data(), dt, {kk, m}) : TensorView(ab.data(), dt, {m, kk}),
     g.trans_b ? TensorView(bb.data(), dt, {n, kk}) : TensorView(bb.data(), dt, {kk, n}),
     TensorView(c.data(), DType::kF32, {m, n})});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int64_t q = 0; q < kk; ++q) {
        want += double(a[size_t(i * kk + q)]) * b[size_t(q * n + j)];
        mag += std::fabs(double(a[size_t(i * kk + q)]) * b[size_t(q * n + j)]);
      }
      ASSERT_NEAR(c[size_t(i * n + j)], want, 1e-5 * (1 + mag))
          << isa_name(active_isa()) << " " << type_name(g.dtype) << " trans_a=" << g.trans_a << " trans_b=" << g.trans_b
          << " M=" << m << " N=" << n << " K=" << kk << " at (" << i << ", " << j << ")";
    }
}

TEST(TlRunTileOps, GemmDtypesLayoutsAndTails) {
  Rng rng = Rng::for_current_test();
  const GemmCase cases[] = {{DataType::kBFloat16, false, true},   {DataType::kBFloat16, false, false},
                            {DataType::kBFloat16, true, false},   {DataType::kFloat32, false, false},
                            {DataType::kFloat8E4M3, false, true}, {DataType::kFloat16, false, false}};
  for (const GemmCase& g : cases) {
    Kernel k = gemm_kernel(g, 32, 48, 16);
    for (auto [m, n, kk] : {std::tuple<int64_t, int64_t, int64_t>{32, 48, 16}, {45, 61, 37}, {1, 5, 3}, {70, 100, 50}})
      check_gemm(g, k, m, n, kk, rng);
  }
}

// The usual TileLang GEMM: T.clear(C_local), then a pipelined K loop of accumulating T.gemms. The
// lowering makes the first T.gemm clear C_local instead (first_gemm_clears.h) and keeps the clear only
// for a loop with no K step: K = 0 must still give zeros.
TEST(TlRunTileOps, GemmAfterClearIncludingNoKSteps) {
  Rng rng = Rng::for_current_test();
  const GemmCase g{DataType::kBFloat16, false, true};
  KernelBuilder kb("gemm_cleared");
  Expr M = kb.dynamic("M"), N = kb.dynamic("N"), K = kb.dynamic("K");
  Buffer A = kb.tensor("A", {M, K}, g.dtype), B = kb.tensor("B", {N, K}, g.dtype);
  Buffer C = kb.tensor("C", {M, N}, DataType::kFloat32);
  kb.kernel({ceildiv(N, 48), ceildiv(M, 32)}, 128, [&](const std::vector<Expr>& b) {
    Buffer as = kb.alloc("A_s", {32, 16}, g.dtype, Scope::kShared);
    Buffer bs = kb.alloc("B_s", {48, 16}, g.dtype, Scope::kShared);
    Buffer cl = kb.alloc("C_l", {32, 48}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(cl));
    kb.pipelined(ceildiv(K, 16), 2, [&](Expr k) {
      kb.copy(corner(A, {b[1] * 32, k * 16}), whole(as));
      kb.copy(corner(B, {b[0] * 48, k * 16}), whole(bs));
      kb.gemm(whole(as), whole(bs), whole(cl), false, true);
    });
    kb.copy(whole(cl), corner(C, {b[1] * 32, b[0] * 48}));
  });
  Kernel k = compile(kb.finish(), tl_options());
  for (auto [m, n, kk] : {std::tuple<int64_t, int64_t, int64_t>{45, 61, 37}, {32, 48, 16}, {7, 9, 0}, {70, 100, 50}})
    check_gemm(g, k, m, n, kk, rng);
}

// Tiles large enough for the matrix unit (AMX takes bf16 and e4m3 T.gemms where the CPU has it) and
// its K chunks of 128, on every level of this CPU from AMX down to AVX2 (up to the level the run
// started at): 96-row blocks (32-row panels, a 22-row tail), 80 columns (a 16-column last panel), K
// steps of 320 (chunks of 128, 128 and 64) and a last step of 60.
TEST(TlRunTileOps, GemmLargeTilesOnEveryLevel) {
  Rng rng = Rng::for_current_test();
  const Isa top = active_isa();  // never above the level the run was started at (TESSERA_ISA)
  const GemmCase cases[] = {{DataType::kBFloat16, false, true},
                            {DataType::kBFloat16, false, false},
                            {DataType::kBFloat16, true, false},
                            {DataType::kFloat8E4M3, false, true}};
  for (const GemmCase& g : cases) {
    Kernel k = gemm_kernel(g, 96, 80, 320);
    for (Isa level : {Isa::kAmx, Isa::kAvx512Bf16, Isa::kAvx2}) {
      if (!isa_supported(level) || int(level) > int(top)) continue;
      IsaCapScope cap(level);
      for (auto [m, n, kk] : {std::tuple<int64_t, int64_t, int64_t>{150, 170, 700}, {96, 80, 320}, {33, 17, 45}})
        check_gemm(g, k, m, n, kk, rng);
    }
  }
}

TEST(TlRunTileOps, AtomicsAcrossParallelBlocks) {
  KernelBuilder kb("histogram");
  Expr n = kb.dynamic("N");
  Buffer v = kb.tensor("V", {n}, DataType::kInt32), h = kb.tensor("H", {make_int(16)}, DataType::kInt32);
  Buffer f = kb.tensor("F", {make_int(4), make_int(8)}, DataType::kFloat32);
  Buffer mx = kb.tensor("Mx", {make_int(1)}, DataType::kFloat32);
  kb.kernel({ceildiv(n, 64)}, 128, [&](const std::vector<Expr>& b) {
    kb.parallel({lift(64)}, [&](const std::vector<Expr>& i) {
      Expr idx = b[0] * 64 + i[0];
      kb.if_then(lt(idx, n), [&] {
        kb.atomic(AtomicKind::kAdd, corner(h, {kb.load(v, {idx}) % 16}), lift(1));
        kb.atomic(AtomicKind::kMax, corner(mx, {make_int(0)}), cast(DataType::kFloat32, kb.load(v, {idx})));
      });
    });
    Buffer ones = kb.alloc("ones", {4, 8}, DataType::kFloat32, Scope::kFragment);
    kb.fill(whole(ones), lift(0.5f));
    kb.atomic(AtomicKind::kAdd, corner(f, {make_int(0), make_int(0)}), whole(ones));
  });
  Kernel k = compile(kb.finish(), tl_options());
  Rng rng = Rng::for_current_test();
  const int64_t len = 5000;  // 79 blocks on every pool thread
  std::vector<int32_t> vals(len), hist(16, 0);
  for (int32_t& x : vals) x = rng.uniform_int(0, 1000);
  std::vector<float> fs(32, 0.0f), m1(1, -1.0f);
  k({TensorView(vals.data(), DType::kI32, {len}), TensorView(hist.data(), DType::kI32, {16}),
     TensorView(fs.data(), DType::kF32, {4, 8}), TensorView(m1.data(), DType::kF32, {1})});
  std::vector<int32_t> want(16, 0);
  int32_t vmax = 0;
  for (int32_t x : vals) ++want[size_t(x % 16)], vmax = std::max(vmax, x);
  EXPECT_EQ(hist, want);
  EXPECT_EQ(m1[0], float(vmax));
  for (float x : fs) EXPECT_EQ(x, 0.5f * 79);  // 79 blocks, each adds 0.5: exact in float32
}

TEST(TlRunTileOps, SeveralGridsRunInOrder) {
  KernelBuilder kb("two_grids");
  Buffer a = kb.tensor("A", {make_int(100)}, DataType::kFloat32),
         b = kb.tensor("B", {make_int(100)}, DataType::kFloat32);
  kb.kernel({make_int(10)}, 128, [&](const std::vector<Expr>& bx) {
    kb.parallel({lift(10)}, [&](const std::vector<Expr>& i) {
      kb.store(a, {bx[0] * 10 + i[0]}, cast(DataType::kFloat32, bx[0] * 10 + i[0]));
    });
  });
  kb.kernel({make_int(1)}, 128, [&](const std::vector<Expr>&) {  // reads what every block of the first grid wrote
    kb.parallel({lift(100)}, [&](const std::vector<Expr>& i) { kb.store(b, {i[0]}, kb.load(a, {lift(99) - i[0]})); });
  });
  Kernel k = compile(kb.finish(), tl_options());
  std::vector<float> x(100, 0), y(100, 0);
  k({TensorView(x.data(), DType::kF32, {100}), TensorView(y.data(), DType::kF32, {100})});
  for (int i = 0; i < 100; ++i) ASSERT_EQ(y[size_t(i)], float(99 - i));
}

TEST(TlRunTileOps, BitwiseIdenticalForAnyThreadCount) {
  Rng rng = Rng::for_current_test();
  const int64_t m = 200, n = 150, kk = 333;
  std::vector<uint16_t> a = to_bf16(random_floats(rng, size_t(m * kk))),
                        b = to_bf16(random_floats(rng, size_t(n * kk)));
  // Small tiles, and tiles large enough for the matrix unit's K chunks (where the CPU has one).
  for (auto [bm, bn, bk] : {std::tuple<int, int, int>{32, 48, 16}, {96, 80, 320}}) {
    Kernel k = gemm_kernel({DataType::kBFloat16, false, true}, bm, bn, bk);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      std::vector<float> c(size_t(m * n), 0.0f);
      k({TensorView(a.data(), DType::kBF16, {m, kk}), TensorView(b.data(), DType::kBF16, {n, kk}),
         TensorView(c.data(), DType::kF32, {m, n})});
      results.push_back(c);
    }
    set_num_threads(0);
    for (size_t t = 1; t < results.size(); ++t)
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[t].data(), results[0].size() * 4))
          << "tile " << bm << " x " << bn << " x " << bk << ", thread count index " << t;
  }
}

}  // namespace
}  // namespace tessera::test
