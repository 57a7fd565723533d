// CPU lowerings: gemm on the packed micro-kernels (tlrt::gemm -> libtessera), row reductions with the
// vectorized helpers of the runtime header, and real atomics (compare-and-swap on the element).
#include "tl/passes/lower/lower_utils.h"
#include "tl/passes/region_utils.h"
#include "tl/passes/simplify.h"
#include "tl/passes/tile_op_registry.h"

namespace tessera::tl {
namespace {

const char* suffix(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "f32";
    case DataType::kFloat64:
      return "f64";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat16:
      return "f16";
    case DataType::kFloat8E4M3:
      return "e4m3";
    case DataType::kFloat8E5M2:
      return "e5m2";
    case DataType::kFloat4E2M1:
      return "e2m1";
    case DataType::kInt8:
      return "i8";
    case DataType::kUInt8:
      return "u8";
    case DataType::kInt16:
      return "i16";
    case DataType::kUInt16:
      return "u16";
    case DataType::kInt32:
      return "i32";
    case DataType::kUInt32:
      return "u32";
    case DataType::kInt64:
      return "i64";
    case DataType::kUInt64:
      return "u64";
    default:
      return nullptr;
  }
}

Expr int64c(int64_t v) {
  return IntImmNode::make(DataType::kInt64, v);
}
Expr int32c(int64_t v) {
  return IntImmNode::make(DataType::kInt32, v);
}

// ---- gemm ----
std::string refuse_gemm(const Stmt& s, const Target&) {
  const GemmNode* op = s.as<GemmNode>();
  if (op->c.buffer->dtype != DataType::kFloat32)
    return std::string("the accumulator C must be float32, got ") + type_name(op->c.buffer->dtype);
  for (const Region* r : {&op->a, &op->b}) {
    const DataType t = r->buffer->dtype;
    if (!is_float(t) || t == DataType::kFloat64 || t == DataType::kFloat4E2M1)
      return std::string("operand dtype ") + type_name(t) + " (the micro-kernels take float32/16, bfloat16, float8)";
  }
  for (const Region* r : {&op->a, &op->b, &op->c}) {
    int64_t e;
    for (const Expr& x : r->extent)
      if (!is_const_int(x, &e)) return "tile extents must be constants";
  }
  return "";
}

// A 2-D tile of a region: its (up to two) non-unit dims as rows and columns, their strides, and how
// many rows / columns exist (a global tile may overhang the tensor; on-chip tiles always exist whole).
struct Matrix {
  Expr ptr, row_stride, col_stride, rows_valid, cols_valid;
  int64_t rows = 1, cols = 1;
};

Matrix matrix_of(const Region& r, Loc loc) {
  Matrix m;
  const std::vector<int> dims = tile_dims(r);
  const int cd = dims.empty() ? int(r.extent.size()) - 1 : dims.back();
  const int rd = dims.size() >= 2 ? dims[dims.size() - 2] : -1;
  is_const_int(r.extent[size_t(cd)], &m.cols);
  if (rd >= 0) is_const_int(r.extent[size_t(rd)], &m.rows);
  m.ptr = AddressOfNode::make(r.buffer, r.min, loc);
  m.col_stride = CastNode::make(DataType::kInt64, r.buffer->strides[size_t(cd)]);
  m.row_stride = rd >= 0 ? CastNode::make(DataType::kInt64, r.buffer->strides[size_t(rd)]) : int64c(0);
  m.rows_valid = int32c(m.rows);
  m.cols_valid = int32c(m.cols);
  if (r.buffer->scope != Scope::kGlobal) return m;
  auto remaining = [&](int d) {  // elements of dim d from the tile start to the tensor edge
    return BinaryNode::make(BinOp::kSub, r.buffer->shape[size_t(d)], r.min[size_t(d)], loc);
  };
  m.cols_valid = simplify(remaining(cd));
  if (rd >= 0) m.rows_valid = simplify(remaining(rd));
  Expr inside;  // the unit dims must be inside the tensor too, else nothing of the tile exists
  for (size_t d = 0; d < r.extent.size(); ++d) {
    if (int(d) == cd || int(d) == rd) continue;
    const Expr c = CompareNode::make(CmpOp::kLT, r.min[d], r.buffer->shape[d], loc);
    inside = inside.defined() ? LogicalNode::make(true, inside, c, loc) : c;
  }
  if (inside.defined()) m.rows_valid = SelectNode::make(inside, m.rows_valid, int32c(0), loc);
  return m;
}

Stmt lower_gemm(const Stmt& s, const Target&) {
  const GemmNode* op = s.as<GemmNode>();
  const Loc loc = op->loc;
  const Matrix a = matrix_of(op->a, loc), b = matrix_of(op->b, loc), c = matrix_of(op->c, loc);
  const int64_t k = op->trans_a ? a.rows : a.cols;
  // A as [M, K] and B as [N, K] through strides; a transpose swaps an operand's rows and columns.
  const Expr a_sm = op->trans_a ? a.col_stride : a.row_stride, a_sk = op->trans_a ? a.row_stride : a.col_stride;
  const Expr a_rows = op->trans_a ? a.cols_valid : a.rows_valid, a_ks = op->trans_a ? a.rows_valid : a.cols_valid;
  const Expr b_sn = op->trans_b ? b.row_stride : b.col_stride, b_sk = op->trans_b ? b.col_stride : b.row_stride;
  const Expr b_rows = op->trans_b ? b.rows_valid : b.cols_valid, b_ks = op->trans_b ? b.cols_valid : b.rows_valid;
  const std::vector<Expr> args = {runtime_handle(),
                                  a.ptr,
                                  int32c(int(op->a.buffer->dtype)),
                                  a_sm,
                                  a_sk,
                                  b.ptr,
                                  int32c(int(op->b.buffer->dtype)),
                                  b_sn,
                                  b_sk,
                                  c.ptr,
                                  c.row_stride,
                                  int32c(c.rows),
                                  int32c(c.cols),
                                  int32c(k),
                                  int32c(op->clear_accum ? 1 : 0),
                                  CastNode::make(DataType::kInt32, a_rows),
                                  CastNode::make(DataType::kInt32, a_ks),
                                  CastNode::make(DataType::kInt32, b_rows),
                                  CastNode::make(DataType::kInt32, b_ks)};
  return EvaluateNode::make(CallNode::make_extern(DataType::kInt32, "tlrt::gemm", args, loc), loc);
}

// ---- reduce along the contiguous last dim ----
std::string refuse_reduce(const Stmt& s, const Target&) {
  const ReduceNode* op = s.as<ReduceNode>();
  if (op->dim != int(op->src.extent.size()) - 1) return "only reductions along the last (contiguous) dim";
  if (!suffix(op->src.buffer->dtype)) return std::string("dtype ") + type_name(op->src.buffer->dtype);
  return "";
}

Stmt lower_reduce(const Stmt& s, const Target&) {
  const ReduceNode* op = s.as<ReduceNode>();
  const Loc loc = op->loc;
  static const char* const kOps[] = {"tlrt::kMax", "tlrt::kMin", "tlrt::kSum", "tlrt::kAbsSum", "tlrt::kAbsMax"};
  const std::string fn = std::string("tlrt::reduce_") + suffix(op->src.buffer->dtype) + "<" + kOps[int(op->op)] + ">";
  const Region& src = op->src;
  std::vector<int> others;
  std::vector<Expr> extents;
  for (int d = 0; d + 1 < int(src.extent.size()); ++d) others.push_back(d), extents.push_back(src.extent[size_t(d)]);
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
        const Expr row = CallNode::make_extern(compute_type(src.buffer->dtype), fn,
                                               {AddressOfNode::make(src.buffer, si, loc),
                                                CastNode::make(DataType::kInt64, src.extent.back(), loc), int64c(1)},
                                               loc);
        const std::vector<Expr> di = region_index(op->dst, tile);
        const Expr value = op->clear ? row
                                     : reduce_combine(op->op == ReduceKind::kAbsSum   ? ReduceKind::kSum
                                                      : op->op == ReduceKind::kAbsMax ? ReduceKind::kMax
                                                                                      : op->op,
                                                      LoadNode::make(op->dst.buffer, di, loc), row, loc);
        return StoreNode::make(op->dst.buffer, di, value, loc);
      },
      loc, ForKind::kSerial);
}

