// tessera/tl/ir.h - the tile language IR: expressions, statements, buffers and programs.
//
// Nodes are immutable plain structs held by shared pointers (Expr, Stmt, Buffer). Each node type has
// a static make() that validates its operands and throws tessera::Error(kInvalidArgument) with the
// node's source location, so invalid IR cannot be built. The node list below is the single place that
// names every node: the kinds, the visitor, the mutator and the printer are generated from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/tl/types.h"

namespace tessera::tl {

#define TESSERA_TL_EXPR_NODES(X) \
  X(IntImm)                      \
  X(FloatImm)                    \
  X(Var)                         \
  X(Binary)                      \
  X(Compare)                     \
  X(Logical)                     \
  X(Not)                         \
  X(Select)                      \
  X(Cast)                        \
  X(Call)                        \
  X(Load)                        \
  X(AddressOf)

#define TESSERA_TL_STMT_NODES(X) \
  X(Store)                       \
  X(LetStmt)                     \
  X(For)                         \
  X(IfThenElse)                  \
  X(Seq)                         \
  X(Allocate)                    \
  X(Evaluate)                    \
  X(Launch)                      \
  X(Copy)                        \
  X(Gemm)                        \
  X(Fill)                        \
  X(Reduce)                      \
  X(Cumsum)                      \
  X(Atomic)

enum class NodeKind : uint8_t {
#define TESSERA_TL_KIND(N) k##N,
  TESSERA_TL_EXPR_NODES(TESSERA_TL_KIND) TESSERA_TL_STMT_NODES(TESSERA_TL_KIND)
#undef TESSERA_TL_KIND
};
const char* node_kind_name(NodeKind k);

struct Node {
  NodeKind kind;
  Loc loc;
  explicit Node(NodeKind k, Loc l) : kind(k), loc(l) {}
  virtual ~Node() = default;
};

struct ExprNode : Node {
  DataType type;
  ExprNode(NodeKind k, DataType t, Loc l) : Node(k, l), type(t) {}
};
struct StmtNode : Node {
  using Node::Node;
};

// A handle; null when default-constructed (used for "absent" operands, e.g. an inferred extent).
template <class Base>
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<const Base> p) : p_(std::move(p)) {}
  bool defined() const { return static_cast<bool>(p_); }
  const Base* get() const { return p_.get(); }
  const Base* operator->() const { return p_.get(); }
  template <class T>
  const T* as() const {
    return p_ && p_->kind == T::kKind ? static_cast<const T*>(p_.get()) : nullptr;
  }
  bool same_as(const Handle& o) const { return p_ == o.p_; }

 private:
  std::shared_ptr<const Base> p_;
};

class Expr : public Handle<ExprNode> {
 public:
  using Handle::Handle;
  DataType type() const { return get()->type; }
};
class Stmt : public Handle<StmtNode> {
 public:
  using Handle::Handle;
};

// ---- buffers ----
struct BufferNode {
  std::string name;
  DataType dtype;
  Scope scope;
  std::vector<Expr> shape;    // int expressions: constants for on-chip buffers, symbols allowed for global
  std::vector<Expr> strides;  // elements; global: the last is 1, the others are runtime symbols
  // T.make_tensor: a row-major global tensor whose first element is at this address (an int64 variable
  // bound by a let around the tensor's AllocateNode). Undefined for parameters and on-chip buffers.
  Expr address;
  Loc loc;
  int64_t numel_const() const;  // product of the shape when every dim is a constant, else -1
};
using Buffer = std::shared_ptr<const BufferNode>;
// On-chip buffers need constant positive dims; global buffers get stride symbols "<name>_stride<d>".
Buffer make_buffer(const std::string& name, DataType dtype, Scope scope, const std::vector<Expr>& shape, Loc loc);

// A rectangular part of a buffer: [min[d], min[d] + extent[d]). An undefined extent is inferred from
// the other operand of the tile op ("corner" form: T.copy(A[by * 128, k * 32], A_shared)).
struct Region {
  Buffer buffer;
  std::vector<Expr> min, extent;
  static Region whole(const Buffer& b);
  bool extents_known() const;
};

// ---- expression nodes ----
#define TESSERA_TL_NODE_HEADER(N, Base)             \
  static constexpr NodeKind kKind = NodeKind::k##N; \
  using Base::Base;

struct IntImmNode : ExprNode {
  TESSERA_TL_NODE_HEADER(IntImm, ExprNode)
  int64_t value = 0;
  static Expr make(DataType t, int64_t v, Loc loc = {});
};
struct FloatImmNode : ExprNode {
  TESSERA_TL_NODE_HEADER(FloatImm, ExprNode)
  double value = 0;
  static Expr make(DataType t, double v, Loc loc = {});
};
// A symbol: loop variable, block index, dynamic dimension, scalar parameter or let-bound value.
// Identity is the node itself; names only need to be unique after codegen renames them.
struct VarNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Var, ExprNode)
  std::string name;
  static Expr make(const std::string& name, DataType t, Loc loc = {});
};

