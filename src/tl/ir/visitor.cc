// Default traversal of IRVisitor and IRMutator, and the small walkers built on them.
#include "tl/ir/visitor.h"

namespace tessera::tl {

// ---------------- visitor ----------------

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e->kind) {
#define TESSERA_TL_CASE(N) \
  case NodeKind::k##N:     \
    return visit_##N(static_cast<const N##Node*>(e.get()));
    TESSERA_TL_EXPR_NODES(TESSERA_TL_CASE)
#undef TESSERA_TL_CASE
    default:
      return;
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s->kind) {
#define TESSERA_TL_CASE(N) \
  case NodeKind::k##N:     \
    return visit_##N(static_cast<const N##Node*>(s.get()));
    TESSERA_TL_STMT_NODES(TESSERA_TL_CASE)
#undef TESSERA_TL_CASE
    default:
      return;
  }
}

void IRVisitor::visit_region(const Region& r) {
  for (const Expr& e : r.min) visit(e);
  for (const Expr& e : r.extent) visit(e);
}

void IRVisitor::visit_IntImm(const IntImmNode*) {}
void IRVisitor::visit_FloatImm(const FloatImmNode*) {}
void IRVisitor::visit_Var(const VarNode*) {}
void IRVisitor::visit_Binary(const BinaryNode* op) {
  visit(op->a), visit(op->b);
}
void IRVisitor::visit_Compare(const CompareNode* op) {
  visit(op->a), visit(op->b);
}
void IRVisitor::visit_Logical(const LogicalNode* op) {
  visit(op->a), visit(op->b);
}
void IRVisitor::visit_Not(const NotNode* op) {
  visit(op->a);
}
void IRVisitor::visit_Select(const SelectNode* op) {
  visit(op->cond), visit(op->t), visit(op->f);
}
void IRVisitor::visit_Cast(const CastNode* op) {
  visit(op->value);
}
void IRVisitor::visit_Call(const CallNode* op) {
  for (const Expr& a : op->args) visit(a);
}
void IRVisitor::visit_Load(const LoadNode* op) {
  for (const Expr& i : op->indices) visit(i);
}
void IRVisitor::visit_AddressOf(const AddressOfNode* op) {
  for (const Expr& i : op->indices) visit(i);
}
void IRVisitor::visit_Store(const StoreNode* op) {
  for (const Expr& i : op->indices) visit(i);
  visit(op->value);
}
void IRVisitor::visit_LetStmt(const LetStmtNode* op) {
  visit(op->value), visit(op->body);
}
void IRVisitor::visit_For(const ForNode* op) {
  visit(op->min), visit(op->extent), visit(op->body);
}
void IRVisitor::visit_IfThenElse(const IfThenElseNode* op) {
  visit(op->cond), visit(op->then_case), visit(op->else_case);
}
void IRVisitor::visit_Seq(const SeqNode* op) {
  for (const Stmt& s : op->stmts) visit(s);
}
void IRVisitor::visit_Allocate(const AllocateNode* op) {
  visit(op->body);
}
void IRVisitor::visit_Evaluate(const EvaluateNode* op) {
  visit(op->value);
}
void IRVisitor::visit_Launch(const LaunchNode* op) {
  for (const Expr& g : op->grid) visit(g);
  visit(op->body);
}
void IRVisitor::visit_Copy(const CopyNode* op) {
  visit_region(op->src), visit_region(op->dst);
}
void IRVisitor::visit_Gemm(const GemmNode* op) {
  visit_region(op->a), visit_region(op->b), visit_region(op->c);
}
void IRVisitor::visit_Fill(const FillNode* op) {
  visit_region(op->dst), visit(op->value);
}
void IRVisitor::visit_Reduce(const ReduceNode* op) {
  visit_region(op->src), visit_region(op->dst);
}
void IRVisitor::visit_Cumsum(const CumsumNode* op) {
  visit_region(op->src), visit_region(op->dst);
}
void IRVisitor::visit_Atomic(const AtomicNode* op) {
  visit_region(op->dst);
  if (op->src.buffer) visit_region(op->src);
  visit(op->value);
}

// ---------------- mutator ----------------

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e->kind) {
#define TESSERA_TL_CASE(N) \
  case NodeKind::k##N:     \
    return mutate_##N(static_cast<const N##Node*>(e.get()), e);
    TESSERA_TL_EXPR_NODES(TESSERA_TL_CASE)
#undef TESSERA_TL_CASE
    default:
      return e;
  }
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s->kind) {
#define TESSERA_TL_CASE(N) \
  case NodeKind::k##N:     \
    return mutate_##N(static_cast<const N##Node*>(s.get()), s);
    TESSERA_TL_STMT_NODES(TESSERA_TL_CASE)
#undef TESSERA_TL_CASE
    default:
      return s;
  }
}

