// Passes: region inference and its errors, verification errors, lowering refusals, bounds guards and
// vectorisation decisions. Errors must name the op, the rule and the source line.
#include <gtest/gtest.h>

#include <functional>

#include "tessera/tl/expr_ops.h"
#include "tessera/tl/printer.h"
#include "tl/passes/pass_pipeline.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

// The host at its level, but always with vector lanes: these tests check the lowering of SIMD loops,
// which the scalar level (TESSERA_ISA=scalar) does not make. Nothing here is compiled.
Target cpu() {
  Target t = Target::host();
  if (t.vector_lanes == 0) t.vector_lanes = 16;
  return t;
}

// A GEMM-shaped program; `body` adds the statements under test inside the kernel.
struct Fixture {
  KernelBuilder kb{"k", test_loc(1)};
  Buffer A, C;
  Fixture() {
    A = kb.tensor("A", {make_int(256), make_int(256)}, DataType::kBFloat16);
    C = kb.tensor("C", {make_int(256), make_int(256)}, DataType::kFloat32);
  }
  Program build(const std::function<void(const std::vector<Expr>&)>& body) {
    kb.kernel({make_int(2), make_int(2)}, 128, body);
    return kb.finish();
  }
};

TEST(TlPasses, CornerCopyTakesTheOtherOperandsShape) {
  Fixture f;
  const Program p = f.build([&](const std::vector<Expr>& b) {
    Buffer s = f.kb.alloc("A_shared", {128, 32}, DataType::kBFloat16, Scope::kShared);
    f.kb.copy(corner(f.A, {b[1] * 128, make_int(32)}), whole(s));
  });
  const std::string text = to_string(lower_program(p, cpu()));
  // the copy became a 128 x 32 loop nest reading A at the corner, vectorized over the 32 columns
  EXPECT_NE(text.find("T.serial(128)"), std::string::npos) << text;
  EXPECT_NE(text.find("T.vectorized(32)"), std::string::npos) << text;
  EXPECT_EQ(text.find("if_then_else"), std::string::npos) << "static in-range tiles need no guards:\n" << text;
}

TEST(TlPasses, CopyShapeMismatchNamesBothShapes) {
  Fixture f;
  const Program p = f.build([&](const std::vector<Expr>& b) {
    Buffer s = f.kb.alloc("A_shared", {128, 32}, DataType::kBFloat16, Scope::kShared);
    f.kb.set_loc(test_loc(12));
    f.kb.copy(region(f.A, {make_int(0), make_int(0)}, {make_int(128), make_int(64)}), whole(s));
  });
  EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:12", "T.copy", "shape mismatch", "[128, 64]", "[128, 32]", "A_shared"}));
}

TEST(TlPasses, GemmShapeAndScopeErrors) {
  {
    Fixture f;
    const Program p = f.build([&](const std::vector<Expr>&) {
      Buffer a = f.kb.alloc("a", {64, 32}, DataType::kBFloat16, Scope::kShared);
      Buffer b = f.kb.alloc("b", {64, 64}, DataType::kBFloat16, Scope::kShared);
      Buffer c = f.kb.alloc("c", {64, 64}, DataType::kFloat32, Scope::kFragment);
      f.kb.set_loc(test_loc(20));
      f.kb.gemm(whole(a), whole(b), whole(c));
    });
    EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                             {"kernel.py:20", "T.gemm", "K of A and K of B differ", "[64, 32]", "[64, 64]"}));
  }
  {
    Fixture f;
    const Program p = f.build([&](const std::vector<Expr>&) {
      Buffer a = f.kb.alloc("a", {64, 32}, DataType::kBFloat16, Scope::kShared);
      Buffer b = f.kb.alloc("b", {32, 64}, DataType::kBFloat16, Scope::kShared);
      Buffer c = f.kb.alloc("C_shared", {64, 64}, DataType::kFloat32, Scope::kShared);
      f.kb.set_loc(test_loc(21));
      f.kb.gemm(whole(a), whole(b), whole(c));
    });
    EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                             {"kernel.py:21", "T.gemm", "C (the accumulator) must be a fragment buffer", "C_shared"}));
  }
}

TEST(TlPasses, OutOfRangeConstantTile) {
  Fixture f;
  const Program p = f.build([&](const std::vector<Expr>&) {
    Buffer s = f.kb.alloc("acc", {64, 64}, DataType::kFloat32, Scope::kFragment);
    f.kb.set_loc(test_loc(30));
    f.kb.fill(region(s, {make_int(32), make_int(0)}, {make_int(64), make_int(64)}), lift(0.0f));
  });
  EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:30", "out-of-range constant tile", "acc", "[32, 96)", "64"}));
}

