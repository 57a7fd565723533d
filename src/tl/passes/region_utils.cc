// Region helpers (see region_utils.h).
#include "tl/passes/region_utils.h"

#include "tl/ir/visitor.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {

std::vector<int> tile_dims(const Region& r) {
  std::vector<int> dims;
  for (size_t d = 0; d < r.extent.size(); ++d) {
    int64_t e;
    if (!(is_const_int(r.extent[d], &e) && e == 1)) dims.push_back(int(d));
  }
  return dims;
}

std::vector<Expr> tile_extents(const Region& r) {
  std::vector<Expr> out;
  for (int d : tile_dims(r)) out.push_back(r.extent[size_t(d)]);
  return out;
}

std::string extents_str(const std::vector<Expr>& extents) {
  std::string s = "[";
  for (size_t i = 0; i < extents.size(); ++i) {
    if (i) s += ", ";
    int64_t v;
    if (is_const_int(extents[i], &v)) {
      s += std::to_string(v);
    } else if (const VarNode* var = extents[i].as<VarNode>()) {
      s += var->name;
    } else {
      s += "<expr>";
    }
  }
  return s + "]";
}

bool same_extent(const Expr& a, const Expr& b) {
  int64_t x, y;
  if (is_const_int(a, &x) && is_const_int(b, &y)) return x == y;
  int64_t d;
  return is_const_int(simplify(BinaryNode::make(BinOp::kSub, a, b)), &d) && d == 0;
}

std::vector<Expr> region_index(const Region& r, const std::vector<Expr>& tile_index) {
  const std::vector<int> dims = tile_dims(r);
  std::vector<Expr> idx = r.min;
  for (size_t i = 0; i < dims.size() && i < tile_index.size(); ++i) {
    const size_t d = size_t(dims[i]);
    int64_t m;
    idx[d] =
        is_const_int(r.min[d], &m) && m == 0 ? tile_index[i] : BinaryNode::make(BinOp::kAdd, r.min[d], tile_index[i]);
  }
  return idx;
}

bool covers_whole(const Region& r) {
  for (size_t d = 0; d < r.min.size(); ++d) {
    int64_t m, e, s;
    if (!is_const_int(r.min[d], &m) || m != 0 || !is_const_int(r.extent[d], &e) ||
        !is_const_int(r.buffer->shape[d], &s) || e != s)
      return false;
  }
  return true;
}

Stmt prefetch_rows_ahead(const Region& src, const Expr& var, int64_t dist, Loc loc) {
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

}  // namespace tessera::tl
