// Bounds legalisation (see legalize_bounds.h).
#include "tl/passes/legalize_bounds.h"

#include "tl/ir/visitor.h"
#include "tl/passes/bounds.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

class Legalize : public IRMutator {
 protected:
  // The condition under which buffer[indices] is inside the tensor (undefined when always inside).
  Expr guard(const Buffer& b, const std::vector<Expr>& indices, Loc loc) {
    Expr cond;
    auto add = [&](const Expr& c) { cond = cond.defined() ? LogicalNode::make(true, cond, c, loc) : c; };
    for (size_t d = 0; d < indices.size(); ++d) {
      const Expr& idx = indices[d];
      const Interval r = bound_of(idx, ranges_);
      if (!(r.has_lo && r.lo >= 0)) add(CompareNode::make(CmpOp::kGE, idx, make_int(0), loc));
      int64_t size;
      if (is_const_int(b->shape[d], &size) && r.has_hi && r.hi < size) continue;
      const Expr lt = CompareNode::make(CmpOp::kLT, idx, b->shape[d], loc);
      if (known(lt)) continue;
      const Interval slack = bound_of(simplify(BinaryNode::make(BinOp::kSub, b->shape[d], idx)), ranges_);
      if (slack.has_lo && slack.lo >= 1) continue;
      add(lt);
    }
    return cond;
  }
  bool known(const Expr& c) {
    for (const Expr& f : facts_)
      if (structural_equal(f, c)) return true;
    return false;
  }
  void push_facts(const Expr& c) {
    if (const LogicalNode* l = c.as<LogicalNode>(); l && l->is_and) {
      push_facts(l->a);
      push_facts(l->b);
      return;
    }
    facts_.push_back(c);
  }

  Expr mutate_Load(const LoadNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Load(op, self);
    if (op->buffer->scope != Scope::kGlobal) return e;
    const LoadNode* l = e.as<LoadNode>();
    Expr c = guard(l->buffer, l->indices, l->loc);
    if (!c.defined()) return e;
    return SelectNode::make(c, e, make_const(compute_type(l->type), 0, l->loc), l->loc);
  }
  Expr mutate_Select(const SelectNode* op, const Expr& self) override {
    Expr c = mutate(op->cond);
    const RangeMap saved = ranges_;
    const size_t nfacts = facts_.size();
    refine_with_condition(c, &ranges_);
    push_facts(c);
    Expr t = mutate(op->t);
    ranges_ = saved;
    facts_.resize(nfacts);
    Expr f = mutate(op->f);
    if (c.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return self;
    return SelectNode::make(c, t, f, op->loc);
  }

  Stmt guarded(const Stmt& s, const Buffer& b, const std::vector<Expr>& idx) {
    if (b->scope != Scope::kGlobal) return s;
    Expr c = guard(b, idx, s->loc);
    return c.defined() ? IfThenElseNode::make(c, s, {}, s->loc) : s;
  }
  Stmt mutate_Store(const StoreNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_Store(op, self);
    const StoreNode* st = s.as<StoreNode>();
    return guarded(s, st->buffer, st->indices);
  }
  Stmt mutate_Evaluate(const EvaluateNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_Evaluate(op, self);
    const CallNode* call = op->value.as<CallNode>();
    if (!call || call->extern_name.rfind("tlrt::atomic_", 0) != 0) return s;  // prefetches may point anywhere
    const AddressOfNode* addr = call->args[0].as<AddressOfNode>();
    return addr ? guarded(s, addr->buffer, addr->indices) : s;
  }

  Stmt mutate_For(const ForNode* op, const Stmt& self) override {
    const RangeMap saved = ranges_;
    ranges_[op->var.get()] = loop_range(op->min, op->extent, ranges_);
    Stmt s = IRMutator::mutate_For(op, self);
    ranges_ = saved;
    return s;
  }
  Stmt mutate_LetStmt(const LetStmtNode* op, const Stmt& self) override {
    ranges_[op->var.get()] = bound_of(op->value, ranges_);
    return IRMutator::mutate_LetStmt(op, self);
  }
  Stmt mutate_IfThenElse(const IfThenElseNode* op, const Stmt& self) override {
    Expr c = mutate(op->cond);
    const RangeMap saved = ranges_;
    const size_t nfacts = facts_.size();
    refine_with_condition(c, &ranges_);
    push_facts(c);
    Stmt t = mutate(op->then_case);
    ranges_ = saved;
    facts_.resize(nfacts);
    Stmt e = mutate(op->else_case);
    if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
    return IfThenElseNode::make(c, t, e, op->loc);
  }
  Stmt mutate_Launch(const LaunchNode* op, const Stmt& self) override {
    for (size_t d = 0; d < op->grid.size(); ++d) {
      const Interval g = bound_of(op->grid[d], ranges_);
      Interval r = Interval::everything();
      r.has_lo = true;
      r.lo = 0;
      if (g.has_hi) r.has_hi = true, r.hi = g.hi - 1;
      ranges_[op->block_vars[d].get()] = r;
    }
    return IRMutator::mutate_Launch(op, self);
  }

 private:
  RangeMap ranges_;
  std::vector<Expr> facts_;
};

}  // namespace

Stmt legalize_bounds(const Stmt& s) {
  return Legalize().mutate(s);
}

}  // namespace tessera::tl
