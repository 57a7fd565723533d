// make() of every IR node: operand validation, type promotion and the conversions it implies.
#include <cmath>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/tl/ir.h"

namespace tessera::tl {
namespace {

template <class T>
std::shared_ptr<T> alloc(DataType t, Loc loc) {
  return std::make_shared<T>(T::kKind, t, loc);
}
template <class T>
std::shared_ptr<T> alloc_stmt(Loc loc) {
  return std::make_shared<T>(T::kKind, loc);
}

void require(bool ok, Loc loc, const char* what, const std::string& rule) {
  if (!ok) fail_at(loc, std::string(what) + ": " + rule);
}

void require_defined(const Expr& e, Loc loc, const char* what, const char* operand) {
  require(e.defined(), loc, what, std::string("operand '") + operand + "' is missing");
  require(e.type() != DataType::kHandle, loc, what,
          std::string("operand '") + operand + "' is an address, not a value");
}

// Converts e to the compute type t unless it already computes in t (bf16 values are float32 values).
Expr convert(const Expr& e, DataType t) {
  if (e.type() == t || compute_type(e.type()) == t) return e;
  return CastNode::make(t, e, e->loc);
}

Expr to_bool(const Expr& e) {
  if (e.type() == DataType::kBool) return e;
  return CompareNode::make(CmpOp::kNE, e, make_const(e.type(), 0, e->loc), e->loc);
}

void check_indices(const Buffer& b, const std::vector<Expr>& idx, Loc loc, const char* what) {
  require(b != nullptr, loc, what, "buffer is missing");
  if (idx.size() != b->shape.size())
    fail_at(loc, std::string(what) + ": buffer '" + b->name + "' has " + std::to_string(b->shape.size()) +
                     " dimensions, indexed with " + std::to_string(idx.size()));
  for (const Expr& i : idx) {
    require(i.defined(), loc, what, "an index of '" + b->name + "' is missing");
    require(is_int(i.type()), loc, what, "indices of '" + b->name + "' must be integers, got " + type_name(i.type()));
  }
}

void check_region(const Region& r, Loc loc, const char* what) {
  require(r.buffer != nullptr, loc, what, "buffer region is missing");
  require(r.min.size() == r.buffer->shape.size() && r.extent.size() == r.buffer->shape.size(), loc, what,
          "region of '" + r.buffer->name + "' has the wrong number of dimensions");
}

}  // namespace

void fail_at(Loc loc, const std::string& message) {
  fail(ErrorCode::kInvalidArgument, loc.str(), ": ", message);
}

Expr IntImmNode::make(DataType t, int64_t v, Loc loc) {
  require(is_int(t), loc, "IntImm", std::string("type must be an integer, got ") + type_name(t));
  auto n = alloc<IntImmNode>(t, loc);
  n->value = t == DataType::kBool ? (v != 0) : v;
  return Expr(std::move(n));
}

Expr FloatImmNode::make(DataType t, double v, Loc loc) {
  require(is_float(t), loc, "FloatImm", std::string("type must be a float, got ") + type_name(t));
  auto n = alloc<FloatImmNode>(t, loc);
  n->value = v;
  return Expr(std::move(n));
}

Expr VarNode::make(const std::string& name, DataType t, Loc loc) {
  require(!name.empty(), loc, "Var", "name must not be empty");
  auto n = alloc<VarNode>(t, loc);
  n->name = name;
  return Expr(std::move(n));
}

Expr BinaryNode::make(BinOp op, Expr a, Expr b, Loc loc) {
  const char* what = binop_name(op);
  require_defined(a, loc, what, "a");
  require_defined(b, loc, what, "b");
  const bool bits =
      op == BinOp::kBitAnd || op == BinOp::kBitOr || op == BinOp::kBitXor || op == BinOp::kShl || op == BinOp::kShr;
  if (bits)
    require(is_int(a.type()) && is_int(b.type()), loc, what,
            std::string("operands must be integers, got ") + type_name(a.type()) + " and " + type_name(b.type()));
  const DataType t = promote(a.type(), b.type());
  if ((op == BinOp::kFloorDiv || op == BinOp::kFloorMod) && is_int(t)) {
    int64_t d;
    if (is_const_int(b, &d)) require(d != 0, loc, what, "division by the constant 0");
  }
  auto n = alloc<BinaryNode>(t, loc);
  n->op = op;
  n->a = convert(a, t);
  n->b = convert(b, t);
  return Expr(std::move(n));
}

Expr CompareNode::make(CmpOp op, Expr a, Expr b, Loc loc) {
  require_defined(a, loc, cmpop_name(op), "a");
  require_defined(b, loc, cmpop_name(op), "b");
  const DataType t = promote(a.type(), b.type());
  auto n = alloc<CompareNode>(DataType::kBool, loc);
  n->op = op;
  n->a = convert(a, t);
  n->b = convert(b, t);
  return Expr(std::move(n));
}

Expr LogicalNode::make(bool is_and, Expr a, Expr b, Loc loc) {
  require_defined(a, loc, is_and ? "and" : "or", "a");
  require_defined(b, loc, is_and ? "and" : "or", "b");
  auto n = alloc<LogicalNode>(DataType::kBool, loc);
  n->is_and = is_and;
  n->a = to_bool(a);
  n->b = to_bool(b);
  return Expr(std::move(n));
}

Expr NotNode::make(Expr a, Loc loc) {
  require_defined(a, loc, "not", "a");
  auto n = alloc<NotNode>(DataType::kBool, loc);
  n->a = to_bool(a);
  return Expr(std::move(n));
}

Expr SelectNode::make(Expr cond, Expr t, Expr f, Loc loc) {
  require_defined(cond, loc, "if_then_else", "cond");
  require_defined(t, loc, "if_then_else", "then");
  require_defined(f, loc, "if_then_else", "else");
  const DataType rt = t.type() == f.type() ? t.type() : promote(t.type(), f.type());
  auto n = alloc<SelectNode>(rt, loc);
  n->cond = to_bool(cond);
  n->t = t.type() == rt ? t : convert(t, rt);
  n->f = f.type() == rt ? f : convert(f, rt);
  return Expr(std::move(n));
}

Expr CastNode::make(DataType t, Expr value, Loc loc) {
  require_defined(value, loc, "cast", "value");
  require(t != DataType::kHandle, loc, "cast", "cannot cast to an address");
  auto n = alloc<CastNode>(t, loc);
  n->value = value;
  return Expr(std::move(n));
}

Expr CallNode::make(Intrinsic op, std::vector<Expr> args, Loc loc) {
  const char* what = intrinsic_name(op);
  require(op != Intrinsic::kExtern, loc, what, "use make_extern for runtime calls");
  const int arity = intrinsic_arity(op);
  if (int(args.size()) != arity)
    fail_at(loc, std::string(what) + ": takes " + std::to_string(arity) + " argument(s), got " +
                     std::to_string(args.size()));
  for (const Expr& a : args) require_defined(a, loc, what, "argument");
  DataType rt;
  if (op == Intrinsic::kDecodeE2M1) {
    require(is_int(args[0].type()), loc, what, "the argument must be an integer code");
    rt = DataType::kFloat32;
  } else if (op == Intrinsic::kAbs && is_int(args[0].type())) {
    rt = compute_type(args[0].type());
  } else {
    rt = DataType::kFloat32;
    for (const Expr& a : args)
      if (compute_type(a.type()) == DataType::kFloat64) rt = DataType::kFloat64;
    for (Expr& a : args) a = convert(a, rt);
    if (op == Intrinsic::kIsNan || op == Intrinsic::kIsInf) rt = DataType::kBool;
  }
  auto n = alloc<CallNode>(rt, loc);
  n->op = op;
  n->args = std::move(args);
  return Expr(std::move(n));
}

Expr CallNode::make_extern(DataType ret, const std::string& name, std::vector<Expr> args, Loc loc) {
  require(!name.empty(), loc, "extern call", "name must not be empty");
  for (const Expr& a : args) require(a.defined(), loc, name.c_str(), "an argument is missing");
  auto n = alloc<CallNode>(ret, loc);
  n->op = Intrinsic::kExtern;
  n->extern_name = name;
  n->args = std::move(args);
  return Expr(std::move(n));
}

Expr LoadNode::make(const Buffer& buffer, std::vector<Expr> indices, Loc loc) {
  check_indices(buffer, indices, loc, "load");
  auto n = alloc<LoadNode>(buffer->dtype, loc);
  n->buffer = buffer;
  n->indices = std::move(indices);
  return Expr(std::move(n));
}

Expr AddressOfNode::make(const Buffer& buffer, std::vector<Expr> indices, Loc loc) {
  check_indices(buffer, indices, loc, "address_of");
  auto n = alloc<AddressOfNode>(DataType::kHandle, loc);
  n->buffer = buffer;
  n->indices = std::move(indices);
  return Expr(std::move(n));
}

Stmt StoreNode::make(const Buffer& buffer, std::vector<Expr> indices, Expr value, Loc loc) {
  check_indices(buffer, indices, loc, "store");
  require_defined(value, loc, "store", "value");
  auto n = alloc_stmt<StoreNode>(loc);
  n->buffer = buffer;
  n->indices = std::move(indices);
  n->value = std::move(value);
  return Stmt(std::move(n));
}

Stmt LetStmtNode::make(Expr var, Expr value, Stmt body, Loc loc) {
  require(var.as<VarNode>() != nullptr, loc, "let", "the bound name must be a Var");
  require(value.defined() && body.defined(), loc, "let", "value and body are required");
  auto n = alloc_stmt<LetStmtNode>(loc);
  n->var = var;
  n->value = value.type() == var.type() ? value : CastNode::make(var.type(), value, loc);
  n->body = std::move(body);
  return Stmt(std::move(n));
}

Stmt ForNode::make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body, Loc loc, int num_stages) {
  const char* what = for_kind_name(kind);
  require(var.as<VarNode>() != nullptr, loc, what, "the loop variable must be a Var");
  require(min.defined() && is_int(min.type()), loc, what, "the start must be an integer");
  require(extent.defined() && is_int(extent.type()), loc, what, "the extent must be an integer");
  require(body.defined(), loc, what, "the body is missing");
  require(num_stages >= 0, loc, what, "num_stages must be >= 0");
  auto n = alloc_stmt<ForNode>(loc);
  n->var = var;
  n->min = min;
  n->extent = extent;
  n->kind = kind;
  n->num_stages = num_stages;
  n->body = std::move(body);
  return Stmt(std::move(n));
}

