// Simplification pass (see simplify.h).
#include "tl/passes/simplify.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "tl/ir/visitor.h"

namespace tessera::tl {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}

// A linear integer expression: sum(coeff * term) + constant.
struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
  void add_term(const Expr& t, int64_t coeff) {
    for (auto& [e, c] : terms)
      if (structural_equal(e, t)) {
        c += coeff;
        return;
      }
    terms.emplace_back(t, coeff);
  }
};

void collect(const Expr& e, int64_t scale, Linear* out) {
  if (const IntImmNode* i = e.as<IntImmNode>()) {
    out->constant += scale * i->value;
    return;
  }
  if (const BinaryNode* b = e.as<BinaryNode>(); b && b->a.type() == e.type() && b->b.type() == e.type()) {
    int64_t c;
    switch (b->op) {
      case BinOp::kAdd:
        collect(b->a, scale, out), collect(b->b, scale, out);
        return;
      case BinOp::kSub:
        collect(b->a, scale, out), collect(b->b, -scale, out);
        return;
      case BinOp::kMul:
        if (is_const_int(b->b, &c)) return collect(b->a, scale * c, out);
        if (is_const_int(b->a, &c)) return collect(b->b, scale * c, out);
        break;
      default:
        break;
    }
  }
  out->add_term(e, scale);
}

Expr rebuild(const Linear& lin, DataType t, Loc loc) {
  Expr acc;
  for (const auto& [term, coeff] : lin.terms) {
    if (coeff == 0) continue;
    Expr piece = coeff == 1 || coeff == -1
                     ? term
                     : BinaryNode::make(BinOp::kMul, term, IntImmNode::make(t, std::llabs(coeff), loc), loc);
    if (!acc.defined()) {
      acc = coeff < 0 ? BinaryNode::make(BinOp::kSub, IntImmNode::make(t, 0, loc), piece, loc) : piece;
    } else {
      acc = BinaryNode::make(coeff < 0 ? BinOp::kSub : BinOp::kAdd, acc, piece, loc);
    }
  }
  if (!acc.defined()) return IntImmNode::make(t, lin.constant, loc);
  if (lin.constant > 0) return BinaryNode::make(BinOp::kAdd, acc, IntImmNode::make(t, lin.constant, loc), loc);
  if (lin.constant < 0) return BinaryNode::make(BinOp::kSub, acc, IntImmNode::make(t, -lin.constant, loc), loc);
  return acc;
}

Expr fold_int(BinOp op, int64_t a, int64_t b, DataType t, Loc loc, bool* ok) {
  *ok = true;
  switch (op) {
    case BinOp::kAdd:
      return IntImmNode::make(t, a + b, loc);
    case BinOp::kSub:
      return IntImmNode::make(t, a - b, loc);
    case BinOp::kMul:
      return IntImmNode::make(t, a * b, loc);
    case BinOp::kDiv:
    case BinOp::kFloorDiv:
      if (b != 0) return IntImmNode::make(t, floor_div(a, b), loc);
      break;
    case BinOp::kFloorMod:
      if (b != 0) return IntImmNode::make(t, floor_mod(a, b), loc);
      break;
    case BinOp::kMin:
      return IntImmNode::make(t, std::min(a, b), loc);
    case BinOp::kMax:
      return IntImmNode::make(t, std::max(a, b), loc);
    case BinOp::kBitAnd:
      return IntImmNode::make(t, a & b, loc);
    case BinOp::kBitOr:
      return IntImmNode::make(t, a | b, loc);
    case BinOp::kBitXor:
      return IntImmNode::make(t, a ^ b, loc);
    case BinOp::kShl:
      if (b >= 0 && b < 63) return IntImmNode::make(t, a << b, loc);
      break;
    case BinOp::kShr:
      if (b >= 0 && b < 63) return IntImmNode::make(t, a >> b, loc);
      break;
  }
  *ok = false;
  return {};
}

