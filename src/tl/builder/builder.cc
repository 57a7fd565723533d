// KernelBuilder: records a program as a stack of open scopes (kernel, loops, if/else).
#include "tessera/tl/builder.h"

#include <algorithm>

#include "tessera/core/error.h"
#include "tessera/tl/expr_ops.h"

namespace tessera::tl {

struct KernelBuilder::Frame {
  enum class Kind { kRoot, kKernel, kFor, kIf, kElse } kind = Kind::kRoot;
  struct Entry {
    Stmt stmt;
    Expr let_var, let_value;  // a pending let: the following entries become its body
    Loc loc;
    Buffer scoped;  // a T.make_tensor buffer: the following entries become its AllocateNode's body
  };
  std::vector<Entry> entries;
  Loc loc;
  // kKernel
  std::vector<Expr> grid, block_vars;
  int threads = 0;
  std::vector<Buffer> allocs;
  // kFor
  Expr var, min, extent;
  ForKind for_kind = ForKind::kSerial;
  int num_stages = 0;
  bool chained = false;  // an inner loop of a T.Parallel nest: closes together with its parent
  // kIf / kElse
  Expr cond;
  Stmt then_stmt;
};

KernelBuilder::KernelBuilder(std::string name, Loc loc)
    : name_(std::move(name)), loc_(loc), stack_(new std::vector<Frame>) {
  if (name_.empty()) fail_at(loc, "KernelBuilder: the kernel name must not be empty");
  Frame root;
  root.kind = Frame::Kind::kRoot;
  root.loc = loc;
  stack_->push_back(std::move(root));
}

KernelBuilder::~KernelBuilder() {
  delete stack_;
}

KernelBuilder::Frame& KernelBuilder::top() {
  return stack_->back();
}
void KernelBuilder::push(Frame f) {
  stack_->push_back(std::move(f));
}

Stmt KernelBuilder::close_frame() {
  Frame& f = top();
  std::vector<Stmt> tail;  // statements after the current position, in reverse order
  for (size_t i = f.entries.size(); i-- > 0;) {
    Frame::Entry& e = f.entries[i];
    if (e.let_var.defined()) {
      std::vector<Stmt> body(tail.rbegin(), tail.rend());
      Stmt let = LetStmtNode::make(e.let_var, e.let_value, SeqNode::make(body, e.loc), e.loc);
      tail.assign(1, let);
    } else if (e.scoped) {
      std::vector<Stmt> body(tail.rbegin(), tail.rend());
      tail.assign(1, AllocateNode::make(e.scoped, SeqNode::make(body, e.loc), e.loc));
    } else {
      tail.push_back(e.stmt);
    }
  }
  std::vector<Stmt> stmts(tail.rbegin(), tail.rend());
  Stmt out = stmts.size() == 1 ? stmts[0] : SeqNode::make(stmts, f.loc);
  return out;
}

Expr KernelBuilder::dynamic(const std::string& name) {
  if (kernel_done_ || stack_->size() > 1)
    fail_at(loc_, "T.dynamic('" + name + "'): declare dynamic dims before T.Kernel");
  for (const Expr& s : symbols_)
    if (s.as<VarNode>()->name == name) return s;
  Expr v = VarNode::make(name, DataType::kInt32, loc_);
  symbols_.push_back(v);
  return v;
}

Buffer KernelBuilder::tensor(const std::string& name, const std::vector<Expr>& shape, DataType dtype) {
  if (stack_->size() > 1 || kernel_done_)
    fail_at(loc_, "T.Tensor '" + name + "': parameters are declared before T.Kernel");
  for (const Param& p : params_)
    if (p.name == name) fail_at(loc_, "T.Tensor '" + name + "': a parameter with this name already exists");
  Buffer b = make_buffer(name, dtype, Scope::kGlobal, shape, loc_);
  params_.push_back(Param{name, b, {}});
  return b;
}

Expr KernelBuilder::scalar(const std::string& name, DataType dtype) {
  if (stack_->size() > 1 || kernel_done_) fail_at(loc_, "scalar parameter '" + name + "': declare it before T.Kernel");
  for (const Param& p : params_)
    if (p.name == name) fail_at(loc_, "scalar parameter '" + name + "': a parameter with this name already exists");
  Expr v = VarNode::make(name, dtype, loc_);
  params_.push_back(Param{name, nullptr, v});
  return v;
}

Buffer KernelBuilder::scratch_tensor(const std::string& name, const std::vector<Expr>& shape, DataType dtype) {
  for (const Param& p : params_)
    if (p.name == name) fail_at(loc_, "scratch tensor '" + name + "': a parameter with this name already exists");
  Buffer b = make_buffer(name, dtype, Scope::kGlobal, shape, loc_);
  params_.push_back(Param{name, b, {}});
  return b;
}

std::vector<Expr> KernelBuilder::begin_kernel(const std::vector<Expr>& grid, int threads) {
  if (stack_->size() != 1) fail_at(loc_, "T.Kernel: must be at the top level of the program, not nested");
  if (grid.empty() || grid.size() > 3) fail_at(loc_, "T.Kernel: the grid must have 1 to 3 dimensions");
  Frame f;
  f.kind = Frame::Kind::kKernel;
  f.loc = loc_;
  f.grid = grid;
  f.threads = threads;
  static const char* const kNames[] = {"bx", "by", "bz"};
  for (size_t d = 0; d < grid.size(); ++d) {
    if (!grid[d].defined() || !is_int(grid[d].type())) fail_at(loc_, "T.Kernel: grid extents must be integers");
    f.block_vars.push_back(VarNode::make(kNames[d], DataType::kInt32, loc_));
  }
  std::vector<Expr> vars = f.block_vars;
  push(std::move(f));
  return vars;
}

void KernelBuilder::end_kernel() {
  if (top().kind != Frame::Kind::kKernel) fail_at(loc_, "T.Kernel: end of kernel while a loop or if is still open");
  Stmt body = close_frame();
  Frame f = std::move(top());
  stack_->pop_back();
  for (size_t i = f.allocs.size(); i-- > 0;) body = AllocateNode::make(f.allocs[i], body, f.allocs[i]->loc);
  emit(LaunchNode::make(f.grid, f.block_vars, f.threads, body, f.loc));
  kernel_done_ = true;
}

std::vector<Buffer> KernelBuilder::kernel_allocs() const {
  for (const Frame& f : *stack_)
    if (f.kind == Frame::Kind::kKernel) return f.allocs;
  return {};
}

void KernelBuilder::split_launch() {
  if (top().kind != Frame::Kind::kKernel)
    fail_at(loc_, "T.sync_grid(): only at the top level of the T.Kernel body (not inside a loop or an if)");
  const Frame& f = top();
  Frame next;
  next.kind = Frame::Kind::kKernel;
  next.loc = loc_;
  next.grid = f.grid;
  next.block_vars = f.block_vars;
  next.threads = f.threads;
  next.allocs = f.allocs;
  // Lets bound at the body's level stay visible after the barrier: bind them again (same variable).
  for (const Frame::Entry& e : f.entries)
    if (e.let_var.defined()) next.entries.push_back(Frame::Entry{{}, e.let_var, e.let_value, e.loc});
  end_kernel();
  push(std::move(next));
}

Buffer KernelBuilder::alloc(const std::string& name, const std::vector<int64_t>& shape, DataType dtype, Scope scope) {
  auto kernel =
      std::find_if(stack_->begin(), stack_->end(), [](const Frame& f) { return f.kind == Frame::Kind::kKernel; });
  if (kernel == stack_->end())
    fail_at(loc_, std::string("T.alloc_") + scope_name(scope) + "('" + name + "'): only inside T.Kernel");
  if (scope == Scope::kGlobal) fail_at(loc_, "alloc: global buffers are kernel parameters (T.Tensor)");
  std::vector<Expr> dims;
  for (int64_t d : shape) dims.push_back(make_int(d, loc_));
  Buffer b = make_buffer(name, dtype, scope, dims, loc_);
  kernel->allocs.push_back(b);
  return b;
}

Buffer KernelBuilder::tensor_at(const std::string& name, const std::vector<Expr>& shape, DataType dtype, Expr address) {
  if (stack_->size() == 1) fail_at(loc_, "T.make_tensor('" + name + "'): only inside T.Kernel");
  if (!address.defined() || !is_int(address.type()))
    fail_at(loc_, "T.make_tensor('" + name + "'): the address must be an integer (an element of a T.ptr tensor)");
  const Buffer shaped = make_buffer(name, dtype, Scope::kGlobal, shape, loc_);
  auto b = std::make_shared<BufferNode>(*shaped);
  Expr stride = IntImmNode::make(DataType::kInt64, 1, loc_);  // row-major, int64; constants fold
  for (size_t d = shape.size(); d-- > 0;) {
    b->strides[d] = stride;
    stride = mul(stride, cast(DataType::kInt64, shape[d]));
  }
  b->address = let(name + "_address", CastNode::make(DataType::kInt64, address, loc_));
  top().entries.push_back(Frame::Entry{{}, {}, {}, loc_, b});
  return b;
}

Expr KernelBuilder::begin_for(const std::string& var, Expr min, Expr extent, ForKind kind, int num_stages) {
  if (stack_->size() == 1) fail_at(loc_, std::string("T.") + for_kind_name(kind) + ": loops belong inside T.Kernel");
  Frame f;
  f.kind = Frame::Kind::kFor;
  f.loc = loc_;
  f.var = VarNode::make(var.empty() ? "i" : var, DataType::kInt32, loc_);
  f.min = min;
  f.extent = extent;
  f.for_kind = kind;
  f.num_stages = num_stages;
  if (!min.defined() || !is_int(min.type()) || !extent.defined() || !is_int(extent.type()))
    fail_at(loc_, std::string("T.") + for_kind_name(kind) + ": loop bounds must be integers");
  Expr v = f.var;
  push(std::move(f));
  return v;
}

std::vector<Expr> KernelBuilder::begin_parallel(const std::vector<Expr>& extents,
                                                const std::vector<std::string>& names) {
  if (extents.empty()) fail_at(loc_, "T.Parallel: needs at least one extent");
  static const char* const kNames[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<Expr> vars;
  for (size_t d = 0; d < extents.size(); ++d) {
    const std::string name = d < names.size() ? names[d] : kNames[d % 6];
    vars.push_back(begin_for(name, make_int(0, loc_), extents[d], ForKind::kParallel));
    top().chained = d > 0;
  }
  return vars;
}

void KernelBuilder::end_for() {
  for (;;) {
    if (top().kind != Frame::Kind::kFor) fail_at(loc_, "end_for: the innermost open scope is not a loop");
    Stmt body = close_frame();
    Frame f = std::move(top());
    stack_->pop_back();
    emit(ForNode::make(f.var, f.min, f.extent, f.for_kind, body, f.loc, f.num_stages));
    if (!f.chained) return;
  }
}

void KernelBuilder::begin_if(Expr cond) {
  if (stack_->size() == 1) fail_at(loc_, "if: conditionals on symbolic values belong inside T.Kernel");
  Frame f;
  f.kind = Frame::Kind::kIf;
  f.loc = loc_;
  f.cond = cond;
  if (!cond.defined()) fail_at(loc_, "if: the condition is missing");
  push(std::move(f));
}

void KernelBuilder::begin_else() {
  if (top().kind != Frame::Kind::kIf) fail_at(loc_, "else: no open if");
  Stmt then_stmt = close_frame();
  Frame& f = top();
  f.kind = Frame::Kind::kElse;
  f.then_stmt = then_stmt;
  f.entries.clear();
}

void KernelBuilder::end_if() {
  const Frame::Kind k = top().kind;
  if (k != Frame::Kind::kIf && k != Frame::Kind::kElse) fail_at(loc_, "end_if: no open if");
  Stmt body = close_frame();
  Frame f = std::move(top());
  stack_->pop_back();
  if (k == Frame::Kind::kIf) {
    emit(IfThenElseNode::make(f.cond, body, {}, f.loc));
  } else {
    emit(IfThenElseNode::make(f.cond, f.then_stmt, body, f.loc));
  }
}

Expr KernelBuilder::let(const std::string& name, Expr value) {
  if (!value.defined()) fail_at(loc_, "let '" + name + "': the value is missing");
  Expr v =
      VarNode::make(name, compute_type(value.type()) == value.type() ? value.type() : compute_type(value.type()), loc_);
  top().entries.push_back(Frame::Entry{{}, v, value, loc_});
  return v;
}

void KernelBuilder::emit(Stmt s) {
  if (!s.defined()) return;
  if (stack_->size() == 1 && !s.as<LaunchNode>()) fail_at(s->loc, "statements belong inside T.Kernel");
  top().entries.push_back(Frame::Entry{s, {}, {}, s->loc});
}

Expr KernelBuilder::load(const Buffer& b, const std::vector<Expr>& indices) {
  return LoadNode::make(b, indices, loc_);
}

void KernelBuilder::store(const Buffer& b, const std::vector<Expr>& indices, Expr value) {
  emit(StoreNode::make(b, indices, value, loc_));
}
void KernelBuilder::copy(const Region& src, const Region& dst) {
  emit(CopyNode::make(src, dst, loc_));
}
void KernelBuilder::gemm(const Region& a, const Region& b, const Region& c, bool trans_a, bool trans_b,
                         bool clear_accum) {
  emit(GemmNode::make(a, b, c, trans_a, trans_b, clear_accum, loc_));
}
void KernelBuilder::fill(const Region& dst, Expr value) {
  emit(FillNode::make(dst, value, loc_));
}
void KernelBuilder::clear(const Region& dst) {
  emit(FillNode::make(dst, make_int(0, loc_), loc_));
}
void KernelBuilder::reduce(ReduceKind op, const Region& src, const Region& dst, int dim, bool clear) {
  emit(ReduceNode::make(op, src, dst, dim, clear, loc_));
}
void KernelBuilder::cumsum(const Region& src, const Region& dst, int dim, bool reverse) {
  emit(CumsumNode::make(src, dst, dim, reverse, loc_));
}
void KernelBuilder::atomic(AtomicKind op, const Region& dst, const Region& src) {
  emit(AtomicNode::make(op, dst, src, {}, loc_));
}
void KernelBuilder::atomic(AtomicKind op, const Region& dst, Expr value) {
  emit(AtomicNode::make(op, dst, Region{}, value, loc_));
}

void KernelBuilder::kernel(const std::vector<Expr>& grid, int threads,
                           const std::function<void(const std::vector<Expr>&)>& body) {
  std::vector<Expr> b = begin_kernel(grid, threads);
  body(b);
  end_kernel();
}

void KernelBuilder::serial(Expr extent, const std::function<void(Expr)>& body, const std::string& var) {
  Expr v = begin_for(var, make_int(0, loc_), extent, ForKind::kSerial);
  body(v);
  end_for();
}

void KernelBuilder::pipelined(Expr extent, int num_stages, const std::function<void(Expr)>& body,
                              const std::string& var) {
  Expr v = begin_for(var, make_int(0, loc_), extent, ForKind::kPipelined, num_stages);
  body(v);
  end_for();
}

void KernelBuilder::parallel(const std::vector<Expr>& extents,
                             const std::function<void(const std::vector<Expr>&)>& body) {
  std::vector<Expr> v = begin_parallel(extents);
  body(v);
  end_for();
}

void KernelBuilder::if_then(Expr cond, const std::function<void()>& then_body, const std::function<void()>& else_body) {
  begin_if(cond);
  then_body();
  if (else_body) {
    begin_else();
    else_body();
  }
  end_if();
}

Program KernelBuilder::finish() {
  if (stack_->size() != 1) fail_at(loc_, "finish: a T.Kernel, loop or if is still open");
  if (!kernel_done_) fail_at(loc_, "finish: the program has no T.Kernel");
  Program p;
  p.name = name_;
  p.params = params_;
  p.symbols = symbols_;
  p.body = close_frame();
  p.loc = stack_->front().loc;
  return p;
}

Region region(const Buffer& b, const std::vector<Expr>& mins, const std::vector<Expr>& extents) {
  Region r;
  r.buffer = b;
  r.min = mins;
  r.extent = extents;
  return r;
}

Region corner(const Buffer& b, const std::vector<Expr>& mins) {
  Region r;
  r.buffer = b;
  r.min = mins;
  r.extent.resize(mins.size());
  return r;
}

}  // namespace tessera::tl
