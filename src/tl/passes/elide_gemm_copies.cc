// Copy elision for gemm operands (see elide_gemm_copies.h).
#include "tl/passes/elide_gemm_copies.h"

#include <map>
#include <set>

#include "tl/ir/visitor.h"
#include "tl/passes/region_utils.h"

namespace tessera::tl {
namespace {

// How every on-chip buffer is used: copies into it (whole) and gemm operand uses; anything else
// disqualifies it.
struct Uses {
  int copies_in = 0, gemm_uses = 0, other = 0;
};

class UseCounter : public IRVisitor {
 public:
  std::map<const BufferNode*, Uses> uses;
  using IRVisitor::visit;

 protected:
  void other(const Buffer& b) { ++uses[b.get()].other; }
  void visit_Load(const LoadNode* op) override {
    other(op->buffer);
    IRVisitor::visit_Load(op);
  }
  void visit_AddressOf(const AddressOfNode* op) override {
    other(op->buffer);
    IRVisitor::visit_AddressOf(op);
  }
  void visit_Store(const StoreNode* op) override {
    other(op->buffer);
    IRVisitor::visit_Store(op);
  }
  void visit_Copy(const CopyNode* op) override {
    other(op->src.buffer);
    if (covers_whole(op->dst) && op->src.buffer->scope == Scope::kGlobal &&
        op->src.buffer->dtype == op->dst.buffer->dtype)
      ++uses[op->dst.buffer.get()].copies_in;
    else
      other(op->dst.buffer);
  }
  void visit_Gemm(const GemmNode* op) override {
    for (const Region* r : {&op->a, &op->b}) {
      if (covers_whole(*r))
        ++uses[r->buffer.get()].gemm_uses;
      else
        other(r->buffer);
    }
    other(op->c.buffer);
  }
  void visit_Fill(const FillNode* op) override { other(op->dst.buffer); }
  void visit_Reduce(const ReduceNode* op) override { other(op->src.buffer), other(op->dst.buffer); }
  void visit_Cumsum(const CumsumNode* op) override { other(op->src.buffer), other(op->dst.buffer); }
  void visit_Atomic(const AtomicNode* op) override {
    other(op->dst.buffer);
    if (op->src.buffer) other(op->src.buffer);
  }
};

// True when statement s may write global buffer g (so a copy of g cannot be moved past it).
bool writes(const Stmt& s, const Buffer& g) {
  bool w = false;
  for_each_stmt(s, [&](const Stmt& x) {
    if (const StoreNode* st = x.as<StoreNode>()) w = w || st->buffer == g;
    if (const CopyNode* c = x.as<CopyNode>()) w = w || c->dst.buffer == g;
    if (const AtomicNode* a = x.as<AtomicNode>()) w = w || a->dst.buffer == g;
    if (const EvaluateNode* e = x.as<EvaluateNode>()) w = w || e->value.as<CallNode>() != nullptr;
  });
  return w;
}

class Elider : public IRMutator {
 public:
  explicit Elider(std::set<const BufferNode*> candidates) : candidates_(std::move(candidates)) {}

 protected:
  Stmt mutate_Seq(const SeqNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_Seq(op, self);
    const SeqNode* seq = s.as<SeqNode>();
    if (!seq) return s;
    std::vector<Stmt> stmts = seq->stmts;
    bool changed = false;
    for (size_t i = 0; i < stmts.size(); ++i) {
      const CopyNode* c = stmts[i].as<CopyNode>();
      if (!c || !candidates_.count(c->dst.buffer.get())) continue;
      // Every gemm reading the buffer must be a later sibling, with nothing in between writing the source.
      std::vector<size_t> gemms;
      bool blocked = false;
      for (size_t j = i + 1; j < stmts.size() && !blocked; ++j) {
        const GemmNode* g = stmts[j].as<GemmNode>();
        if (g && (g->a.buffer == c->dst.buffer || g->b.buffer == c->dst.buffer)) {
          gemms.push_back(j);
        } else if (writes(stmts[j], c->src.buffer)) {
          blocked = true;
        }
      }
      if (blocked || gemms.empty()) continue;
      for (size_t j : gemms) {
        const GemmNode* g = stmts[j].as<GemmNode>();
        stmts[j] =
            GemmNode::make(g->a.buffer == c->dst.buffer ? c->src : g->a, g->b.buffer == c->dst.buffer ? c->src : g->b,
                           g->c, g->trans_a, g->trans_b, g->clear_accum, g->loc);
      }
      stmts[i] = SeqNode::make({}, c->loc);
      changed = true;
    }
    return changed ? SeqNode::make(stmts, seq->loc) : s;
  }

 private:
  std::set<const BufferNode*> candidates_;
};

}  // namespace

Stmt elide_gemm_copies(const Stmt& s) {
  UseCounter counter;
  counter.visit(s);
  std::set<const BufferNode*> candidates;
  for (const auto& [b, u] : counter.uses)
    if (u.copies_in == 1 && u.gemm_uses >= 1 && u.other == 0) candidates.insert(b);
  if (candidates.empty()) return s;
  return Elider(candidates).mutate(s);
}

}  // namespace tessera::tl
