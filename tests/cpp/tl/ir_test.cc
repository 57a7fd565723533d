// The IR: validating constructors, printing, simplification, interval and linear analysis.
#include <gtest/gtest.h>

#include "tessera/tl/expr_ops.h"
#include "tessera/tl/printer.h"
#include "tl/ir/visitor.h"
#include "tl/passes/bounds.h"
#include "tl/passes/linear.h"
#include "tl/passes/simplify.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

Expr var(const char* name) {
  return VarNode::make(name, DataType::kInt32);
}

// Simplifies `input` and compares the printed result; prints all three on failure.
void check(const Expr& input, const std::string& expected) {
  const std::string got = to_string(simplify(input));
  EXPECT_EQ(got, expected) << "input:    " << to_string(input) << "\nexpected: " << expected << "\ngot:      " << got;
}

TEST(TlIr, MakeRejectsInvalidNodes) {
  const Loc loc = test_loc(7);
  EXPECT_TRUE(throws_error([&] { IntImmNode::make(DataType::kFloat32, 1, loc); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:7", "IntImm", "integer"}));
  const Expr f = FloatImmNode::make(DataType::kFloat32, 1.5);
  EXPECT_TRUE(throws_error([&] { BinaryNode::make(BinOp::kBitAnd, f, make_int(1), loc); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:7", "&", "integers", "float32"}));
  const Buffer b = make_buffer("A_shared", DataType::kBFloat16, Scope::kShared, {make_int(4), make_int(8)}, loc);
  EXPECT_TRUE(throws_error([&] { LoadNode::make(b, {make_int(0)}, loc); }, ErrorCode::kInvalidArgument,
                           {"kernel.py:7", "A_shared", "2 dimensions", "indexed with 1"}));
  EXPECT_TRUE(throws_error([&] { make_buffer("x", DataType::kFloat32, Scope::kFragment, {var("M")}, loc); },
                           ErrorCode::kInvalidArgument, {"kernel.py:7", "constant shapes"}));
  EXPECT_TRUE(throws_error([&] { CallNode::make(Intrinsic::kExp, {}, loc); }, ErrorCode::kInvalidArgument,
                           {"exp", "1 argument"}));
  EXPECT_TRUE(throws_error([&] { BinaryNode::make(BinOp::kFloorDiv, var("i"), make_int(0), loc); },
                           ErrorCode::kInvalidArgument, {"division by the constant 0"}));
}

TEST(TlIr, TypePromotion) {
  const Buffer b = make_buffer("x", DataType::kBFloat16, Scope::kFragment, {make_int(16)}, {});
  const Expr ld = LoadNode::make(b, {make_int(0)});
  EXPECT_EQ(BinaryNode::make(BinOp::kAdd, ld, ld).type(), DataType::kFloat32);  // bf16 computes in float32
  EXPECT_EQ(BinaryNode::make(BinOp::kMul, var("i"), FloatImmNode::make(DataType::kFloat32, 2)).type(),
            DataType::kFloat32);
  EXPECT_EQ(BinaryNode::make(BinOp::kAdd, var("i"), IntImmNode::make(DataType::kInt64, 1)).type(), DataType::kInt64);
  EXPECT_EQ(CompareNode::make(CmpOp::kLT, var("i"), make_int(3)).type(), DataType::kBool);
  EXPECT_EQ(CallNode::make(Intrinsic::kExp2, {var("i")}).type(), DataType::kFloat32);
}

TEST(TlIr, SimplifyFoldsAndCancels) {
  const Expr k = var("k"), i = var("i");
  check((k + 1) * 64 - k * 64, "64");
  check(lift(3) * 4 + 2, "14");
  check(BinaryNode::make(BinOp::kFloorDiv, make_int(-7), make_int(2)), "-4");
  check(BinaryNode::make(BinOp::kFloorMod, make_int(-7), make_int(2)), "1");
  check(BinaryNode::make(BinOp::kFloorDiv, i * 8, make_int(8)), "i");
  check(BinaryNode::make(BinOp::kFloorMod, i * 8, make_int(4)), "0");
  check(SelectNode::make(IntImmNode::make(DataType::kBool, 1), i, k), "i");
  check(CompareNode::make(CmpOp::kLT, i + 1, i + 2), "True");
  check(BinaryNode::make(BinOp::kMin, i, i), "i");
}

TEST(TlIr, PrinterShowsTheProgram) {
  KernelBuilder kb("scale");
  Buffer a = kb.tensor("A", {make_int(256)}, DataType::kFloat32);
  kb.kernel({make_int(2)}, 128, [&](const std::vector<Expr>& b) {
    kb.parallel({make_int(128)}, [&](const std::vector<Expr>& i) {
      kb.store(a, {b[0] * 128 + i[0]}, kb.load(a, {b[0] * 128 + i[0]}) * 2.0f);
    });
  });
  const std::string text = to_string(kb.finish());
  EXPECT_NE(text.find("def scale(A: T.Tensor([256], \"float32\")):"), std::string::npos) << text;
  EXPECT_NE(text.find("with T.Kernel(2, threads=128) as (bx):"), std::string::npos) << text;
  EXPECT_NE(text.find("A[((bx * 128) + i)] = (A[((bx * 128) + i)] * 2)"), std::string::npos) << text;
}

// T.sync_grid(): the launch splits in two over the same grid, block variables and buffers; a let of
// the body's level is bound again in the second launch; scratch tensors may be declared inside it.
TEST(TlIr, SplitLaunchKeepsGridVarsBuffersAndLets) {
  KernelBuilder kb("two_phase");
  Buffer a = kb.tensor("A", {make_int(6)}, DataType::kFloat32);
  std::vector<Expr> block_vars = kb.begin_kernel({make_int(3)}, 32);
  Buffer tile = kb.alloc("tile", {2}, DataType::kFloat32, Scope::kShared);
  const Expr base = kb.let("base", block_vars[0] * 2);
  kb.store(tile, {make_int(0)}, kb.load(a, {base}));
  Buffer carry = kb.scratch_tensor("carry", {make_int(3), make_int(2)}, DataType::kFloat32);
  ASSERT_EQ(kb.kernel_allocs().size(), 1u);
  kb.split_launch();
  kb.store(a, {base + 1}, kb.load(tile, {make_int(0)}) + kb.load(carry, {block_vars[0], make_int(0)}));
  kb.end_kernel();
  const Program prog = kb.finish();
  ASSERT_EQ(prog.params.size(), 2u);
  EXPECT_EQ(prog.params[1].name, "carry");
  const SeqNode* seq = prog.body.as<SeqNode>();
  ASSERT_NE(seq, nullptr);
  ASSERT_EQ(seq->stmts.size(), 2u);
  const LaunchNode* first = seq->stmts[0].as<LaunchNode>();
  const LaunchNode* second = seq->stmts[1].as<LaunchNode>();
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(first->block_vars[0].same_as(second->block_vars[0]));
  const std::string text = to_string(prog);
  EXPECT_NE(text.find("with T.Kernel(3, threads=32) as (bx):"), text.rfind("with T.Kernel(3, threads=32) as (bx):"))
      << "expected two launches\n"
      << text;
  size_t lets = 0, allocs = 0;
  for (size_t at = text.find("base = "); at != std::string::npos; at = text.find("base = ", at + 1)) ++lets;
  for (size_t at = text.find("tile = T.alloc_shared"); at != std::string::npos;
       at = text.find("tile = T.alloc_shared", at + 1))
    ++allocs;
  EXPECT_EQ(lets, 2u) << text;
  EXPECT_EQ(allocs, 2u) << text;
}

TEST(TlIr, SplitLaunchOnlyAtTheKernelBodysLevel) {
  KernelBuilder kb("nested");
  kb.begin_kernel({make_int(2)}, 32);
  kb.begin_for("i", make_int(0), make_int(4), ForKind::kSerial);
  EXPECT_THROW(kb.split_launch(), Error);
}

TEST(TlIr, MutatorKeepsUnchangedTrees) {
  const Expr i = var("i");
  const Expr e = (i + 1) * 2;
  class Identity : public IRMutator {};
  EXPECT_TRUE(Identity().mutate(e).same_as(e));
  const Expr j = var("j");
  const Expr s = substitute(e, {{i, j}});
  EXPECT_EQ(to_string(s), "((j + 1) * 2)");
  EXPECT_TRUE(uses_var(e, i));
  EXPECT_FALSE(uses_var(s, i));
}

TEST(TlIr, IntervalsAndConditions) {
  const Expr bx = var("bx"), i = var("i");
  RangeMap r;
  r[bx.get()] = Interval::range(0, 7);
  r[i.get()] = Interval::range(0, 127);
  const Interval x = bound_of(bx * 128 + i, r);
  EXPECT_TRUE(x.bounded());
  EXPECT_EQ(x.lo, 0);
  EXPECT_EQ(x.hi, 1023);
  const Interval d = bound_of(BinaryNode::make(BinOp::kFloorDiv, i, make_int(16)), r);
  EXPECT_EQ(d.hi, 7);
  refine_with_condition(i < 100, &r);
  EXPECT_EQ(r[i.get()].hi, 99);
}

TEST(TlIr, LinearAnalysis) {
  const Expr i = var("i"), j = var("j");
  Expr base;
  int64_t coeff = 0;
  ASSERT_TRUE(linear_in(i * 64 + j * 2 + 5, j, &base, &coeff));
  EXPECT_EQ(coeff, 2);
  EXPECT_EQ(to_string(base), "((i * 64) + 5)");
  EXPECT_FALSE(linear_in(BinaryNode::make(BinOp::kFloorDiv, j, make_int(2)), j, &base, &coeff));
  EXPECT_FALSE(linear_in(j * i, j, &base, &coeff));
}

}  // namespace
}  // namespace tessera::test
