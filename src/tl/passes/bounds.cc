// Constant interval analysis (see bounds.h).
#include "tl/passes/bounds.h"

#include <algorithm>

namespace tessera::tl {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Interval add(Interval a, Interval b) {
  Interval r;
  r.has_lo = a.has_lo && b.has_lo;
  r.has_hi = a.has_hi && b.has_hi;
  r.lo = a.lo + b.lo;
  r.hi = a.hi + b.hi;
  return r;
}

Interval negate(Interval a) {
  Interval r;
  r.has_lo = a.has_hi;
  r.has_hi = a.has_lo;
  r.lo = -a.hi;
  r.hi = -a.lo;
  return r;
}

Interval mul(Interval a, Interval b) {
  if (!a.bounded() || !b.bounded()) {
    // x * c with c >= 0 keeps one-sided bounds.
    if (b.bounded() && b.lo == b.hi && b.lo >= 0) return {a.has_lo, a.has_hi, a.lo * b.lo, a.hi * b.lo};
    if (a.bounded() && a.lo == a.hi && a.lo >= 0) return {b.has_lo, b.has_hi, b.lo * a.lo, b.hi * a.lo};
    return Interval::everything();
  }
  const int64_t c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return Interval::range(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}

Interval join(Interval a, Interval b) {
  Interval r;
  r.has_lo = a.has_lo && b.has_lo;
  r.has_hi = a.has_hi && b.has_hi;
  r.lo = std::min(a.lo, b.lo);
  r.hi = std::max(a.hi, b.hi);
  return r;
}

void narrow(const Node* var, CmpOp op, int64_t c, RangeMap* ranges) {
  Interval& r = (*ranges)[var];
  auto set_hi = [&](int64_t v) {
    r.hi = r.has_hi ? std::min(r.hi, v) : v;
    r.has_hi = true;
  };
  auto set_lo = [&](int64_t v) {
    r.lo = r.has_lo ? std::max(r.lo, v) : v;
    r.has_lo = true;
  };
  switch (op) {
    case CmpOp::kLT:
      set_hi(c - 1);
      break;
    case CmpOp::kLE:
      set_hi(c);
      break;
    case CmpOp::kGT:
      set_lo(c + 1);
      break;
    case CmpOp::kGE:
      set_lo(c);
      break;
    case CmpOp::kEQ:
      set_lo(c), set_hi(c);
      break;
    case CmpOp::kNE:
      break;
  }
}

CmpOp flip(CmpOp op) {
  switch (op) {
    case CmpOp::kLT:
      return CmpOp::kGT;
    case CmpOp::kLE:
      return CmpOp::kGE;
    case CmpOp::kGT:
      return CmpOp::kLT;
    case CmpOp::kGE:
      return CmpOp::kLE;
    default:
      return op;
  }
}

}  // namespace

Interval bound_of(const Expr& e, const RangeMap& ranges) {
  if (!e.defined() || !is_int(e.type())) return Interval::everything();
  if (const IntImmNode* i = e.as<IntImmNode>()) return Interval::point(i->value);
  if (e.as<VarNode>()) {
    auto it = ranges.find(e.get());
    return it == ranges.end() ? Interval::everything() : it->second;
  }
  if (const CastNode* c = e.as<CastNode>()) return bound_of(c->value, ranges);
  if (const SelectNode* s = e.as<SelectNode>()) return join(bound_of(s->t, ranges), bound_of(s->f, ranges));
  const BinaryNode* b = e.as<BinaryNode>();
  if (!b) return Interval::everything();
  const Interval x = bound_of(b->a, ranges), y = bound_of(b->b, ranges);
  switch (b->op) {
    case BinOp::kAdd:
      return add(x, y);
    case BinOp::kSub:
      return add(x, negate(y));
    case BinOp::kMul:
      return mul(x, y);
    case BinOp::kDiv:
    case BinOp::kFloorDiv:
      if (y.bounded() && y.lo == y.hi && y.lo > 0)
        return {x.has_lo, x.has_hi, x.has_lo ? floor_div(x.lo, y.lo) : 0, x.has_hi ? floor_div(x.hi, y.lo) : 0};
      return Interval::everything();
    case BinOp::kFloorMod:
      if (y.bounded() && y.lo == y.hi && y.lo > 0) {
        if (x.bounded() && x.lo >= 0 && x.hi < y.lo) return x;
        return Interval::range(0, y.lo - 1);
      }
      return Interval::everything();
    case BinOp::kMin: {
      Interval r;
      r.has_lo = x.has_lo && y.has_lo;
      r.lo = std::min(x.lo, y.lo);
      r.has_hi = x.has_hi || y.has_hi;
      r.hi = x.has_hi && y.has_hi ? std::min(x.hi, y.hi) : (x.has_hi ? x.hi : y.hi);
      return r;
    }
    case BinOp::kMax: {
      Interval r;
      r.has_hi = x.has_hi && y.has_hi;
      r.hi = std::max(x.hi, y.hi);
      r.has_lo = x.has_lo || y.has_lo;
      r.lo = x.has_lo && y.has_lo ? std::max(x.lo, y.lo) : (x.has_lo ? x.lo : y.lo);
      return r;
    }
    case BinOp::kBitAnd:
      if (y.bounded() && y.lo == y.hi && y.lo >= 0) return Interval::range(0, y.lo);
      return Interval::everything();
    default:
      return Interval::everything();
  }
}

void refine_with_condition(const Expr& cond, RangeMap* ranges) {
  if (const LogicalNode* l = cond.as<LogicalNode>(); l && l->is_and) {
    refine_with_condition(l->a, ranges);
    refine_with_condition(l->b, ranges);
    return;
  }
  const CompareNode* c = cond.as<CompareNode>();
  if (!c) return;
  // var op bound, or bound op var, where bound is an expression with a known constant range.
  const Expr* var = nullptr;
  const Expr* other = nullptr;
  CmpOp op = c->op;
  if (c->a.as<VarNode>()) {
    var = &c->a, other = &c->b;
  } else if (c->b.as<VarNode>()) {
    var = &c->b, other = &c->a, op = flip(op);
  } else {
    return;
  }
  const Interval o = bound_of(*other, *ranges);
  // var < o holds for the smallest o at least: var < o.hi is all we know, i.e. var <= o.hi - 1.
  if ((op == CmpOp::kLT || op == CmpOp::kLE) && o.has_hi) narrow(var->get(), op, o.hi, ranges);
  if ((op == CmpOp::kGT || op == CmpOp::kGE) && o.has_lo) narrow(var->get(), op, o.lo, ranges);
  if (op == CmpOp::kEQ && o.bounded() && o.lo == o.hi) narrow(var->get(), op, o.lo, ranges);
}

Interval loop_range(const Expr& min, const Expr& extent, const RangeMap& ranges) {
  const Interval lo = bound_of(min, ranges), ext = bound_of(extent, ranges);
  Interval r;
  r.has_lo = lo.has_lo;
  r.lo = lo.lo;
  r.has_hi = lo.has_hi && ext.has_hi;
  r.hi = lo.hi + ext.hi - 1;
  return r;
}

}  // namespace tessera::tl