TEST(TlPasses, VariableOutsideItsLoop) {
  Fixture f;
  Expr escaped;
  f.kb.kernel({make_int(1)}, 128, [&](const std::vector<Expr>&) {
    f.kb.set_loc(test_loc(40));
    f.kb.serial(lift(4), [&](Expr i) { escaped = i; });
    f.kb.set_loc(test_loc(41));
    f.kb.store(f.C, {escaped, make_int(0)}, lift(1.0f));
  });
  const Program p = f.kb.finish();
  EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:41", "variable 'i'", "outside the loop", "T.alloc_var"}));
}

TEST(TlPasses, ReduceChecksDimAndShape) {
  Fixture f;
  const Program p = f.build([&](const std::vector<Expr>&) {
    Buffer s = f.kb.alloc("s", {8, 16}, DataType::kFloat32, Scope::kFragment);
    Buffer d = f.kb.alloc("d", {16}, DataType::kFloat32, Scope::kFragment);
    f.kb.set_loc(test_loc(50));
    f.kb.reduce(ReduceKind::kMax, whole(s), whole(d), 1);
  });
  EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:50", "T.reduce_max", "shape mismatch", "[8]", "[16]"}));
}

TEST(TlPasses, UnboundDynamicDimension) {
  KernelBuilder kb("k", test_loc(1));
  Expr n = kb.dynamic("N");
  Buffer a = kb.tensor("A", {make_int(8)}, DataType::kFloat32);
  kb.kernel({ceildiv(n, 8)}, 128, [&](const std::vector<Expr>&) { kb.store(a, {make_int(0)}, lift(1.0f)); });
  const Program p = kb.finish();
  EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kInvalidArgument,
                           {"T.dynamic('N')", "not a dimension of any tensor parameter"}));
}

TEST(TlPasses, MissingTargetImplementationIsNotImplemented) {
  KernelBuilder kb("k", test_loc(1));
  Buffer a = kb.tensor("A", {make_int(8)}, DataType::kInt8);
  kb.kernel({make_int(1)}, 128, [&](const std::vector<Expr>&) {
    kb.set_loc(test_loc(60));
    kb.atomic(AtomicKind::kAdd, corner(a, {make_int(0)}), lift(1));
  });
  const Program p = kb.finish();
  EXPECT_TRUE(throws_error([&] { lower_program(p, cpu()); }, ErrorCode::kNotImplemented,
                           {"kernel.py:60", "Atomic", "cpu.atomic_cas refused", "int8"}));
}

TEST(TlPasses, GuardsOnlyWhereTilesMayOverhang) {
  KernelBuilder kb("k", test_loc(1));
  Expr n = kb.dynamic("N");
  Buffer a = kb.tensor("A", {n}, DataType::kFloat32), b = kb.tensor("B", {make_int(512)}, DataType::kFloat32);
  kb.kernel({ceildiv(n, 256)}, 128, [&](const std::vector<Expr>& bx) {
    kb.parallel({lift(256)}, [&](const std::vector<Expr>& i) {
      kb.store(a, {bx[0] * 256 + i[0]}, kb.load(a, {bx[0] * 256 + i[0]}) + 1.0f);
      kb.store(b, {i[0] * 2}, lift(0.0f));  // i * 2 <= 510 < 512: provably inside
    });
  });
  const std::string text = to_string(lower_program(kb.finish(), cpu()));
  EXPECT_NE(text.find("if (((bx * 256) + i) < N):"), std::string::npos) << text;
  EXPECT_NE(text.find("T.if_then_else((((bx * 256) + i) < N), A["), std::string::npos) << text;
  EXPECT_EQ(text.find("< 512"), std::string::npos) << text;
}

TEST(TlPasses, VectorizeOnlyElementwiseInnermostLoops) {
  KernelBuilder kb("k", test_loc(1));
  Buffer a = kb.tensor("A", {make_int(64), make_int(64)}, DataType::kFloat32);
  Buffer h = kb.tensor("H", {make_int(16)}, DataType::kInt32);
  kb.kernel({make_int(1)}, 128, [&](const std::vector<Expr>&) {
    kb.parallel({lift(64), lift(64)}, [&](const std::vector<Expr>& ij) { kb.store(a, ij, kb.load(a, ij) * 2.0f); });
    kb.parallel({lift(64)},
                [&](const std::vector<Expr>& i) { kb.atomic(AtomicKind::kAdd, corner(h, {i[0] % 16}), lift(1)); });
  });
  const std::string text = to_string(lower_program(kb.finish(), cpu()));
  EXPECT_NE(text.find("for i in T.serial(64):\n"), std::string::npos) << text;
  EXPECT_NE(text.find("for j in T.vectorized(64):"), std::string::npos) << text;
  EXPECT_NE(text.find("tlrt::atomic_add_i32"), std::string::npos) << text;
  EXPECT_EQ(text.find("T.vectorized(64):\n      tlrt::atomic"), std::string::npos) << text;
}

}  // namespace
}  // namespace tessera::test

