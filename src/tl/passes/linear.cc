// Linear analysis (see linear.h).
#include "tl/passes/linear.h"

#include "tl/ir/visitor.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

bool analyze(const Expr& e, const Expr& var, Expr* base, int64_t* coeff) {
  if (!uses_var(e, var)) {
    *base = e;
    *coeff = 0;
    return true;
  }
  if (e.same_as(var)) {
    *base = IntImmNode::make(e.type(), 0);
    *coeff = 1;
    return true;
  }
  if (const CastNode* c = e.as<CastNode>(); c && is_int(c->type) && is_int(c->value.type())) {
    Expr b;
    if (!analyze(c->value, var, &b, coeff)) return false;
    *base = CastNode::make(c->type, b, c->loc);
    return true;
  }
  const BinaryNode* b = e.as<BinaryNode>();
  if (!b) return false;
  Expr ba, bb;
  int64_t ca, cb;
  switch (b->op) {
    case BinOp::kAdd:
    case BinOp::kSub:
      if (!analyze(b->a, var, &ba, &ca) || !analyze(b->b, var, &bb, &cb)) return false;
      *base = BinaryNode::make(b->op, ba, bb, b->loc);
      *coeff = b->op == BinOp::kAdd ? ca + cb : ca - cb;
      return true;
    case BinOp::kMul: {
      int64_t k;
      const Expr* other = nullptr;
      if (is_const_int(b->b, &k)) {
        other = &b->a;
      } else if (is_const_int(b->a, &k)) {
        other = &b->b;
      } else {
        return false;
      }
      if (!analyze(*other, var, &ba, &ca)) return false;
      *base = BinaryNode::make(BinOp::kMul, ba, IntImmNode::make(b->type, k, b->loc), b->loc);
      *coeff = ca * k;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

bool linear_in(const Expr& e, const Expr& var, Expr* base, int64_t* coeff) {
  if (!analyze(e, var, base, coeff)) return false;
  *base = simplify(*base);
  return true;
}

}  // namespace tessera::tl