Stmt IfThenElseNode::make(Expr cond, Stmt then_case, Stmt else_case, Loc loc) {
  require_defined(cond, loc, "if", "cond");
  require(then_case.defined(), loc, "if", "the then-branch is missing");
  auto n = alloc_stmt<IfThenElseNode>(loc);
  n->cond = to_bool(cond);
  n->then_case = std::move(then_case);
  n->else_case = std::move(else_case);
  return Stmt(std::move(n));
}

Stmt SeqNode::make(std::vector<Stmt> stmts, Loc loc) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const SeqNode* inner = s.as<SeqNode>()) {
      flat.insert(flat.end(), inner->stmts.begin(), inner->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  auto n = alloc_stmt<SeqNode>(loc);
  n->stmts = std::move(flat);
  return Stmt(std::move(n));
}

Stmt AllocateNode::make(const Buffer& buffer, Stmt body, Loc loc) {
  require(buffer != nullptr && body.defined(), loc, "allocate", "buffer and body are required");
  require(buffer->scope != Scope::kGlobal || buffer->address.defined(), loc, "allocate",
          "global buffers are kernel parameters (or T.make_tensor views)");
  auto n = alloc_stmt<AllocateNode>(loc);
  n->buffer = buffer;
  n->body = std::move(body);
  return Stmt(std::move(n));
}

Stmt EvaluateNode::make(Expr value, Loc loc) {
  require(value.defined(), loc, "evaluate", "value is missing");
  auto n = alloc_stmt<EvaluateNode>(loc);
  n->value = std::move(value);
  return Stmt(std::move(n));
}

Stmt LaunchNode::make(std::vector<Expr> grid, std::vector<Expr> block_vars, int threads, Stmt body, Loc loc) {
  require(!grid.empty() && grid.size() <= 3, loc, "T.Kernel", "the grid must have 1 to 3 dimensions");
  require(grid.size() == block_vars.size(), loc, "T.Kernel", "one block index per grid dimension");
  for (const Expr& g : grid) require(g.defined() && is_int(g.type()), loc, "T.Kernel", "grid extents must be integers");
  for (const Expr& v : block_vars) require(v.as<VarNode>() != nullptr, loc, "T.Kernel", "block indices must be Vars");
  require(body.defined(), loc, "T.Kernel", "the body is missing");
  auto n = alloc_stmt<LaunchNode>(loc);
  n->grid = std::move(grid);
  n->block_vars = std::move(block_vars);
  n->threads = threads;
  n->body = std::move(body);
  return Stmt(std::move(n));
}

Stmt CopyNode::make(Region src, Region dst, Loc loc) {
  check_region(src, loc, "T.copy (src)");
  check_region(dst, loc, "T.copy (dst)");
  auto n = alloc_stmt<CopyNode>(loc);
  n->src = std::move(src);
  n->dst = std::move(dst);
  return Stmt(std::move(n));
}

Stmt GemmNode::make(Region a, Region b, Region c, bool trans_a, bool trans_b, bool clear_accum, Loc loc) {
  check_region(a, loc, "T.gemm (A)");
  check_region(b, loc, "T.gemm (B)");
  check_region(c, loc, "T.gemm (C)");
  auto n = alloc_stmt<GemmNode>(loc);
  n->a = std::move(a);
  n->b = std::move(b);
  n->c = std::move(c);
  n->trans_a = trans_a;
  n->trans_b = trans_b;
  n->clear_accum = clear_accum;
  return Stmt(std::move(n));
}

Stmt FillNode::make(Region dst, Expr value, Loc loc) {
  check_region(dst, loc, "T.fill");
  require_defined(value, loc, "T.fill", "value");
  auto n = alloc_stmt<FillNode>(loc);
  n->dst = std::move(dst);
  n->value = std::move(value);
  return Stmt(std::move(n));
}

Stmt ReduceNode::make(ReduceKind op, Region src, Region dst, int dim, bool clear, Loc loc) {
  check_region(src, loc, "T.reduce (src)");
  check_region(dst, loc, "T.reduce (dst)");
  auto n = alloc_stmt<ReduceNode>(loc);
  n->op = op;
  n->src = std::move(src);
  n->dst = std::move(dst);
  n->dim = dim;
  n->clear = clear;
  return Stmt(std::move(n));
}

Stmt CumsumNode::make(Region src, Region dst, int dim, bool reverse, Loc loc) {
  check_region(src, loc, "T.cumsum (src)");
  check_region(dst, loc, "T.cumsum (dst)");
  auto n = alloc_stmt<CumsumNode>(loc);
  n->src = std::move(src);
  n->dst = std::move(dst);
  n->dim = dim;
  n->reverse = reverse;
  return Stmt(std::move(n));
}

Stmt AtomicNode::make(AtomicKind op, Region dst, Region src, Expr value, Loc loc) {
  check_region(dst, loc, "T.atomic (dst)");
  require(src.buffer != nullptr || value.defined(), loc, "T.atomic", "needs a source region or a value");
  if (src.buffer) check_region(src, loc, "T.atomic (src)");
  if (value.defined()) require_defined(value, loc, "T.atomic", "value");
  auto n = alloc_stmt<AtomicNode>(loc);
  n->op = op;
  n->dst = std::move(dst);
  n->src = std::move(src);
  n->value = std::move(value);
  return Stmt(std::move(n));
}

}  // namespace tessera::tl
