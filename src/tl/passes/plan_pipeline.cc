// Pipeline planning (see plan_pipeline.h).
#include "tl/passes/plan_pipeline.h"

#include "tl/ir/visitor.h"
#include "tl/passes/region_utils.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

// A prefetch of the rows of `src` as they will be at iteration var + dist; undefined when the tile is
// not a set of contiguous rows.
Stmt prefetch_for(const Region& src, const Expr& var, int64_t dist, Loc loc) {
  const std::vector<int> dims = tile_dims(src);
  const size_t last = src.extent.size() - 1;
  if (dims.empty() || dims.size() > 2 || size_t(dims.back()) != last) return {};
  const int64_t es = type_bytes(src.buffer->dtype);
  Expr rows = make_int(1), stride = IntImmNode::make(DataType::kInt64, 0);
  if (dims.size() == 2) {
    rows = src.extent[size_t(dims[0])];
    stride =
        BinaryNode::make(BinOp::kMul, src.buffer->strides[size_t(dims[0])], IntImmNode::make(DataType::kInt64, es));
  }
  const Expr ahead = BinaryNode::make(BinOp::kAdd, var, make_int(dist));
  std::vector<Expr> mins;
  for (const Expr& m : src.min) mins.push_back(simplify(substitute(m, {{var, ahead}})));
  const Expr row_bytes = BinaryNode::make(BinOp::kMul, CastNode::make(DataType::kInt64, src.extent[last]),
                                          IntImmNode::make(DataType::kInt64, es));
  return EvaluateNode::make(
      CallNode::make_extern(DataType::kInt32, "tlrt::prefetch_2d",
                            {AddressOfNode::make(src.buffer, mins, loc), CastNode::make(DataType::kInt64, rows),
                             simplify(row_bytes), simplify(stride)},
                            loc),
      loc);
}

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
        if (Stmt p = prefetch_for(c->src, f->var, dist, c->loc); p.defined()) prefetches.push_back(p);
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
