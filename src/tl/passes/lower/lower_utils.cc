// Building blocks of tile-op lowerings (see lower_utils.h).
#include "tl/passes/lower/lower_utils.h"

#include <limits>

#include "tl/passes/simplify.h"

namespace tessera::tl {

Stmt loop_nest(const std::vector<Expr>& extents, const std::function<Stmt(const std::vector<Expr>&)>& body, Loc loc,
               ForKind kind, const char* prefix) {
  std::vector<Expr> vars;
  for (size_t d = 0; d < extents.size(); ++d)
    vars.push_back(VarNode::make(std::string(prefix) + std::to_string(d), DataType::kInt32, loc));
  Stmt s = body(vars);
  for (size_t d = extents.size(); d-- > 0;) s = ForNode::make(vars[d], make_int(0, loc), extents[d], kind, s, loc);
  return s;
}

std::vector<Expr> matrix_index(const Region& r, const Expr& row, const Expr& col) {
  std::vector<Expr> idx = r.min;
  const size_t n = idx.size();
  if (n == 1) {
    idx[0] = simplify(BinaryNode::make(BinOp::kAdd, idx[0], col));
    return idx;
  }
  idx[n - 2] = simplify(BinaryNode::make(BinOp::kAdd, idx[n - 2], row));
  idx[n - 1] = simplify(BinaryNode::make(BinOp::kAdd, idx[n - 1], col));
  return idx;
}

Expr reduce_identity(ReduceKind op, DataType t, Loc loc) {
  const DataType ct = compute_type(t);
  const bool f = is_float(ct);
  switch (op) {
    case ReduceKind::kMax:
      if (f) return FloatImmNode::make(ct, -std::numeric_limits<double>::infinity(), loc);
      return IntImmNode::make(ct,
                              is_signed_int(ct) ? (ct == DataType::kInt64 ? std::numeric_limits<int64_t>::min()
                                                                          : std::numeric_limits<int32_t>::min())
                                                : 0,
                              loc);
    case ReduceKind::kMin:
      if (f) return FloatImmNode::make(ct, std::numeric_limits<double>::infinity(), loc);
      return IntImmNode::make(ct,
                              ct == DataType::kInt64    ? std::numeric_limits<int64_t>::max()
                              : ct == DataType::kUInt32 ? int64_t(std::numeric_limits<uint32_t>::max())
                                                        : std::numeric_limits<int32_t>::max(),
                              loc);
    default:
      return make_const(ct, 0, loc);
  }
}

Expr reduce_combine(ReduceKind op, const Expr& acc, const Expr& value, Loc loc) {
  switch (op) {
    case ReduceKind::kSum:
      return BinaryNode::make(BinOp::kAdd, acc, value, loc);
    case ReduceKind::kAbsSum:
      return BinaryNode::make(BinOp::kAdd, acc, CallNode::make(Intrinsic::kAbs, {value}, loc), loc);
    case ReduceKind::kMax:
      return BinaryNode::make(BinOp::kMax, acc, value, loc);
    case ReduceKind::kMin:
      return BinaryNode::make(BinOp::kMin, acc, value, loc);
    case ReduceKind::kAbsMax:
      return BinaryNode::make(BinOp::kMax, acc, CallNode::make(Intrinsic::kAbs, {value}, loc), loc);
  }
  return acc;
}

}  // namespace tessera::tl
