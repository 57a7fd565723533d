// tessera/tl/builder.h - the C++ builder API of the tile language.
//
// A KernelBuilder records a program statement by statement, like the Python frontend does (which is
// built on it): parameters, T.Kernel grids (several run one after another), on-chip buffers, loops, conditionals,
// element stores and tile operations. Scoped constructs exist as begin/end pairs and as lambda helpers:
//
//   KernelBuilder kb("add");
//   Expr n = kb.dynamic("N");
//   Buffer a = kb.tensor("A", {n}, DataType::kFloat32), c = kb.tensor("C", {n}, DataType::kFloat32);
//   kb.kernel({ceildiv(n, 256)}, 128, [&](const std::vector<Expr>& b) {
//     kb.parallel({256}, [&](const std::vector<Expr>& i) {
//       Expr idx = b[0] * 256 + i[0];
//       kb.store(c, {idx}, kb.load(a, {idx}) * 2.0f);
//     });
//   });
//   Program p = kb.finish();
//
// Every node records the builder's current source location (set_loc), so errors found by the passes
// point at the line that created the node.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/tl/expr_ops.h"
#include "tessera/tl/ir.h"

namespace tessera::tl {

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name, Loc loc = {});
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  // Also sets the location expression operators use on this thread (tessera/tl/expr_ops.h).
  void set_loc(Loc loc) {
    loc_ = loc;
    set_current_loc(loc);
  }
  Loc loc() const { return loc_; }

  // ---- parameters (before the kernel) ----
  Expr dynamic(const std::string& name);  // an int32 dimension bound from tensor shapes at call time
  Buffer tensor(const std::string& name, const std::vector<Expr>& shape, DataType dtype);
  Expr scalar(const std::string& name, DataType dtype);
  // A global tensor parameter declared anywhere (also inside T.Kernel): scratch the caller never sees,
  // such as the per-block state T.sync_grid carries from one launch to the next.
  Buffer scratch_tensor(const std::string& name, const std::vector<Expr>& shape, DataType dtype);

  // ---- the grid ----
  std::vector<Expr> begin_kernel(const std::vector<Expr>& grid, int threads = 128);
  void end_kernel();
  // T.sync_grid(): ends the open launch and opens another over the same grid, block variables, threads
  // and buffers (every block of the first finishes before any block of the second starts). Lets bound
  // at the kernel body's level are bound again at the start of the second launch; buffer contents are
  // not carried (the caller copies what lives across through scratch tensors).
  // The builder must be at the kernel body's level (not inside a loop or an if).
  void split_launch();
  std::vector<Buffer> kernel_allocs() const;  // the buffers allocated so far in the open T.Kernel
  // On-chip buffers (inside the kernel). kLocal buffers live in registers/stack of the block.
  Buffer alloc(const std::string& name, const std::vector<int64_t>& shape, DataType dtype, Scope scope);
  // T.make_tensor: a row-major global tensor at a run-time address (an int64 value, e.g. read from a table
  // of tensor addresses), usable from here to the end of the enclosing loop, if or kernel body.
  Buffer tensor_at(const std::string& name, const std::vector<Expr>& shape, DataType dtype, Expr address);

  // ---- loops and conditionals ----
  Expr begin_for(const std::string& var, Expr min, Expr extent, ForKind kind, int num_stages = 0);
  // T.Parallel(e0, e1, ...): a nest of parallel loops closed by one end_for().
  std::vector<Expr> begin_parallel(const std::vector<Expr>& extents, const std::vector<std::string>& names = {});
  void end_for();
  void begin_if(Expr cond);
  void begin_else();  // after the then-branch of the innermost if
  void end_if();
  // Binds value to a new variable at this point (evaluated once, here) and returns the variable.
  Expr let(const std::string& name, Expr value);

  // ---- statements ----
  void emit(Stmt s);
  Expr load(const Buffer& b, const std::vector<Expr>& indices);
  void store(const Buffer& b, const std::vector<Expr>& indices, Expr value);
  void copy(const Region& src, const Region& dst);
  void gemm(const Region& a, const Region& b, const Region& c, bool trans_a = false, bool trans_b = false,
            bool clear_accum = false);
  void fill(const Region& dst, Expr value);
  void clear(const Region& dst);
  void reduce(ReduceKind op, const Region& src, const Region& dst, int dim = -1, bool clear = true);
  void cumsum(const Region& src, const Region& dst, int dim = 0, bool reverse = false);
  void atomic(AtomicKind op, const Region& dst, const Region& src);
  void atomic(AtomicKind op, const Region& dst, Expr value);

  // ---- lambda forms of the scoped constructs ----
  void kernel(const std::vector<Expr>& grid, int threads, const std::function<void(const std::vector<Expr>&)>& body);
  void serial(Expr extent, const std::function<void(Expr)>& body, const std::string& var = "i");
  void pipelined(Expr extent, int num_stages, const std::function<void(Expr)>& body, const std::string& var = "k");
  void parallel(const std::vector<Expr>& extents, const std::function<void(const std::vector<Expr>&)>& body);
  void if_then(Expr cond, const std::function<void()>& then_body, const std::function<void()>& else_body = {});

  // The finished program. The builder must be back at the top level with at least one kernel.
  Program finish();

 private:
  struct Frame;
  Frame& top();
  void push(Frame f);
  Stmt close_frame();  // pops the innermost frame and returns its statements as one Stmt

  std::string name_;
  Loc loc_;
  std::vector<Frame>* stack_;
  std::vector<Param> params_;
  std::vector<Expr> symbols_;
  bool kernel_done_ = false;
};

// Regions: all of a buffer; an explicit box; a corner whose extents come from the other operand.
Region region(const Buffer& b, const std::vector<Expr>& mins, const std::vector<Expr>& extents);
Region corner(const Buffer& b, const std::vector<Expr>& mins);
inline Region whole(const Buffer& b) {
  return Region::whole(b);
}

}  // namespace tessera::tl
