// Visitor and mutator over the IR, generated from the node list in tessera/tl/ir.h.
//
// IRVisitor walks every child by default; a pass overrides the visit_<Node> it cares about.
// IRMutator rebuilds a node only when one of its children changed, so an unchanged tree comes back
// as the same pointers (passes use that to tell whether they did anything).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "tessera/tl/ir.h"

namespace tessera::tl {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

 protected:
#define TESSERA_TL_VISIT(N) virtual void visit_##N(const N##Node* op);
  TESSERA_TL_EXPR_NODES(TESSERA_TL_VISIT)
  TESSERA_TL_STMT_NODES(TESSERA_TL_VISIT)
#undef TESSERA_TL_VISIT
  void visit_region(const Region& r);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
#define TESSERA_TL_MUTATE_EXPR(N) virtual Expr mutate_##N(const N##Node* op, const Expr& self);
#define TESSERA_TL_MUTATE_STMT(N) virtual Stmt mutate_##N(const N##Node* op, const Stmt& self);
  TESSERA_TL_EXPR_NODES(TESSERA_TL_MUTATE_EXPR)
  TESSERA_TL_STMT_NODES(TESSERA_TL_MUTATE_STMT)
#undef TESSERA_TL_MUTATE_EXPR
#undef TESSERA_TL_MUTATE_STMT
  // Hook for passes that substitute buffers; called on every buffer reference.
  virtual Buffer mutate_buffer(const Buffer& b) {
    return b;
  }
  // Mutates a list; *changed is set when any element changed.
  std::vector<Expr> mutate_exprs(const std::vector<Expr>& v, bool* changed);
  Region mutate_region(const Region& r, bool* changed);
};

// Calls fn on every expression node (pre-order), including those inside statements and regions.
void for_each_expr(const Stmt& s, const std::function<void(const Expr&)>& fn);
void for_each_expr(const Expr& e, const std::function<void(const Expr&)>& fn);
// Calls fn on every statement node (pre-order).
void for_each_stmt(const Stmt& s, const std::function<void(const Stmt&)>& fn);
// True when e mentions the variable v.
bool uses_var(const Expr& e, const Expr& v);
bool uses_var(const Stmt& s, const Expr& v);
// Replaces variables by expressions (keyed by the Var node).
Expr substitute(const Expr& e, const std::vector<std::pair<Expr, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Expr, Expr>>& map);

}  // namespace tessera::tl
