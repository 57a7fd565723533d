// The portable lowerings every target starts from: element loops for copy, fill, reduce, cumsum and gemm.
// They are correct for every dtype and scope; targets register faster ones with a higher priority.
#include "tl/passes/lower/lower_utils.h"
#include "tl/passes/region_utils.h"
#include "tl/passes/simplify.h"
#include "tl/passes/tile_op_registry.h"

namespace tessera::tl {
namespace {

Stmt lower_copy(const Stmt& s, const Target&) {
  const CopyNode* op = s.as<CopyNode>();
  const std::vector<Expr> extents = tile_extents(op->dst);
  return loop_nest(
      extents,
      [&](const std::vector<Expr>& v) {
        return StoreNode::make(op->dst.buffer, region_index(op->dst, v),
                               LoadNode::make(op->src.buffer, region_index(op->src, v), op->loc), op->loc);
      },
      op->loc);
}

Stmt lower_fill(const Stmt& s, const Target&) {
  const FillNode* op = s.as<FillNode>();
  return loop_nest(
      tile_extents(op->dst),
      [&](const std::vector<Expr>& v) {
        return StoreNode::make(op->dst.buffer, region_index(op->dst, v), op->value, op->loc);
      },
      op->loc);
}

// Loops over every src dim except `dim`; fn gets the src index (with `dim` at `at`) and the dst index.
Stmt over_others(const ReduceNode* op, const Expr& at,
                 const std::function<Stmt(const std::vector<Expr>&, const std::vector<Expr>&)>& fn) {
  const Region& src = op->src;
  std::vector<int> others;
  std::vector<Expr> extents;
  for (int d = 0; d < int(src.extent.size()); ++d)
    if (d != op->dim) others.push_back(d), extents.push_back(src.extent[size_t(d)]);
  return loop_nest(
      extents,
      [&](const std::vector<Expr>& v) {
        std::vector<Expr> si = src.min, tile;
        for (size_t i = 0; i < others.size(); ++i) {
          const size_t d = size_t(others[i]);
          si[d] = simplify(BinaryNode::make(BinOp::kAdd, src.min[d], v[i]));
          int64_t e;
          if (!(is_const_int(src.extent[d], &e) && e == 1)) tile.push_back(v[i]);
        }
        si[size_t(op->dim)] = simplify(BinaryNode::make(BinOp::kAdd, src.min[size_t(op->dim)], at));
        return fn(si, region_index(op->dst, tile));
      },
      op->loc);
}

Stmt lower_reduce(const Stmt& s, const Target&) {
  const ReduceNode* op = s.as<ReduceNode>();
  const Loc loc = op->loc;
  std::vector<Stmt> out;
  if (op->clear) {
    out.push_back(over_others(op, make_int(0), [&](const std::vector<Expr>&, const std::vector<Expr>& di) {
      return StoreNode::make(op->dst.buffer, di, reduce_identity(op->op, op->src.buffer->dtype, loc), loc);
    }));
  }
  const Expr r = VarNode::make("r", DataType::kInt32, loc);
  Stmt step = over_others(op, r, [&](const std::vector<Expr>& si, const std::vector<Expr>& di) {
    const Expr acc = LoadNode::make(op->dst.buffer, di, loc);
    return StoreNode::make(op->dst.buffer, di,
                           reduce_combine(op->op, acc, LoadNode::make(op->src.buffer, si, loc), loc), loc);
  });
  out.push_back(ForNode::make(r, make_int(0), op->src.extent[size_t(op->dim)], ForKind::kSerial, step, loc));
  return SeqNode::make(out, loc);
}

Stmt lower_cumsum(const Stmt& s, const Target&) {
  const CumsumNode* op = s.as<CumsumNode>();
  const Loc loc = op->loc;
  const size_t dim = size_t(op->dim);
  const Expr n = op->src.extent[dim];
  const Expr k = VarNode::make("k", DataType::kInt32, loc);
  // position along dim: k, or n - 1 - k when reversed; the previous element is one step back.
  const Expr pos =
      op->reverse ? simplify(BinaryNode::make(BinOp::kSub, BinaryNode::make(BinOp::kSub, n, make_int(1)), k)) : k;
  const Expr prev =
      op->reverse ? BinaryNode::make(BinOp::kAdd, pos, make_int(1)) : BinaryNode::make(BinOp::kSub, pos, make_int(1));
  std::vector<int> others;
  std::vector<Expr> extents;
  for (int d = 0; d < int(op->src.extent.size()); ++d)
    if (d != op->dim) others.push_back(d), extents.push_back(op->src.extent[size_t(d)]);
  auto at = [&](const Region& r, const std::vector<Expr>& v, const Expr& along) {
    std::vector<Expr> idx = r.min;
    for (size_t i = 0; i < others.size(); ++i)
      idx[size_t(others[i])] = simplify(BinaryNode::make(BinOp::kAdd, r.min[size_t(others[i])], v[i]));
    idx[dim] = simplify(BinaryNode::make(BinOp::kAdd, r.min[dim], along));
    return idx;
  };
  Stmt body = loop_nest(
      extents,
      [&](const std::vector<Expr>& v) {
        const Expr carried = SelectNode::make(CompareNode::make(CmpOp::kGT, k, make_int(0)),
                                              LoadNode::make(op->dst.buffer, at(op->dst, v, prev), loc),
                                              make_const(op->dst.buffer->dtype, 0, loc), loc);
        const Expr value =
            BinaryNode::make(BinOp::kAdd, LoadNode::make(op->src.buffer, at(op->src, v, pos), loc), carried, loc);
        return StoreNode::make(op->dst.buffer, at(op->dst, v, pos), value, loc);
      },
      loc);
  return ForNode::make(k, make_int(0), n, ForKind::kSerial, body, loc);
}

Stmt lower_gemm(const Stmt& s, const Target&) {
  const GemmNode* op = s.as<GemmNode>();
  const Loc loc = op->loc;
  const size_t nc = op->c.extent.size();
  const Expr m = nc >= 2 ? op->c.extent[nc - 2] : make_int(1), n = op->c.extent[nc - 1];
  const size_t na = op->a.extent.size();
  const Expr k = op->trans_a ? (na >= 2 ? op->a.extent[na - 2] : make_int(1)) : op->a.extent[na - 1];
  std::vector<Stmt> out;
  if (op->clear_accum) {
    out.push_back(loop_nest(
        {m, n},
        [&](const std::vector<Expr>& v) {
          return StoreNode::make(op->c.buffer, matrix_index(op->c, v[0], v[1]), make_const(op->c.buffer->dtype, 0, loc),
                                 loc);
        },
        loc));
  }
  const Expr kk = VarNode::make("kk", DataType::kInt32, loc);
  out.push_back(loop_nest(
      {m, n},
      [&](const std::vector<Expr>& v) {
        const Expr a = LoadNode::make(op->a.buffer,
                                      op->trans_a ? matrix_index(op->a, kk, v[0]) : matrix_index(op->a, v[0], kk), loc);
        const Expr b = LoadNode::make(op->b.buffer,
                                      op->trans_b ? matrix_index(op->b, v[1], kk) : matrix_index(op->b, kk, v[1]), loc);
        const std::vector<Expr> ci = matrix_index(op->c, v[0], v[1]);
        const Expr prod = BinaryNode::make(BinOp::kMul, CastNode::make(DataType::kFloat32, a, loc),
                                           CastNode::make(DataType::kFloat32, b, loc), loc);
        Stmt acc = StoreNode::make(
            op->c.buffer, ci, BinaryNode::make(BinOp::kAdd, LoadNode::make(op->c.buffer, ci, loc), prod, loc), loc);
        return ForNode::make(kk, make_int(0), k, ForKind::kSerial, acc, loc);
      },
      loc, ForKind::kSerial));
  return SeqNode::make(out, loc);
}

}  // namespace

void register_reference_tile_ops(std::vector<TileOpImpl>* out) {
  out->push_back({"", NodeKind::kCopy, "reference.copy", 0, nullptr, lower_copy});
  out->push_back({"", NodeKind::kFill, "reference.fill", 0, nullptr, lower_fill});
  out->push_back({"", NodeKind::kReduce, "reference.reduce", 0, nullptr, lower_reduce});
  out->push_back({"", NodeKind::kCumsum, "reference.cumsum", 0, nullptr, lower_cumsum});
  out->push_back({"", NodeKind::kGemm, "reference.gemm", 0, nullptr, lower_gemm});
}

}  // namespace tessera::tl
