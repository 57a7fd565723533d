// Verification pass (see verify.h).
#include "tl/passes/verify.h"

#include <set>
#include <string>

#include "tl/ir/visitor.h"

namespace tessera::tl {
namespace {

std::string describe(const Buffer& b) {
  return std::string(scope_name(b->scope)) + " buffer '" + b->name + "'";
}

class Verifier : public IRVisitor {
 public:
  explicit Verifier(const Program& p) {
    for (const Expr& s : p.symbols) defined_.insert(s.get());
    for (const Param& prm : p.params) {
      if (prm.buffer) {
        buffers_.insert(prm.buffer.get());
        for (const Expr& d : prm.buffer->shape) check_shape_expr(d, prm.buffer);
      } else {
        defined_.insert(prm.scalar.get());
      }
    }
  }
  int launches = 0;
  using IRVisitor::visit;
  void visit(const Stmt& s) override {
    const Loc saved = stmt_loc_;
    if (s.defined()) stmt_loc_ = s->loc;
    IRVisitor::visit(s);
    stmt_loc_ = saved;
  }

 protected:
  void check_shape_expr(const Expr& e, const Buffer& b) {
    for_each_expr(e, [&](const Expr& x) {
      if (x.as<VarNode>() && !defined_.count(x.get()))
        fail_at(b->loc, "T.Tensor '" + b->name + "': shape uses '" + x.as<VarNode>()->name +
                            "', which is not a T.dynamic dimension of this kernel");
    });
  }

  void visit_Var(const VarNode* op) override {
    if (!defined_.count(op))
      fail_at(stmt_loc_.known() ? stmt_loc_ : op->loc,
              "variable '" + op->name + "' (defined at " + op->loc.str() +
                  ") is used outside the loop, kernel or scope that defines it (a value that must live across "
                  "loop iterations or outside a loop belongs in T.alloc_var / T.alloc_local)");
  }

  void use_buffer(const Buffer& b, Loc loc) {
    if (!buffers_.count(b.get()))
      fail_at(loc,
              describe(b) + " is used outside the kernel that allocates it, or is not a parameter of this program");
  }
  void visit_Load(const LoadNode* op) override {
    use_buffer(op->buffer, op->loc);
    IRVisitor::visit_Load(op);
  }
  void visit_AddressOf(const AddressOfNode* op) override {
    use_buffer(op->buffer, op->loc);
    IRVisitor::visit_AddressOf(op);
  }
  void visit_Store(const StoreNode* op) override {
    use_buffer(op->buffer, op->loc);
    IRVisitor::visit_Store(op);
  }
  void bind(const Expr& v, const Stmt& body) {
    defined_.insert(v.get());
    visit(body);
    defined_.erase(v.get());
  }
  void visit_LetStmt(const LetStmtNode* op) override {
    visit(op->value);
    bind(op->var, op->body);
  }
  void visit_For(const ForNode* op) override {
    visit(op->min);
    visit(op->extent);
    bind(op->var, op->body);
  }
  void visit_Allocate(const AllocateNode* op) override {
    if (op->buffer->address.defined()) visit(op->buffer->address);
    buffers_.insert(op->buffer.get());
    visit(op->body);
    buffers_.erase(op->buffer.get());
  }
  void visit_Launch(const LaunchNode* op) override {
    ++launches;
    for (const Expr& g : op->grid) visit(g);
    for (const Expr& v : op->block_vars) defined_.insert(v.get());
    visit(op->body);
    for (const Expr& v : op->block_vars) defined_.erase(v.get());
  }

  void operand(const Region& r, Loc loc, const char* op, const char* role) {
    use_buffer(r.buffer, loc);
    for (const Expr& e : r.min) visit(e);
    for (const Expr& e : r.extent) visit(e);
    if (r.min.size() != r.buffer->shape.size())
      fail_at(loc, std::string(op) + ": " + role + " region of '" + r.buffer->name + "' has the wrong rank");
  }
  void require_scope(const Region& r, Loc loc, const char* op, const char* role, std::initializer_list<Scope> ok,
                     const char* expected) {
    for (Scope s : ok)
      if (r.buffer->scope == s) return;
    fail_at(loc, std::string(op) + ": " + role + " must be " + expected + ", got " + describe(r.buffer));
  }

  void visit_Copy(const CopyNode* op) override {
    operand(op->src, op->loc, "T.copy", "src");
    operand(op->dst, op->loc, "T.copy", "dst");
  }
  void visit_Gemm(const GemmNode* op) override {
    operand(op->a, op->loc, "T.gemm", "A");
    operand(op->b, op->loc, "T.gemm", "B");
    operand(op->c, op->loc, "T.gemm", "C");
    const auto on_chip = {Scope::kShared, Scope::kFragment, Scope::kLocal};
    require_scope(op->a, op->loc, "T.gemm", "A", on_chip, "a shared or fragment buffer");
    require_scope(op->b, op->loc, "T.gemm", "B", on_chip, "a shared or fragment buffer");
    require_scope(op->c, op->loc, "T.gemm", "C (the accumulator)", {Scope::kFragment, Scope::kLocal},
                  "a fragment buffer (T.alloc_fragment)");
  }
  void visit_Fill(const FillNode* op) override {
    operand(op->dst, op->loc, "T.fill", "dst");
    visit(op->value);
  }
  void visit_Reduce(const ReduceNode* op) override {
    operand(op->src, op->loc, "T.reduce", "src");
    operand(op->dst, op->loc, "T.reduce", "dst");
    const auto on_chip = {Scope::kShared, Scope::kFragment, Scope::kLocal};
    require_scope(op->src, op->loc, (std::string("T.reduce_") + reduce_kind_name(op->op)).c_str(), "src", on_chip,
                  "a shared or fragment buffer");
    require_scope(op->dst, op->loc, (std::string("T.reduce_") + reduce_kind_name(op->op)).c_str(), "dst", on_chip,
                  "a shared or fragment buffer");
  }
  void visit_Cumsum(const CumsumNode* op) override {
    operand(op->src, op->loc, "T.cumsum", "src");
    operand(op->dst, op->loc, "T.cumsum", "dst");
    const auto on_chip = {Scope::kShared, Scope::kFragment, Scope::kLocal};
    require_scope(op->src, op->loc, "T.cumsum", "src", on_chip, "a shared or fragment buffer");
    require_scope(op->dst, op->loc, "T.cumsum", "dst", on_chip, "a shared or fragment buffer");
  }
  void visit_Atomic(const AtomicNode* op) override {
    operand(op->dst, op->loc, "T.atomic", "dst");
    if (op->src.buffer) operand(op->src, op->loc, "T.atomic", "src");
    visit(op->value);
  }

 private:
  Loc stmt_loc_;
  std::set<const Node*> defined_;
  std::set<const BufferNode*> buffers_;
};

}  // namespace

void verify_program(const Program& p) {
  if (!p.body.defined()) fail_at(p.loc, "program '" + p.name + "' has no body");
  Verifier v(p);
  v.visit(p.body);
  if (v.launches < 1) fail_at(p.loc, "program '" + p.name + "' has no T.Kernel");
  for (const Expr& s : p.symbols) {
    bool bound = false;
    for (const Param& prm : p.params)
      if (prm.buffer)
        for (const Expr& d : prm.buffer->shape) bound = bound || d.same_as(s);
    if (!bound)
      fail_at(s->loc, "T.dynamic('" + s.as<VarNode>()->name +
                          "') is not a dimension of any tensor parameter, so no call can give it a value");
  }
}

}  // namespace tessera::tl