Expr fold_float(BinOp op, double a, double b, DataType t, Loc loc, bool* ok) {
  *ok = true;
  switch (op) {
    case BinOp::kAdd:
      return FloatImmNode::make(t, a + b, loc);
    case BinOp::kSub:
      return FloatImmNode::make(t, a - b, loc);
    case BinOp::kMul:
      return FloatImmNode::make(t, a * b, loc);
    case BinOp::kDiv:
      return FloatImmNode::make(t, a / b, loc);
    case BinOp::kMin:
      return FloatImmNode::make(t, std::fmin(a, b), loc);
    case BinOp::kMax:
      return FloatImmNode::make(t, std::fmax(a, b), loc);
    default:
      break;
  }
  *ok = false;
  return {};
}

bool compare_const(CmpOp op, double a, double b) {
  switch (op) {
    case CmpOp::kLT:
      return a < b;
    case CmpOp::kLE:
      return a <= b;
    case CmpOp::kGT:
      return a > b;
    case CmpOp::kGE:
      return a >= b;
    case CmpOp::kEQ:
      return a == b;
    case CmpOp::kNE:
      return a != b;
  }
  return false;
}

class Simplifier : public IRMutator {
 protected:
  Expr mutate_Binary(const BinaryNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Binary(op, self);
    const BinaryNode* b = e.as<BinaryNode>();
    if (!b) return e;
    const DataType t = b->type;
    int64_t ia, ib;
    double fa, fb;
    bool ok = false;
    if (is_int(t) && is_const_int(b->a, &ia) && is_const_int(b->b, &ib)) {
      Expr r = fold_int(b->op, ia, ib, t, b->loc, &ok);
      if (ok) return r;
    }
    if (is_float(t) && is_const_number(b->a, &fa) && is_const_number(b->b, &fb)) {
      Expr r = fold_float(b->op, fa, fb, t, b->loc, &ok);
      if (ok) return r;
    }
    if (is_int(t) && (b->op == BinOp::kAdd || b->op == BinOp::kSub || b->op == BinOp::kMul)) {
      Linear lin;
      collect(e, 1, &lin);
      return rebuild(lin, t, b->loc);
    }
    const bool rhs_const = is_const_int(b->b, &ib);
    if (is_int(t) && rhs_const) {
      if ((b->op == BinOp::kFloorDiv || b->op == BinOp::kDiv) && ib == 1) return b->a;
      if (b->op == BinOp::kFloorMod && ib == 1) return IntImmNode::make(t, 0, b->loc);
      // (x * c) // c -> x and (x * c) % c -> 0 for a constant c > 0
      if (const BinaryNode* m = b->a.as<BinaryNode>(); m && m->op == BinOp::kMul && ib > 0) {
        int64_t c;
        if (is_const_int(m->b, &c) && c % ib == 0 && c > 0) {
          if (b->op == BinOp::kFloorMod) return IntImmNode::make(t, 0, b->loc);
          if (b->op == BinOp::kFloorDiv || b->op == BinOp::kDiv)
            return c == ib ? m->a
                           : simplify(BinaryNode::make(BinOp::kMul, m->a, IntImmNode::make(t, c / ib, b->loc), b->loc));
        }
      }
    }
    if ((b->op == BinOp::kMin || b->op == BinOp::kMax) && structural_equal(b->a, b->b)) return b->a;
    return e;
  }

  Expr mutate_Compare(const CompareNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Compare(op, self);
    const CompareNode* c = e.as<CompareNode>();
    if (!c) return e;
    double a, b;
    if (is_const_number(c->a, &a) && is_const_number(c->b, &b))
      return IntImmNode::make(DataType::kBool, compare_const(c->op, a, b), c->loc);
    if (is_int(c->a.type())) {  // a - b folds to a constant when the linear terms cancel
      Expr diff = simplify(BinaryNode::make(BinOp::kSub, c->a, c->b, c->loc));
      int64_t d;
      if (is_const_int(diff, &d)) return IntImmNode::make(DataType::kBool, compare_const(c->op, double(d), 0), c->loc);
    }
    return e;
  }

  Expr mutate_Logical(const LogicalNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Logical(op, self);
    const LogicalNode* l = e.as<LogicalNode>();
    if (!l) return e;
    int64_t a, b;
    const bool ca = is_const_int(l->a, &a), cb = is_const_int(l->b, &b);
    if (l->is_and) {
      if ((ca && !a) || (cb && !b)) return IntImmNode::make(DataType::kBool, 0, l->loc);
      if (ca) return l->b;
      if (cb) return l->a;
    } else {
      if ((ca && a) || (cb && b)) return IntImmNode::make(DataType::kBool, 1, l->loc);
      if (ca) return l->b;
      if (cb) return l->a;
    }
    return e;
  }