enum class BinOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kFloorMod,
  kMin,
  kMax,
  kBitAnd,
  kBitOr,
  kBitXor,
  kShl,
  kShr
};
const char* binop_name(BinOp op);
// Operands are converted to the promoted type; kDiv on integers is floor division (documented);
// bit operations and shifts need integers.
struct BinaryNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Binary, ExprNode)
  BinOp op;
  Expr a, b;
  static Expr make(BinOp op, Expr a, Expr b, Loc loc = {});
};

enum class CmpOp : uint8_t { kLT, kLE, kGT, kGE, kEQ, kNE };
const char* cmpop_name(CmpOp op);
struct CompareNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Compare, ExprNode)
  CmpOp op;
  Expr a, b;
  static Expr make(CmpOp op, Expr a, Expr b, Loc loc = {});
};

struct LogicalNode : ExprNode {  // a && b, a || b (bool operands)
  TESSERA_TL_NODE_HEADER(Logical, ExprNode)
  bool is_and;
  Expr a, b;
  static Expr make(bool is_and, Expr a, Expr b, Loc loc = {});
};
struct NotNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Not, ExprNode)
  Expr a;
  static Expr make(Expr a, Loc loc = {});
};
struct SelectNode : ExprNode {  // cond ? t : f, both sides evaluated lazily (only the taken one)
  TESSERA_TL_NODE_HEADER(Select, ExprNode)
  Expr cond, t, f;
  static Expr make(Expr cond, Expr t, Expr f, Loc loc = {});
};
struct CastNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Cast, ExprNode)
  Expr value;
  static Expr make(DataType t, Expr value, Loc loc = {});
};

enum class Intrinsic : uint8_t {
  kExp,
  kExp2,
  kLog,
  kLog2,
  kSqrt,
  kRsqrt,
  kAbs,
  kTanh,
  kSigmoid,
  kFloor,
  kCeil,
  kTrunc,
  kRound,
  kSin,
  kCos,
  kErf,
  kPow,
  kFma,
  kIsNan,
  kIsInf,
  kDecodeE2M1,  // int nibble (low 4 bits) -> float32 value of the float4 e2m1 code
  kExtern,      // a runtime function of the target (name in Call::extern_name), produced by lowering
};
const char* intrinsic_name(Intrinsic op);
int intrinsic_arity(Intrinsic op);  // -1 for kExtern
struct CallNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Call, ExprNode)
  Intrinsic op;
  std::string extern_name;
  std::vector<Expr> args;
  // Math intrinsics take and return floats (integers are converted to float32); kIsNan/kIsInf return
  // bool; kAbs keeps integer types.
  static Expr make(Intrinsic op, std::vector<Expr> args, Loc loc = {});
  static Expr make_extern(DataType ret, const std::string& name, std::vector<Expr> args, Loc loc = {});
};

struct LoadNode : ExprNode {
  TESSERA_TL_NODE_HEADER(Load, ExprNode)
  Buffer buffer;
  std::vector<Expr> indices;  // one int expression per dim
  static Expr make(const Buffer& buffer, std::vector<Expr> indices, Loc loc = {});
};
struct AddressOfNode : ExprNode {  // &buffer[indices], a handle for runtime calls
  TESSERA_TL_NODE_HEADER(AddressOf, ExprNode)
  Buffer buffer;
  std::vector<Expr> indices;
  static Expr make(const Buffer& buffer, std::vector<Expr> indices, Loc loc = {});
};

// ---- statement nodes ----
struct StoreNode : StmtNode {
  TESSERA_TL_NODE_HEADER(Store, StmtNode)
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;  // converted to the buffer's dtype when stored
  static Stmt make(const Buffer& buffer, std::vector<Expr> indices, Expr value, Loc loc = {});
};
struct LetStmtNode : StmtNode {  // var = value (evaluated once, here) for the body
  TESSERA_TL_NODE_HEADER(LetStmt, StmtNode)
  Expr var, value;
  Stmt body;
  static Stmt make(Expr var, Expr value, Stmt body, Loc loc = {});
};

