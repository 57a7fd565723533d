// Tile-op shape inference and checking (see infer_regions.h).
#include "tl/passes/infer_regions.h"

#include "tl/ir/visitor.h"
#include "tl/passes/region_utils.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

std::string buffer_str(const Region& r) {
  return std::string(scope_name(r.buffer->scope)) + " '" + r.buffer->name + "'";
}

Region simplified(Region r) {
  for (Expr& e : r.min) e = simplify(e);
  for (Expr& e : r.extent)
    if (e.defined()) e = simplify(e);
  return r;
}

// Gives a corner operand the extents of the other operand (equal rank: all of them; otherwise its tile
// dims, aligned to the corner's trailing dims).
Region fill_corner(Region corner, const Region& other, Loc loc, const char* op, const char* role) {
  const size_t rank = corner.min.size();
  if (other.min.size() == rank) {
    corner.extent = other.extent;
    return corner;
  }
  const std::vector<Expr> e = tile_extents(other);
  if (e.size() > rank)
    fail_at(loc, std::string(op) + ": cannot place a tile of shape " + extents_str(e) + " at the element " +
                     buffer_str(corner) + "[...] of rank " + std::to_string(rank) + "; pass a slice");
  corner.extent.assign(rank - e.size(), make_int(1));
  corner.extent.insert(corner.extent.end(), e.begin(), e.end());
  return corner;
}

// Constant tiles of on-chip buffers must lie inside the buffer.
void check_inside(const Region& r, Loc loc, const char* op) {
  if (r.buffer->scope == Scope::kGlobal) return;
  for (size_t d = 0; d < r.min.size(); ++d) {
    int64_t mn, ext, size;
    if (!is_const_int(r.min[d], &mn) || !is_const_int(r.extent[d], &ext) || !is_const_int(r.buffer->shape[d], &size))
      continue;
    if (mn < 0 || ext < 0 || mn + ext > size)
      fail_at(loc, std::string(op) + ": out-of-range constant tile: dimension " + std::to_string(d) + " of " +
                       buffer_str(r) + " covers [" + std::to_string(mn) + ", " + std::to_string(mn + ext) +
                       ") but the buffer has " + std::to_string(size));
  }
}

void check_same_tile(const Region& a, const Region& b, Loc loc, const char* op, const char* ra, const char* rb) {
  const std::vector<Expr> ea = tile_extents(a), eb = tile_extents(b);
  bool same = ea.size() == eb.size();
  for (size_t i = 0; same && i < ea.size(); ++i) same = same_extent(ea[i], eb[i]);
  if (!same)
    fail_at(loc, std::string(op) + ": shape mismatch: " + ra + " " + buffer_str(a) + " tile is " + extents_str(ea) +
                     ", " + rb + " " + buffer_str(b) + " tile is " + extents_str(eb));
}

int normalize_dim(int dim, size_t rank, Loc loc, const char* op) {
  const int r = int(rank);
  if (dim < -r || dim >= r)
    fail_at(loc, std::string(op) + ": dim " + std::to_string(dim) + " is out of range for a " + std::to_string(r) +
                     "-D buffer");
  return dim < 0 ? dim + r : dim;
}

void require_known(const Region& r, Loc loc, const char* op, const char* role) {
  if (!r.extents_known())
    fail_at(loc, std::string(op) + ": " + role + " " + buffer_str(r) +
                     " is a single element; pass the whole buffer or a slice");
}

// The (rows, cols) of a gemm operand: its last two dims; leading dims must be 1.
void matrix_dims(const Region& r, Loc loc, const char* role, Expr* rows, Expr* cols) {
  const size_t n = r.extent.size();
  if (n == 1) {
    *rows = make_int(1);
    *cols = r.extent[0];
    return;
  }
  for (size_t d = 0; d + 2 < n; ++d) {
    int64_t e;
    if (!is_const_int(r.extent[d], &e) || e != 1)
      fail_at(loc, std::string("T.gemm: ") + role + " " + buffer_str(r) + " must be a 2-D tile, got " +
                       extents_str(r.extent));
  }
  *rows = r.extent[n - 2];
  *cols = r.extent[n - 1];
}

class InferRegions : public IRMutator {
 protected:
  Stmt mutate_Copy(const CopyNode* op, const Stmt& self) override {
    Region s = op->src, d = op->dst;
    if (!s.extents_known() && !d.extents_known())
      fail_at(op->loc, "T.copy: cannot infer the copy extent: both " + buffer_str(s) + " and " + buffer_str(d) +
                           " are single elements; pass a whole buffer or a slice on one side");
    if (!s.extents_known()) s = fill_corner(s, d, op->loc, "T.copy", "src");
    if (!d.extents_known()) d = fill_corner(d, s, op->loc, "T.copy", "dst");
    s = simplified(s), d = simplified(d);
    check_same_tile(s, d, op->loc, "T.copy", "src", "dst");
    check_inside(s, op->loc, "T.copy");
    check_inside(d, op->loc, "T.copy");
    (void)self;
    return CopyNode::make(s, d, op->loc);
  }

