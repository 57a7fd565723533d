// Row sweep (see row_sweep.h).
#include "tl/passes/row_sweep.h"

#include <utility>
#include <vector>

#include "tl/ir/visitor.h"
#include "tl/passes/linear.h"

namespace tessera::tl {
namespace {

// Flattened element offset of a global access (strides are expressions; the last one is 1).
Expr flat_offset(const Buffer& b, const std::vector<Expr>& indices) {
  Expr off;
  for (size_t d = 0; d < indices.size(); ++d) {
    int64_t s = 0;
    const Expr term = is_const_int(b->strides[d], &s) && s == 1
                          ? indices[d]
                          : BinaryNode::make(BinOp::kMul, indices[d], b->strides[d]);
    off = off.defined() ? BinaryNode::make(BinOp::kAdd, off, term) : term;
  }
  return off;
}

// True when every global access of the vector loop body that moves with `lane` is contiguous along it
// and continues across blocks (+extent per `bx`), and at least one such access is a store.
bool sweeps_rows(const ForNode* vec, const Expr& bx, int64_t extent) {
  std::vector<std::pair<Expr, Expr>> lets;  // let-bound names inlined, so offsets are in outer terms
  for_each_stmt(vec->body, [&](const Stmt& s) {
    if (const LetStmtNode* l = s.as<LetStmtNode>()) lets.emplace_back(l->var, substitute(l->value, lets));
  });
  bool ok = true, stores = false;
  auto check = [&](const Buffer& b, const std::vector<Expr>& indices, bool is_store) {
    if (b->scope != Scope::kGlobal) {
      ok = false;
      return;
    }
    const Expr off = substitute(flat_offset(b, indices), lets);
    Expr base;
    int64_t lane = 0, block = 0;
    if (!uses_var(off, vec->var)) return;  // the same element for every lane (a broadcast)
    if (!linear_in(off, vec->var, &base, &lane) || lane != 1 || !linear_in(off, bx, &base, &block) || block != extent) {
      ok = false;
      return;
    }
    stores = stores || is_store;
  };
  for_each_stmt(vec->body, [&](const Stmt& s) {
    if (const StoreNode* st = s.as<StoreNode>()) check(st->buffer, st->indices, true);
  });
  for_each_expr(vec->body, [&](const Expr& e) {
    if (const LoadNode* ld = e.as<LoadNode>()) check(ld->buffer, ld->indices, false);
  });
  return ok && stores;
}

}  // namespace

Stmt row_sweep_body(const LaunchNode* launch) {
  if (launch->grid.size() < 2) return Stmt();  // one band: nothing left to run in parallel
  const Expr& bx = launch->block_vars[0];
  // The loop nest: every loop's body is the next loop, down to the vector loop.
  std::vector<Stmt> nest;
  for (Stmt s = launch->body; s.defined();) {
    const ForNode* f = s.as<ForNode>();
    if (!f) return Stmt();
    nest.push_back(s);
    if (f->kind == ForKind::kVectorized) break;
    if (uses_var(f->min, bx) || uses_var(f->extent, bx)) return Stmt();
    s = f->body;
  }
  if (nest.empty()) return Stmt();
  const ForNode* vec = nest.back().as<ForNode>();
  int64_t mn = 0, extent = 0;
  if (nest.size() < 2 || vec->kind != ForKind::kVectorized || !is_const_int(vec->min, &mn) ||
      !is_const_int(vec->extent, &extent) || mn != 0 || extent <= 0 || !sweeps_rows(vec, bx, extent))
    return Stmt();
  // Rebuild from the inside out: the vector loop inside a loop over bx, then the outer loops.
  Stmt body = ForNode::make(bx, make_int(0), launch->grid[0], ForKind::kSerial, nest.back(), launch->loc);
  for (size_t i = nest.size() - 1; i-- > 0;) {
    const ForNode* f = nest[i].as<ForNode>();
    body = ForNode::make(f->var, f->min, f->extent, f->kind, body, f->loc, f->num_stages);
  }
  return body;
}

}  // namespace tessera::tl
