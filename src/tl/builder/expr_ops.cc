// Expression helpers for C++ kernels and the Python frontend (tessera/tl/expr_ops.h).
#include "tessera/tl/expr_ops.h"

#include <limits>

#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

thread_local Loc t_loc;

bool both_const(const Expr& a, const Expr& b) {
  return is_const_number(a) && is_const_number(b);
}

}  // namespace

Loc current_loc() {
  return t_loc;
}
void set_current_loc(Loc loc) {
  t_loc = loc;
}

Expr binary(BinOp op, Expr a, Expr b) {
  Expr e = BinaryNode::make(op, a, b, t_loc);
  return both_const(a, b) ? simplify(e) : e;
}

Expr compare(CmpOp op, Expr a, Expr b) {
  Expr e = CompareNode::make(op, a, b, t_loc);
  return both_const(a, b) ? simplify(e) : e;
}

Expr add(Expr a, Expr b) {
  return binary(BinOp::kAdd, a, b);
}
Expr sub(Expr a, Expr b) {
  return binary(BinOp::kSub, a, b);
}
Expr mul(Expr a, Expr b) {
  return binary(BinOp::kMul, a, b);
}
Expr div(Expr a, Expr b) {
  return binary(BinOp::kDiv, a, b);
}
Expr floormod(Expr a, Expr b) {
  return binary(BinOp::kFloorMod, a, b);
}
Expr floordiv(Expr a, Expr b) {
  return binary(BinOp::kFloorDiv, a, b);
}
Expr min(Expr a, Expr b) {
  return binary(BinOp::kMin, a, b);
}
Expr max(Expr a, Expr b) {
  return binary(BinOp::kMax, a, b);
}
Expr lt(Expr a, Expr b) {
  return compare(CmpOp::kLT, a, b);
}
Expr le(Expr a, Expr b) {
  return compare(CmpOp::kLE, a, b);
}
Expr gt(Expr a, Expr b) {
  return compare(CmpOp::kGT, a, b);
}
Expr ge(Expr a, Expr b) {
  return compare(CmpOp::kGE, a, b);
}
Expr eq(Expr a, Expr b) {
  return compare(CmpOp::kEQ, a, b);
}
Expr ne(Expr a, Expr b) {
  return compare(CmpOp::kNE, a, b);
}

Expr logical_and(Expr a, Expr b) {
  Expr e = LogicalNode::make(true, a, b, t_loc);
  return both_const(a, b) ? simplify(e) : e;
}
Expr logical_or(Expr a, Expr b) {
  Expr e = LogicalNode::make(false, a, b, t_loc);
  return both_const(a, b) ? simplify(e) : e;
}

Expr operator-(Expr a) {
  if (is_int(a.type())) return binary(BinOp::kSub, IntImmNode::make(compute_type(a.type()), 0, t_loc), a);
  return binary(BinOp::kSub, FloatImmNode::make(compute_type(a.type()), 0.0, t_loc), a);
}

Expr operator!(Expr a) {
  Expr e = NotNode::make(a, t_loc);
  return is_const_number(a) ? simplify(e) : e;
}

Expr ceildiv(Expr a, Expr b) {
  // (a + b - 1) // b for the non-negative extents it is used on.
  return floordiv(add(a, sub(b, IntImmNode::make(compute_type(b.type()), 1, t_loc))), b);
}

Expr select(Expr cond, Expr t, Expr f) {
  Expr e = SelectNode::make(cond, t, f, t_loc);
  return is_const_number(cond) ? simplify(e) : e;
}

Expr cast(DataType t, Expr v) {
  Expr e = CastNode::make(t, v, t_loc);
  return is_const_number(v) ? simplify(e) : e;
}

Expr call(Intrinsic op, std::vector<Expr> args) {
  return CallNode::make(op, std::move(args), t_loc);
}

Expr infinity(DataType t) {
  if (!is_float(t)) fail_at(t_loc, std::string("T.infinity: dtype must be a float type, got ") + type_name(t));
  return FloatImmNode::make(t == DataType::kFloat64 ? DataType::kFloat64 : DataType::kFloat32,
                            std::numeric_limits<double>::infinity(), t_loc);
}

}  // namespace tessera::tl