std::vector<Expr> IRMutator::mutate_exprs(const std::vector<Expr>& v, bool* changed) {
  std::vector<Expr> out;
  out.reserve(v.size());
  for (const Expr& e : v) {
    out.push_back(mutate(e));
    if (!out.back().same_as(e)) *changed = true;
  }
  return out;
}

Region IRMutator::mutate_region(const Region& r, bool* changed) {
  if (!r.buffer) return r;
  Region out;
  out.buffer = mutate_buffer(r.buffer);
  if (out.buffer != r.buffer) *changed = true;
  out.min = mutate_exprs(r.min, changed);
  out.extent = mutate_exprs(r.extent, changed);
  return out;
}

Expr IRMutator::mutate_IntImm(const IntImmNode*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_FloatImm(const FloatImmNode*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_Var(const VarNode*, const Expr& self) {
  return self;
}

Expr IRMutator::mutate_Binary(const BinaryNode* op, const Expr& self) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return self;
  return BinaryNode::make(op->op, a, b, op->loc);
}
Expr IRMutator::mutate_Compare(const CompareNode* op, const Expr& self) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return self;
  return CompareNode::make(op->op, a, b, op->loc);
}
Expr IRMutator::mutate_Logical(const LogicalNode* op, const Expr& self) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return self;
  return LogicalNode::make(op->is_and, a, b, op->loc);
}
Expr IRMutator::mutate_Not(const NotNode* op, const Expr& self) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? self : NotNode::make(a, op->loc);
}
Expr IRMutator::mutate_Select(const SelectNode* op, const Expr& self) {
  Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
  if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return self;
  return SelectNode::make(c, t, f, op->loc);
}
Expr IRMutator::mutate_Cast(const CastNode* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : CastNode::make(op->type, v, op->loc);
}
Expr IRMutator::mutate_Call(const CallNode* op, const Expr& self) {
  bool changed = false;
  std::vector<Expr> args = mutate_exprs(op->args, &changed);
  if (!changed) return self;
  if (op->op == Intrinsic::kExtern) return CallNode::make_extern(op->type, op->extern_name, args, op->loc);
  return CallNode::make(op->op, args, op->loc);
}
Expr IRMutator::mutate_Load(const LoadNode* op, const Expr& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_exprs(op->indices, &changed);
  Buffer b = mutate_buffer(op->buffer);
  if (!changed && b == op->buffer) return self;
  return LoadNode::make(b, idx, op->loc);
}
Expr IRMutator::mutate_AddressOf(const AddressOfNode* op, const Expr& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_exprs(op->indices, &changed);
  Buffer b = mutate_buffer(op->buffer);
  if (!changed && b == op->buffer) return self;
  return AddressOfNode::make(b, idx, op->loc);
}

