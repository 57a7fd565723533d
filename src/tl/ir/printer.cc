// The IR printer: TileLang-like text, one statement per line.
#include "tessera/tl/printer.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "tl/ir/visitor.h"

namespace tessera::tl {
namespace {

class Printer : public IRVisitor {
 public:
  explicit Printer(int indent) : indent_(indent) {}
  std::string str() const { return os_.str(); }
  using IRVisitor::visit;

  void region(const Region& r) {
    os_ << r.buffer->name << "[";
    for (size_t d = 0; d < r.min.size(); ++d) {
      if (d) os_ << ", ";
      visit(r.min[d]);
      if (r.extent[d].defined()) {
        int64_t e;
        if (!is_const_int(r.extent[d], &e) || e != 1 || !is_const_int(r.min[d])) {
          os_ << ":+";
          visit(r.extent[d]);
        }
      } else {
        os_ << ":+?";
      }
    }
    os_ << "]";
  }

 protected:
  void line() { os_ << std::string(size_t(indent_) * 2, ' '); }
  void body(const Stmt& s) {
    ++indent_;
    visit(s);
    --indent_;
  }
  void list(const std::vector<Expr>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os_ << ", ";
      visit(v[i]);
    }
  }

  void visit_IntImm(const IntImmNode* op) override {
    if (op->type == DataType::kBool) {
      os_ << (op->value ? "True" : "False");
    } else {
      os_ << op->value;
    }
  }
  void visit_FloatImm(const FloatImmNode* op) override {
    if (std::isinf(op->value)) {
      os_ << (op->value < 0 ? "-inf" : "inf");
    } else {
      os_ << std::setprecision(9) << op->value;
    }
    if (op->type != DataType::kFloat32) os_ << ":" << type_name(op->type);
  }
  void visit_Var(const VarNode* op) override { os_ << op->name; }
  void visit_Binary(const BinaryNode* op) override {
    if (op->op == BinOp::kMin || op->op == BinOp::kMax) {
      os_ << binop_name(op->op) << "(";
      visit(op->a);
      os_ << ", ";
      visit(op->b);
      os_ << ")";
      return;
    }
    os_ << "(";
    visit(op->a);
    os_ << " " << binop_name(op->op) << " ";
    visit(op->b);
    os_ << ")";
  }
  void visit_Compare(const CompareNode* op) override {
    os_ << "(";
    visit(op->a);
    os_ << " " << cmpop_name(op->op) << " ";
    visit(op->b);
    os_ << ")";
  }
  void visit_Logical(const LogicalNode* op) override {
    os_ << "(";
    visit(op->a);
    os_ << (op->is_and ? " and " : " or ");
    visit(op->b);
    os_ << ")";
  }
  void visit_Not(const NotNode* op) override {
    os_ << "not ";
    visit(op->a);
  }
  void visit_Select(const SelectNode* op) override {
    os_ << "T.if_then_else(";
    list({op->cond, op->t, op->f});
    os_ << ")";
  }
  void visit_Cast(const CastNode* op) override {
    os_ << "T.Cast(\"" << type_name(op->type) << "\", ";
    visit(op->value);
    os_ << ")";
  }
  void visit_Call(const CallNode* op) override {
    if (op->op == Intrinsic::kExtern) {
      os_ << op->extern_name << "(";
    } else {
      os_ << "T." << intrinsic_name(op->op) << "(";
    }
    list(op->args);
    os_ << ")";
  }
  void visit_Load(const LoadNode* op) override {
    os_ << op->buffer->name << "[";
    list(op->indices);
    os_ << "]";
  }
  void visit_AddressOf(const AddressOfNode* op) override {
    os_ << "&" << op->buffer->name << "[";
    list(op->indices);
    os_ << "]";
  }