enum class ForKind : uint8_t { kSerial, kParallel, kPipelined, kUnrolled, kVectorized };
const char* for_kind_name(ForKind k);
struct ForNode : StmtNode {
  TESSERA_TL_NODE_HEADER(For, StmtNode)
  Expr var, min, extent;
  ForKind kind;
  int num_stages = 0;  // kPipelined: how many iterations ahead the copies are prefetched (stages - 1)
  Stmt body;
  static Stmt make(Expr var, Expr min, Expr extent, ForKind kind, Stmt body, Loc loc = {}, int num_stages = 0);
};
struct IfThenElseNode : StmtNode {
  TESSERA_TL_NODE_HEADER(IfThenElse, StmtNode)
  Expr cond;
  Stmt then_case, else_case;  // else_case may be undefined
  static Stmt make(Expr cond, Stmt then_case, Stmt else_case = {}, Loc loc = {});
};
struct SeqNode : StmtNode {
  TESSERA_TL_NODE_HEADER(Seq, StmtNode)
  std::vector<Stmt> stmts;
  static Stmt make(std::vector<Stmt> stmts, Loc loc = {});  // flattens nested sequences
};
struct AllocateNode : StmtNode {  // an on-chip buffer (or a T.make_tensor view) that lives for the body
  TESSERA_TL_NODE_HEADER(Allocate, StmtNode)
  Buffer buffer;
  Stmt body;
  static Stmt make(const Buffer& buffer, Stmt body, Loc loc = {});
};
struct EvaluateNode : StmtNode {  // an expression run for its effect (runtime calls)
  TESSERA_TL_NODE_HEADER(Evaluate, StmtNode)
  Expr value;
  static Stmt make(Expr value, Loc loc = {});
};
// The grid: the body runs once per block, blocks in parallel; block_vars[d] in [0, grid[d]).
struct LaunchNode : StmtNode {
  TESSERA_TL_NODE_HEADER(Launch, StmtNode)
  std::vector<Expr> grid, block_vars;
  int threads = 0;  // TileLang's threads= (recorded; a CPU block is one thread)
  Stmt body;
  static Stmt make(std::vector<Expr> grid, std::vector<Expr> block_vars, int threads, Stmt body, Loc loc = {});
};

// ---- tile operations (lowered by passes/lower_tile_ops through the target's registry) ----
struct CopyNode : StmtNode {  // dst = src (converted), out-of-bounds source elements read as 0
  TESSERA_TL_NODE_HEADER(Copy, StmtNode)
  Region src, dst;
  static Stmt make(Region src, Region dst, Loc loc = {});
};
struct GemmNode : StmtNode {  // C (+)= op(A) . op(B); A [M,K] (or [K,M]), B [K,N] (or [N,K]), C [M,N]
  TESSERA_TL_NODE_HEADER(Gemm, StmtNode)
  Region a, b, c;
  bool trans_a = false, trans_b = false, clear_accum = false;
  static Stmt make(Region a, Region b, Region c, bool trans_a, bool trans_b, bool clear_accum, Loc loc = {});
};
struct FillNode : StmtNode {
  TESSERA_TL_NODE_HEADER(Fill, StmtNode)
  Region dst;
  Expr value;
  static Stmt make(Region dst, Expr value, Loc loc = {});
};
enum class ReduceKind : uint8_t { kMax, kMin, kSum, kAbsSum, kAbsMax };
const char* reduce_kind_name(ReduceKind k);
struct ReduceNode : StmtNode {  // dst = reduce(src, dim) (clear) or op(dst, reduce(src, dim))
  TESSERA_TL_NODE_HEADER(Reduce, StmtNode)
  ReduceKind op;
  Region src, dst;
  int dim = -1;
  bool clear = true;
  static Stmt make(ReduceKind op, Region src, Region dst, int dim, bool clear, Loc loc = {});
};
struct CumsumNode : StmtNode {  // inclusive prefix sum along dim (from the end when reverse)
  TESSERA_TL_NODE_HEADER(Cumsum, StmtNode)
  Region src, dst;
  int dim = 0;
  bool reverse = false;
  static Stmt make(Region src, Region dst, int dim, bool reverse, Loc loc = {});
};
enum class AtomicKind : uint8_t { kAdd, kMax, kMin };
const char* atomic_kind_name(AtomicKind k);
// dst op= src element by element (src region), or dst op= value (a scalar expression, one element).
struct AtomicNode : StmtNode {
  TESSERA_TL_NODE_HEADER(Atomic, StmtNode)
  AtomicKind op;
  Region dst, src;  // src.buffer is null for the scalar form
  Expr value;
  static Stmt make(AtomicKind op, Region dst, Region src, Expr value, Loc loc = {});
};
#undef TESSERA_TL_NODE_HEADER

// ---- programs ----
struct Param {
  std::string name;
  Buffer buffer;  // a tensor parameter, or
  Expr scalar;    // a scalar parameter (a Var)
};
struct Program {
  std::string name;
  std::vector<Param> params;
  std::vector<Expr> symbols;  // dynamic dimensions (Vars) bound from tensor shapes at call time
  Stmt body;                  // a Launch, possibly under lets
  Loc loc;
};

// ---- small helpers ----
Expr make_int(int64_t v, Loc loc = {});  // int32 when it fits, else int64
Expr make_const(DataType t, double v, Loc loc = {});
bool is_const_int(const Expr& e, int64_t* value = nullptr);
bool is_const_number(const Expr& e, double* value = nullptr);
// Throws Error(kInvalidArgument) "<loc>: <message>".
[[noreturn]] void fail_at(Loc loc, const std::string& message);

}  // namespace tessera::tl
