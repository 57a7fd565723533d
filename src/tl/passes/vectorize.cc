// Vectorisation (see vectorize.h).
#include "tl/passes/vectorize.h"

#include <set>

#include "tl/ir/visitor.h"

namespace tessera::tl {
namespace {

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
      case NodeKind::kSeq: case NodeKind::kIfThenElse: break;
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
        break;
      }
      default: ok = false;
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

Stmt vectorize(const Stmt& s, const Target& target) { return Vectorizer(target).mutate(s); }

}  // namespace tessera::tl