  void visit_Store(const StoreNode* op) override {
    line();
    os_ << op->buffer->name << "[";
    list(op->indices);
    os_ << "] = ";
    visit(op->value);
    os_ << "\n";
  }
  void visit_LetStmt(const LetStmtNode* op) override {
    line();
    visit(op->var);
    os_ << " = ";
    visit(op->value);
    os_ << "\n";
    visit(op->body);
  }
  void visit_For(const ForNode* op) override {
    line();
    os_ << "for ";
    visit(op->var);
    os_ << " in T." << for_kind_name(op->kind) << "(";
    int64_t mn;
    if (!is_const_int(op->min, &mn) || mn != 0) {
      visit(op->min);
      os_ << ", ";
      visit(op->min);
      os_ << " + ";
    }
    visit(op->extent);
    if (op->num_stages) os_ << ", num_stages=" << op->num_stages;
    os_ << "):\n";
    body(op->body);
  }
  void visit_IfThenElse(const IfThenElseNode* op) override {
    line();
    os_ << "if ";
    visit(op->cond);
    os_ << ":\n";
    body(op->then_case);
    if (op->else_case.defined()) {
      line();
      os_ << "else:\n";
      body(op->else_case);
    }
  }
  void visit_Seq(const SeqNode* op) override {
    for (const Stmt& s : op->stmts) visit(s);
    if (op->stmts.empty()) {
      line();
      os_ << "pass\n";
    }
  }
  void visit_Allocate(const AllocateNode* op) override {
    line();
    const Buffer& b = op->buffer;
    os_ << b->name << " = T.alloc_" << scope_name(b->scope) << "([";
    list(b->shape);
    os_ << "], \"" << type_name(b->dtype) << "\")\n";
    visit(op->body);
  }
  void visit_Evaluate(const EvaluateNode* op) override {
    line();
    visit(op->value);
    os_ << "\n";
  }
  void visit_Launch(const LaunchNode* op) override {
    line();
    os_ << "with T.Kernel(";
    list(op->grid);
    os_ << ", threads=" << op->threads << ") as (";
    list(op->block_vars);
    os_ << "):\n";
    body(op->body);
  }
  void visit_Copy(const CopyNode* op) override {
    line();
    os_ << "T.copy(";
    region(op->src);
    os_ << ", ";
    region(op->dst);
    os_ << ")\n";
  }
  void visit_Gemm(const GemmNode* op) override {
    line();
    os_ << "T.gemm(";
    region(op->a);
    os_ << ", ";
    region(op->b);
    os_ << ", ";
    region(op->c);
    os_ << ", transpose_A=" << (op->trans_a ? "True" : "False") << ", transpose_B=" << (op->trans_b ? "True" : "False")
        << ", clear_accum=" << (op->clear_accum ? "True" : "False") << ")\n";
  }
  void visit_Fill(const FillNode* op) override {
    line();
    os_ << "T.fill(";
    region(op->dst);
    os_ << ", ";
    visit(op->value);
    os_ << ")\n";
  }
  void visit_Reduce(const ReduceNode* op) override {
    line();
    os_ << "T.reduce_" << reduce_kind_name(op->op) << "(";
    region(op->src);
    os_ << ", ";
    region(op->dst);
    os_ << ", dim=" << op->dim << ", clear=" << (op->clear ? "True" : "False") << ")\n";
  }
  void visit_Cumsum(const CumsumNode* op) override {
    line();
    os_ << "T.cumsum(";
    region(op->src);
    os_ << ", ";
    region(op->dst);
    os_ << ", dim=" << op->dim << ", reverse=" << (op->reverse ? "True" : "False") << ")\n";
  }
  void visit_Atomic(const AtomicNode* op) override {
    line();
    os_ << "T.atomic_" << atomic_kind_name(op->op) << "(";
    region(op->dst);
    os_ << ", ";
    if (op->src.buffer) {
      region(op->src);
    } else {
      visit(op->value);
    }
    os_ << ")\n";
  }

 private:
  std::ostringstream os_;
  int indent_;
};

}  // namespace

std::string to_string(const Expr& e) {
  Printer p(0);
  p.visit(e);
  return p.str();
}

std::string to_string(const Stmt& s, int indent) {
  Printer p(indent);
  p.visit(s);
  return p.str();
}

std::string to_string(const Region& r) {
  Printer p(0);
  p.region(r);
  return p.str();
}

std::string to_string(const Program& prog) {
  std::ostringstream os;
  os << "@T.prim_func\ndef " << prog.name << "(";
  for (size_t i = 0; i < prog.params.size(); ++i) {
    const Param& p = prog.params[i];
    if (i) os << ", ";
    os << p.name << ": ";
    if (p.buffer) {
      os << "T.Tensor([";
      for (size_t d = 0; d < p.buffer->shape.size(); ++d) os << (d ? ", " : "") << to_string(p.buffer->shape[d]);
      os << "], \"" << type_name(p.buffer->dtype) << "\")";
    } else {
      os << "T." << type_name(p.scalar.type());
    }
  }
  os << "):\n" << to_string(prog.body, 1);
  return os.str();
}

}  // namespace tessera::tl