  Expr mutate_Not(const NotNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Not(op, self);
    const NotNode* n = e.as<NotNode>();
    int64_t v;
    if (n && is_const_int(n->a, &v)) return IntImmNode::make(DataType::kBool, !v, n->loc);
    return e;
  }

  Expr mutate_Select(const SelectNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Select(op, self);
    const SelectNode* s = e.as<SelectNode>();
    int64_t v;
    if (s && is_const_int(s->cond, &v)) return v ? s->t : s->f;
    return e;
  }

  Expr mutate_Cast(const CastNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Cast(op, self);
    const CastNode* c = e.as<CastNode>();
    if (!c) return e;
    if (c->value.type() == c->type) return c->value;
    double v;
    if (is_const_number(c->value, &v)) {
      if (is_int(c->type)) return IntImmNode::make(c->type, int64_t(v), c->loc);
      if (c->type == DataType::kFloat32 || c->type == DataType::kFloat64) return FloatImmNode::make(c->type, v, c->loc);
    }
    return e;
  }

  Stmt mutate_IfThenElse(const IfThenElseNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_IfThenElse(op, self);
    const IfThenElseNode* i = s.as<IfThenElseNode>();
    int64_t v;
    if (i && is_const_int(i->cond, &v)) {
      if (v) return i->then_case;
      return i->else_case.defined() ? i->else_case : SeqNode::make({}, i->loc);
    }
    return s;
  }

  Stmt mutate_For(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_For(op, self);
    const ForNode* f = s.as<ForNode>();
    int64_t ext;
    if (f && is_const_int(f->extent, &ext) && ext <= 0) return SeqNode::make({}, f->loc);
    return s;
  }
};

}  // namespace

Expr simplify(const Expr& e) {
  return Simplifier().mutate(e);
}
Stmt simplify(const Stmt& s) {
  return Simplifier().mutate(s);
}

bool structural_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a->kind != b->kind || a.type() != b.type()) return false;
  auto all_equal = [](const std::vector<Expr>& x, const std::vector<Expr>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!structural_equal(x[i], y[i])) return false;
    return true;
  };
  switch (a->kind) {
    case NodeKind::kIntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case NodeKind::kFloatImm:
      return a.as<FloatImmNode>()->value == b.as<FloatImmNode>()->value;
    case NodeKind::kVar:
      return false;  // identity only (checked above)
    case NodeKind::kBinary: {
      const BinaryNode *x = a.as<BinaryNode>(), *y = b.as<BinaryNode>();
      return x->op == y->op && structural_equal(x->a, y->a) && structural_equal(x->b, y->b);
    }
    case NodeKind::kCompare: {
      const CompareNode *x = a.as<CompareNode>(), *y = b.as<CompareNode>();
      return x->op == y->op && structural_equal(x->a, y->a) && structural_equal(x->b, y->b);
    }
    case NodeKind::kLogical: {
      const LogicalNode *x = a.as<LogicalNode>(), *y = b.as<LogicalNode>();
      return x->is_and == y->is_and && structural_equal(x->a, y->a) && structural_equal(x->b, y->b);
    }
    case NodeKind::kNot:
      return structural_equal(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case NodeKind::kSelect: {
      const SelectNode *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
      return structural_equal(x->cond, y->cond) && structural_equal(x->t, y->t) && structural_equal(x->f, y->f);
    }
    case NodeKind::kCast:
      return structural_equal(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case NodeKind::kCall: {
      const CallNode *x = a.as<CallNode>(), *y = b.as<CallNode>();
      return x->op == y->op && x->extern_name == y->extern_name && all_equal(x->args, y->args);
    }
    case NodeKind::kLoad: {
      const LoadNode *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
      return x->buffer == y->buffer && all_equal(x->indices, y->indices);
    }
    case NodeKind::kAddressOf: {
      const AddressOfNode *x = a.as<AddressOfNode>(), *y = b.as<AddressOfNode>();
      return x->buffer == y->buffer && all_equal(x->indices, y->indices);
    }
    default:
      return false;
  }
}

}  // namespace tessera::tl