  Stmt mutate_Gemm(const GemmNode* op, const Stmt& self) override {
    const char* roles[] = {"A", "B", "C"};
    Region r[3] = {op->a, op->b, op->c};
    for (int i = 0; i < 3; ++i) {
      require_known(r[i], op->loc, "T.gemm", roles[i]);
      r[i] = simplified(r[i]);
      check_inside(r[i], op->loc, "T.gemm");
    }
    Expr a0, a1, b0, b1, c0, c1;
    matrix_dims(r[0], op->loc, "A", &a0, &a1);
    matrix_dims(r[1], op->loc, "B", &b0, &b1);
    matrix_dims(r[2], op->loc, "C", &c0, &c1);
    const Expr m = op->trans_a ? a1 : a0, ka = op->trans_a ? a0 : a1;
    const Expr kb = op->trans_b ? b1 : b0, n = op->trans_b ? b0 : b1;
    auto shapes = [&] {
      return "A " + extents_str(tile_or_all(r[0])) + (op->trans_a ? " (transposed)" : "") + ", B " +
             extents_str(tile_or_all(r[1])) + (op->trans_b ? " (transposed)" : "") + ", C " +
             extents_str(tile_or_all(r[2]));
    };
    if (!same_extent(ka, kb)) fail_at(op->loc, "T.gemm: shape mismatch: K of A and K of B differ: " + shapes());
    if (!same_extent(m, c0)) fail_at(op->loc, "T.gemm: shape mismatch: M of A and rows of C differ: " + shapes());
    if (!same_extent(n, c1)) fail_at(op->loc, "T.gemm: shape mismatch: N of B and columns of C differ: " + shapes());
    (void)self;
    return GemmNode::make(r[0], r[1], r[2], op->trans_a, op->trans_b, op->clear_accum, op->loc);
  }

  Stmt mutate_Fill(const FillNode* op, const Stmt& self) override {
    require_known(op->dst, op->loc, "T.fill", "dst");
    Region d = simplified(op->dst);
    check_inside(d, op->loc, "T.fill");
    (void)self;
    return FillNode::make(d, op->value, op->loc);
  }

  Stmt mutate_Reduce(const ReduceNode* op, const Stmt& self) override {
    const std::string name = std::string("T.reduce_") + reduce_kind_name(op->op);
    require_known(op->src, op->loc, name.c_str(), "src");
    require_known(op->dst, op->loc, name.c_str(), "dst");
    Region s = simplified(op->src), d = simplified(op->dst);
    const int dim = normalize_dim(op->dim, s.extent.size(), op->loc, name.c_str());
    Region expected = s;
    expected.min.erase(expected.min.begin() + dim);
    expected.extent.erase(expected.extent.begin() + dim);
    if (expected.extent.empty()) expected.extent.push_back(make_int(1)), expected.min.push_back(make_int(0));
    check_same_tile(expected, d, op->loc, name.c_str(), "src (without the reduced dim)", "dst");
    (void)self;
    return ReduceNode::make(op->op, s, d, dim, op->clear, op->loc);
  }

  Stmt mutate_Cumsum(const CumsumNode* op, const Stmt& self) override {
    require_known(op->src, op->loc, "T.cumsum", "src");
    Region s = simplified(op->src);
    Region d =
        op->dst.extents_known() ? simplified(op->dst) : simplified(fill_corner(op->dst, s, op->loc, "T.cumsum", "dst"));
    check_same_tile(s, d, op->loc, "T.cumsum", "src", "dst");
    const int dim = normalize_dim(op->dim, s.extent.size(), op->loc, "T.cumsum");
    (void)self;
    return CumsumNode::make(s, d, dim, op->reverse, op->loc);
  }

  Stmt mutate_Atomic(const AtomicNode* op, const Stmt& self) override {
    const std::string name = std::string("T.atomic_") + atomic_kind_name(op->op);
    Region d = op->dst, s = op->src;
    if (s.buffer) {
      require_known(s, op->loc, name.c_str(), "src");
      if (!d.extents_known()) d = fill_corner(d, s, op->loc, name.c_str(), "dst");
      s = simplified(s), d = simplified(d);
      check_same_tile(s, d, op->loc, name.c_str(), "src", "dst");
      check_inside(s, op->loc, name.c_str());
    } else {
      if (!d.extents_known()) d.extent.assign(d.min.size(), make_int(1));
      d = simplified(d);
      if (!tile_dims(d).empty())
        fail_at(op->loc, name + ": a scalar value needs a single destination element, got the tile " +
                             extents_str(tile_extents(d)) + " of " + buffer_str(d));
    }
    check_inside(d, op->loc, name.c_str());
    (void)self;
    return AtomicNode::make(op->op, d, s, op->value, op->loc);
  }

 private:
  static std::vector<Expr> tile_or_all(const Region& r) { return r.extent; }
};

}  // namespace

Stmt infer_regions(const Stmt& s) {
  return InferRegions().mutate(s);
}

}  // namespace tessera::tl
