// First-iteration clearing T.gemm (see first_gemm_clears.h).
#include "tl/passes/first_gemm_clears.h"

#include "tl/ir/visitor.h"
#include "tl/passes/region_utils.h"

namespace tessera::tl {
namespace {

// Whether a statement reads or writes buffer b anywhere (loads, stores, addresses, tile ops).
class Mentions : public IRVisitor {
 public:
  explicit Mentions(const BufferNode* b) : b_(b) {}
  bool found = false;
  using IRVisitor::visit;

 protected:
  void check(const Buffer& x) { found = found || x.get() == b_; }
  void visit_Load(const LoadNode* op) override { check(op->buffer), IRVisitor::visit_Load(op); }
  void visit_Store(const StoreNode* op) override { check(op->buffer), IRVisitor::visit_Store(op); }
  void visit_AddressOf(const AddressOfNode* op) override { check(op->buffer), IRVisitor::visit_AddressOf(op); }
  void visit_Copy(const CopyNode* op) override {
    check(op->src.buffer), check(op->dst.buffer), IRVisitor::visit_Copy(op);
  }
  void visit_Gemm(const GemmNode* op) override {
    check(op->a.buffer), check(op->b.buffer), check(op->c.buffer), IRVisitor::visit_Gemm(op);
  }
  void visit_Fill(const FillNode* op) override { check(op->dst.buffer), IRVisitor::visit_Fill(op); }
  void visit_Reduce(const ReduceNode* op) override {
    check(op->src.buffer), check(op->dst.buffer), IRVisitor::visit_Reduce(op);
  }
  void visit_Cumsum(const CumsumNode* op) override {
    check(op->src.buffer), check(op->dst.buffer), IRVisitor::visit_Cumsum(op);
  }
  void visit_Atomic(const AtomicNode* op) override {
    check(op->dst.buffer);
    if (op->src.buffer) check(op->src.buffer);
    IRVisitor::visit_Atomic(op);
  }

 private:
  const BufferNode* b_;
};

bool mentions(const Stmt& s, const Buffer& b) {
  Mentions m(b.get());
  m.visit(s);
  return m.found;
}

// The loop's body with its first T.gemm into c made clearing on the first iteration, or undefined when
// the pattern does not hold.
Stmt clearing_body(const ForNode* f, const Buffer& c) {
  std::vector<Stmt> body;
  if (const SeqNode* seq = f->body.as<SeqNode>()) {
    body = seq->stmts;
  } else {
    body = {f->body};
  }
  for (Stmt& s : body) {
    if (!mentions(s, c)) continue;
    const GemmNode* g = s.as<GemmNode>();
    if (!g || g->clear_accum || g->c.buffer != c || !covers_whole(g->c) || g->a.buffer == c || g->b.buffer == c)
      return {};
    const Expr first = CompareNode::make(CmpOp::kEQ, f->var, f->min);
    s = IfThenElseNode::make(first, GemmNode::make(g->a, g->b, g->c, g->trans_a, g->trans_b, true, g->loc), s, g->loc);
    return SeqNode::make(body, f->loc);
  }
  return {};
}

class FirstGemmClears : public IRMutator {
 protected:
  Stmt mutate_Seq(const SeqNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_Seq(op, self);
    const SeqNode* seq = s.as<SeqNode>();
    if (!seq) return s;
    std::vector<Stmt> stmts = seq->stmts;
    bool changed = false;
    for (size_t i = 0; i < stmts.size(); ++i) {
      const FillNode* fill = stmts[i].as<FillNode>();
      double v = 1;
      if (!fill || !covers_whole(fill->dst) || !is_const_number(fill->value, &v) || v != 0) continue;
      const Buffer& c = fill->dst.buffer;
      size_t j = i + 1;
      while (j < stmts.size() && !stmts[j].as<ForNode>() && !mentions(stmts[j], c)) ++j;
      if (j == stmts.size() || !stmts[j].as<ForNode>()) continue;
      const ForNode* f = stmts[j].as<ForNode>();
      const Stmt body = clearing_body(f, c);
      if (!body.defined()) continue;
      // A loop that runs no iteration leaves C as the clear made it.
      const Expr no_iteration = CompareNode::make(CmpOp::kLE, f->extent, make_int(0));
      stmts[i] = IfThenElseNode::make(no_iteration, stmts[i], {}, fill->loc);
      stmts[j] = ForNode::make(f->var, f->min, f->extent, f->kind, body, f->loc, f->num_stages);
      changed = true;
    }
    return changed ? SeqNode::make(stmts, seq->loc) : s;
  }
};

}  // namespace

Stmt first_gemm_clears(const Stmt& s) {
  return FirstGemmClears().mutate(s);
}

}  // namespace tessera::tl