// ---- atomics ----
bool has_atomic(DataType t) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kBFloat16:
    case DataType::kFloat16:
    case DataType::kInt32:
    case DataType::kUInt32:
    case DataType::kInt64:
    case DataType::kUInt64:
      return true;
    default:
      return false;
  }
}

std::string refuse_atomic(const Stmt& s, const Target&) {
  const AtomicNode* op = s.as<AtomicNode>();
  if (!has_atomic(op->dst.buffer->dtype))
    return std::string("no atomic read-modify-write for dtype ") + type_name(op->dst.buffer->dtype);
  return "";
}

Stmt lower_atomic(const Stmt& s, const Target&) {
  const AtomicNode* op = s.as<AtomicNode>();
  const Loc loc = op->loc;
  const DataType dt = op->dst.buffer->dtype;
  const std::string fn = std::string("tlrt::atomic_") + atomic_kind_name(op->op) + "_" + suffix(dt);
  auto call = [&](const std::vector<Expr>& dst_idx, const Expr& value) {
    return EvaluateNode::make(
        CallNode::make_extern(
            DataType::kInt32, fn,
            {AddressOfNode::make(op->dst.buffer, dst_idx, loc), CastNode::make(compute_type(dt), value, loc)}, loc),
        loc);
  };
  if (!op->src.buffer) return call(op->dst.min, op->value);
  return loop_nest(
      tile_extents(op->dst),
      [&](const std::vector<Expr>& v) {
        return call(region_index(op->dst, v), LoadNode::make(op->src.buffer, region_index(op->src, v), loc));
      },
      loc);
}

