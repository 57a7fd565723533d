// Pipeline planning (see plan_pipeline.h).
#include "tl/passes/plan_pipeline.h"

#include "tl/ir/visitor.h"
#include "tl/passes/region_utils.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

class PlanPipeline : public IRMutator {
 protected:
  Stmt mutate_For(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_For(op, self);
    const ForNode* f = s.as<ForNode>();
    if (f->kind != ForKind::kPipelined) return s;
    std::vector<Stmt> body;
    if (f->num_stages >= 2) {
      const int64_t dist = f->num_stages - 1;
      std::vector<Stmt> prefetches;
      for_each_stmt(f->body, [&](const Stmt& x) {
        const CopyNode* c = x.as<CopyNode>();
        if (!c || c->src.buffer->scope != Scope::kGlobal) return;
        bool uses = false;
        for (const Expr& m : c->src.min) uses = uses || uses_var(m, f->var);
        if (!uses) return;
        if (Stmt p = prefetch_rows_ahead(c->src, f->var, dist, c->loc); p.defined()) prefetches.push_back(p);
      });
      if (!prefetches.empty()) {
        const Expr in_range = CompareNode::make(CmpOp::kLT, BinaryNode::make(BinOp::kAdd, f->var, make_int(dist)),
                                                BinaryNode::make(BinOp::kAdd, f->min, f->extent));
        body.push_back(IfThenElseNode::make(in_range, SeqNode::make(prefetches, f->loc), {}, f->loc));
      }
    }
    body.push_back(f->body);
    return ForNode::make(f->var, f->min, f->extent, ForKind::kSerial, SeqNode::make(body, f->loc), f->loc);
  }
};

}  // namespace

Stmt plan_pipeline(const Stmt& s) {
  return PlanPipeline().mutate(s);
}

}  // namespace tessera::tl