namespace tessera::test {
namespace {

using namespace tessera::tl;

// C [M, 64] = A [M, K] . B [64, K]^T in blocks of 32 rows, K steps of 32, after T.clear of the fragment;
// `before_gemm` adds statements to the K loop ahead of the T.gemm (given B_shared and the fragment).
Program small_gemm(
    int stages, const std::function<void(KernelBuilder&, const Buffer& b_shared, const Buffer& c_local)>& before_gemm) {
  KernelBuilder kb("gemm", test_loc(1));
  Expr M = kb.dynamic("M"), K = kb.dynamic("K");
  Buffer A = kb.tensor("A", {M, K}, DataType::kBFloat16), B = kb.tensor("B", {make_int(64), K}, DataType::kBFloat16);
  Buffer C = kb.tensor("C", {M, make_int(64)}, DataType::kFloat32);
  kb.kernel({ceildiv(M, 32)}, 128, [&](const std::vector<Expr>& b) {
    Buffer as = kb.alloc("A_shared", {32, 32}, DataType::kBFloat16, Scope::kShared);
    Buffer bs = kb.alloc("B_shared", {64, 32}, DataType::kBFloat16, Scope::kShared);
    Buffer cl = kb.alloc("C_local", {32, 64}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(cl));
    kb.pipelined(ceildiv(K, 32), stages, [&](Expr k) {
      kb.copy(corner(A, {b[0] * 32, k * 32}), whole(as));
      kb.copy(corner(B, {make_int(0), k * 32}), whole(bs));
      before_gemm(kb, bs, cl);
      kb.gemm(whole(as), whole(bs), whole(cl), false, true);
    });
    kb.copy(whole(cl), corner(C, {b[0] * 32, make_int(0)}));
  });
  return kb.finish();
}

// T.Pipelined prefetches the sources of the copies that stay; a shared buffer only copied into and read
// by T.gemm is elided (the gemm reads the tensor, with the tile's valid extent, and prefetches its own next
// K chunk), so its source gets no whole-tile prefetch; others keep their copies.
TEST(TlPasses, PipelinePrefetchAndGemmCopyElision) {
  const Program p = small_gemm(3, [](KernelBuilder& kb, const Buffer& bs, const Buffer&) {
    kb.store(bs, {make_int(0), make_int(0)}, lift(0.0f));  // B_shared is also written: its copy stays
  });
  const std::string text = to_string(lower_program(p, cpu()));
  EXPECT_NE(text.find("if ((k + 2) < ((K + 31) // 32)):"), std::string::npos) << text;
  EXPECT_NE(text.find("tlrt::prefetch_2d(&B["), std::string::npos) << text;
  EXPECT_EQ(text.find("tlrt::prefetch_2d(&A["), std::string::npos) << "the elided A copy gets no prefetch:\n" << text;
  EXPECT_NE(text.find("tlrt::gemm(rt, &A[(bx * 32), (k * 32)]"), std::string::npos) << text;
  EXPECT_NE(text.find("&B_shared[0, 0]"), std::string::npos) << text;
  EXPECT_EQ(text.find("A_shared["), std::string::npos) << "the A copy should be gone:\n" << text;
}

// T.clear then a K loop whose first use of the accumulator is T.gemm: the first iteration's T.gemm
// clears instead, and the clear runs only when the loop has no iteration. A loop that touches the
// accumulator before its T.gemm keeps the clear as written.
TEST(TlPasses, FirstGemmOfTheKLoopClears) {
  for (bool rescale_first : {false, true}) {
    const Program p = small_gemm(2, [&](KernelBuilder& kb, const Buffer&, const Buffer& cl) {
      if (rescale_first) kb.store(cl, {make_int(0), make_int(0)}, kb.load(cl, {make_int(0), make_int(0)}) * 0.5f);
    });
    const std::string text = to_string(lower_program(p, cpu()));
    const bool first_clears = text.find("if (k == 0):") != std::string::npos;
    const bool clear_only_without_steps = text.find("if (((K + 31) // 32) <= 0):") != std::string::npos;
    EXPECT_EQ(first_clears, !rescale_first) << text;
    EXPECT_EQ(clear_only_without_steps, !rescale_first) << text;
  }
}

}  // namespace
}  // namespace tessera::test