// ---- copy: a global tile of short rows prefetches its rows ahead ----
// A tile whose rows are short pieces of longer tensor rows (a transpose's source, a cast's 1 x 128 blocks)
// reads a few cache lines per row, a tensor row apart: the hardware prefetcher does not cross the page
// and restarts on every row, so the copy waits on DRAM row after row. Each row iteration prefetches the
// row kPrefetchRows ahead. Rows longer than kPrefetchMaxRowBytes keep the plain copy (the hardware
// prefetcher follows them).
constexpr int64_t kPrefetchRows = 16;
constexpr int64_t kPrefetchMaxRowBytes = 1024;

std::string refuse_copy(const Stmt& s, const Target&) {
  const CopyNode* op = s.as<CopyNode>();
  if (op->src.buffer->scope != Scope::kGlobal) return "the source is not a global tensor";
  const std::vector<int> dims = tile_dims(op->src);
  if (dims.size() != 2 || size_t(dims[1]) + 1 != op->src.extent.size() || tile_dims(op->dst).size() != 2)
    return "not a 2-D tile of row pieces";
  int64_t rows = 0, cols = 0;
  if (!is_const_int(op->src.extent[size_t(dims[0])], &rows) || !is_const_int(op->src.extent[size_t(dims[1])], &cols))
    return "the tile's extents are not constants";
  if (rows < 2 * kPrefetchRows) return "fewer than " + std::to_string(2 * kPrefetchRows) + " rows";
  if (cols * type_bytes(op->src.buffer->dtype) > kPrefetchMaxRowBytes)
    return "rows longer than " + std::to_string(kPrefetchMaxRowBytes) + " bytes";
  return "";
}

Stmt lower_copy(const Stmt& s, const Target&) {
  const CopyNode* op = s.as<CopyNode>();
  const Loc loc = op->loc;
  const std::vector<Expr> extents = tile_extents(op->dst);
  const Expr row = VarNode::make("i0", DataType::kInt32, loc), col = VarNode::make("i1", DataType::kInt32, loc);
  const Stmt copy =
      ForNode::make(col, make_int(0, loc), extents[1], ForKind::kParallel,
                    StoreNode::make(op->dst.buffer, region_index(op->dst, {row, col}),
                                    LoadNode::make(op->src.buffer, region_index(op->src, {row, col}), loc), loc),
                    loc);
  // the source row of this iteration, as a one-row region, prefetched kPrefetchRows iterations ahead
  Region src_row = op->src;
  const size_t row_dim = size_t(tile_dims(op->src)[0]);
  src_row.min[row_dim] = simplify(BinaryNode::make(BinOp::kAdd, src_row.min[row_dim], row, loc));
  src_row.extent[row_dim] = make_int(1, loc);
  const Stmt prefetch = prefetch_rows_ahead(src_row, row, kPrefetchRows, loc);
  const Expr ahead = BinaryNode::make(BinOp::kAdd, row, make_int(kPrefetchRows, loc), loc);
  const Stmt body = SeqNode::make(
      {IfThenElseNode::make(CompareNode::make(CmpOp::kLT, ahead, extents[0], loc), prefetch, {}, loc), copy}, loc);
  return ForNode::make(row, make_int(0, loc), extents[0], ForKind::kParallel, body, loc);
}

}  // namespace

void register_cpu_tile_ops(std::vector<TileOpImpl>* out) {
  out->push_back({"cpu", NodeKind::kCopy, "cpu.copy_prefetch_rows", 10, refuse_copy, lower_copy});
  out->push_back({"cpu", NodeKind::kGemm, "cpu.gemm_microkernel", 10, refuse_gemm, lower_gemm});
  out->push_back({"cpu", NodeKind::kReduce, "cpu.reduce_rows", 10, refuse_reduce, lower_reduce});
  out->push_back({"cpu", NodeKind::kAtomic, "cpu.atomic_cas", 10, refuse_atomic, lower_atomic});
}

}  // namespace tessera::tl
