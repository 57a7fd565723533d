// Vectorisation (see vectorize.h).
#include "tl/passes/vectorize.h"

#include <set>

#include "tl/ir/visitor.h"
#include "tl/passes/linear.h"

namespace tessera::tl {
namespace {

// True when some load in body reads buffer b.
bool reads(const Stmt& body, const Buffer& b) {
  bool found = false;
  for_each_expr(body, [&](const Expr& e) {
    if (const LoadNode* l = e.as<LoadNode>(); l && l->buffer.get() == b.get()) found = true;
  });
  return found;
}

// True when different values of var give different elements: some index is base + c * var, c != 0.
bool injective(const std::vector<Expr>& indices, const Expr& var) {
  for (const Expr& i : indices) {
    Expr base;
    int64_t coeff = 0;
    if (linear_in(i, var, &base, &coeff) && coeff != 0) return true;
  }
  return false;
}

// True when the body of a loop over `var` can run its iterations as vector lanes.
bool element_wise(const Stmt& body, const Expr& var) {
  bool ok = true;
  std::set<const Node*> lane_vars = {var.get()};
  auto depends = [&](const Expr& e) {
    bool d = false;
    for_each_expr(e, [&](const Expr& x) { d = d || lane_vars.count(x.get()); });
    return d;
  };
  for_each_stmt(body, [&](const Stmt& s) {
    switch (s->kind) {
      case NodeKind::kSeq:
      case NodeKind::kIfThenElse:
        break;
      case NodeKind::kLetStmt: {
        const LetStmtNode* l = s.as<LetStmtNode>();
        if (depends(l->value)) lane_vars.insert(l->var.get());
        break;
      }
      case NodeKind::kStore: {
        const StoreNode* st = s.as<StoreNode>();
        bool moves = false;
        for (const Expr& i : st->indices) moves = moves || depends(i);
        if (!moves) ok = false;  // every lane would write the same element
        // An update (the body reads the buffer it stores to) needs lanes on distinct elements:
        // acc[min(2, j // 4)] += x[j] would have several lanes add to one element from one old value.
        if (ok && reads(body, st->buffer) && !injective(st->indices, var)) ok = false;
        break;
      }
      default:
        ok = false;
    }
  });
  if (!ok) return false;
  for_each_expr(body, [&](const Expr& e) {
    if (e.as<AddressOfNode>()) ok = false;
    if (const CallNode* c = e.as<CallNode>(); c && c->op == Intrinsic::kExtern) ok = false;
  });
  return ok;
}

class Vectorizer : public IRMutator {
 public:
  explicit Vectorizer(const Target& t) : target_(t) {}

 protected:
  Stmt mutate_For(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_For(op, self);
    const ForNode* f = s.as<ForNode>();
    if (f->kind != ForKind::kParallel) return s;
    bool innermost = true;
    for_each_stmt(f->body, [&](const Stmt& x) { innermost = innermost && !x.as<ForNode>(); });
    const bool vec = target_.vector_lanes > 0 && innermost && element_wise(f->body, f->var);
    return ForNode::make(f->var, f->min, f->extent, vec ? ForKind::kVectorized : ForKind::kSerial, f->body, f->loc);
  }

 private:
  const Target& target_;
};

}  // namespace

Stmt vectorize(const Stmt& s, const Target& target) {
  return Vectorizer(target).mutate(s);
}

}  // namespace tessera::tl