Stmt IRMutator::mutate_Store(const StoreNode* op, const Stmt& self) {
  bool changed = false;
  std::vector<Expr> idx = mutate_exprs(op->indices, &changed);
  Expr v = mutate(op->value);
  Buffer b = mutate_buffer(op->buffer);
  if (!changed && v.same_as(op->value) && b == op->buffer) return self;
  return StoreNode::make(b, idx, v, op->loc);
}
Stmt IRMutator::mutate_LetStmt(const LetStmtNode* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt body = mutate(op->body);
  if (v.same_as(op->value) && body.same_as(op->body)) return self;
  return LetStmtNode::make(op->var, v, body, op->loc);
}
Stmt IRMutator::mutate_For(const ForNode* op, const Stmt& self) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
  return ForNode::make(op->var, mn, ext, op->kind, body, op->loc, op->num_stages);
}
Stmt IRMutator::mutate_IfThenElse(const IfThenElseNode* op, const Stmt& self) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return IfThenElseNode::make(c, t, e, op->loc);
}
Stmt IRMutator::mutate_Seq(const SeqNode* op, const Stmt& self) {
  bool changed = false;
  std::vector<Stmt> out;
  out.reserve(op->stmts.size());
  for (const Stmt& s : op->stmts) {
    out.push_back(mutate(s));
    if (!out.back().same_as(s)) changed = true;
  }
  return changed ? SeqNode::make(out, op->loc) : self;
}
Stmt IRMutator::mutate_Allocate(const AllocateNode* op, const Stmt& self) {
  Stmt body = mutate(op->body);
  Buffer b = mutate_buffer(op->buffer);
  if (body.same_as(op->body) && b == op->buffer) return self;
  return AllocateNode::make(b, body, op->loc);
}
Stmt IRMutator::mutate_Evaluate(const EvaluateNode* op, const Stmt& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : EvaluateNode::make(v, op->loc);
}
Stmt IRMutator::mutate_Launch(const LaunchNode* op, const Stmt& self) {
  bool changed = false;
  std::vector<Expr> grid = mutate_exprs(op->grid, &changed);
  Stmt body = mutate(op->body);
  if (!changed && body.same_as(op->body)) return self;
  return LaunchNode::make(grid, op->block_vars, op->threads, body, op->loc);
}
Stmt IRMutator::mutate_Copy(const CopyNode* op, const Stmt& self) {
  bool changed = false;
  Region s = mutate_region(op->src, &changed), d = mutate_region(op->dst, &changed);
  return changed ? CopyNode::make(s, d, op->loc) : self;
}
Stmt IRMutator::mutate_Gemm(const GemmNode* op, const Stmt& self) {
  bool changed = false;
  Region a = mutate_region(op->a, &changed), b = mutate_region(op->b, &changed), c = mutate_region(op->c, &changed);
  return changed ? GemmNode::make(a, b, c, op->trans_a, op->trans_b, op->clear_accum, op->loc) : self;
}
Stmt IRMutator::mutate_Fill(const FillNode* op, const Stmt& self) {
  bool changed = false;
  Region d = mutate_region(op->dst, &changed);
  Expr v = mutate(op->value);
  if (!changed && v.same_as(op->value)) return self;
  return FillNode::make(d, v, op->loc);
}
Stmt IRMutator::mutate_Reduce(const ReduceNode* op, const Stmt& self) {
  bool changed = false;
  Region s = mutate_region(op->src, &changed), d = mutate_region(op->dst, &changed);
  return changed ? ReduceNode::make(op->op, s, d, op->dim, op->clear, op->loc) : self;
}
Stmt IRMutator::mutate_Cumsum(const CumsumNode* op, const Stmt& self) {
  bool changed = false;
  Region s = mutate_region(op->src, &changed), d = mutate_region(op->dst, &changed);
  return changed ? CumsumNode::make(s, d, op->dim, op->reverse, op->loc) : self;
}
Stmt IRMutator::mutate_Atomic(const AtomicNode* op, const Stmt& self) {
  bool changed = false;
  Region d = mutate_region(op->dst, &changed), s = mutate_region(op->src, &changed);
  Expr v = mutate(op->value);
  if (!changed && v.same_as(op->value)) return self;
  return AtomicNode::make(op->op, d, s, v, op->loc);
}

// ---------------- walkers ----------------
namespace {

class ExprWalker : public IRVisitor {
 public:
  explicit ExprWalker(const std::function<void(const Expr&)>& fn) : fn_(fn) {}
  using IRVisitor::visit;
  void visit(const Expr& e) override {
    if (!e.defined()) return;
    fn_(e);
    IRVisitor::visit(e);
  }

 private:
  const std::function<void(const Expr&)>& fn_;
};

class StmtWalker : public IRVisitor {
 public:
  explicit StmtWalker(const std::function<void(const Stmt&)>& fn) : fn_(fn) {}
  using IRVisitor::visit;
  void visit(const Stmt& s) override {
    if (!s.defined()) return;
    fn_(s);
    IRVisitor::visit(s);
  }
  void visit(const Expr&) override {}

 private:
  const std::function<void(const Stmt&)>& fn_;
};

class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::vector<std::pair<Expr, Expr>>& map) : map_(map) {}

 protected:
  Expr mutate_Var(const VarNode* op, const Expr& self) override {
    for (const auto& [from, to] : map_)
      if (from.get() == op) return to;
    return self;
  }

 private:
  const std::vector<std::pair<Expr, Expr>>& map_;
};

}  // namespace

void for_each_expr(const Stmt& s, const std::function<void(const Expr&)>& fn) {
  ExprWalker(fn).visit(s);
}
void for_each_expr(const Expr& e, const std::function<void(const Expr&)>& fn) {
  ExprWalker(fn).visit(e);
}
void for_each_stmt(const Stmt& s, const std::function<void(const Stmt&)>& fn) {
  StmtWalker(fn).visit(s);
}

bool uses_var(const Expr& e, const Expr& v) {
  bool found = false;
  for_each_expr(e, [&](const Expr& x) { found = found || x.same_as(v); });
  return found;
}

bool uses_var(const Stmt& s, const Expr& v) {
  bool found = false;
  for_each_expr(s, [&](const Expr& x) { found = found || x.same_as(v); });
  return found;
}

Expr substitute(const Expr& e, const std::vector<std::pair<Expr, Expr>>& map) {
  return Substituter(map).mutate(e);
}
Stmt substitute(const Stmt& s, const std::vector<std::pair<Expr, Expr>>& map) {
  return Substituter(map).mutate(s);
}

}  // namespace tessera::tl
