// Names of enum values, buffers and regions, constants.
#include <cmath>
#include <limits>

#include "tessera/core/error.h"
#include "tessera/tl/ir.h"

namespace tessera::tl {

const char* node_kind_name(NodeKind k) {
  switch (k) {
#define TESSERA_TL_NAME(N) \
  case NodeKind::k##N:     \
    return #N;
    TESSERA_TL_EXPR_NODES(TESSERA_TL_NAME) TESSERA_TL_STMT_NODES(TESSERA_TL_NAME)
#undef TESSERA_TL_NAME
  }
  return "?";
}

const char* binop_name(BinOp op) {
  static const char* const kNames[] = {"+", "-", "*", "/", "//", "%", "min", "max", "&", "|", "^", "<<", ">>"};
  return kNames[int(op)];
}

const char* cmpop_name(CmpOp op) {
  static const char* const kNames[] = {"<", "<=", ">", ">=", "==", "!="};
  return kNames[int(op)];
}

const char* intrinsic_name(Intrinsic op) {
  static const char* const kNames[] = {"exp",     "exp2",  "log",   "log2",  "sqrt",        "rsqrt", "abs", "tanh",
                                       "sigmoid", "floor", "ceil",  "trunc", "round",       "sin",   "cos", "erf",
                                       "pow",     "fma",   "isnan", "isinf", "decode_e2m1", "extern"};
  return kNames[int(op)];
}

int intrinsic_arity(Intrinsic op) {
  switch (op) {
    case Intrinsic::kPow:
      return 2;
    case Intrinsic::kFma:
      return 3;
    case Intrinsic::kExtern:
      return -1;
    default:
      return 1;
  }
}

const char* for_kind_name(ForKind k) {
  static const char* const kNames[] = {"serial", "parallel", "pipelined", "unrolled", "vectorized"};
  return kNames[int(k)];
}

const char* reduce_kind_name(ReduceKind k) {
  static const char* const kNames[] = {"max", "min", "sum", "abssum", "absmax"};
  return kNames[int(k)];
}

const char* atomic_kind_name(AtomicKind k) {
  static const char* const kNames[] = {"add", "max", "min"};
  return kNames[int(k)];
}

int64_t BufferNode::numel_const() const {
  int64_t n = 1;
  for (const Expr& d : shape) {
    int64_t v;
    if (!is_const_int(d, &v)) return -1;
    n *= v;
  }
  return n;
}

Buffer make_buffer(const std::string& name, DataType dtype, Scope scope, const std::vector<Expr>& shape, Loc loc) {
  if (name.empty()) fail_at(loc, "buffer: name must not be empty");
  if (dtype == DataType::kHandle) fail_at(loc, "buffer '" + name + "': dtype must be a value type");
  if (shape.empty()) fail_at(loc, "buffer '" + name + "': shape must have at least one dimension");
  auto b = std::make_shared<BufferNode>();
  b->name = name;
  b->dtype = dtype;
  b->scope = scope;
  b->loc = loc;
  for (size_t d = 0; d < shape.size(); ++d) {
    const Expr& e = shape[d];
    if (!e.defined() || !is_int(e.type()))
      fail_at(loc, "buffer '" + name + "': dimension " + std::to_string(d) + " must be an integer");
    int64_t v = 0;
    const bool constant = is_const_int(e, &v);
    if (scope != Scope::kGlobal && !constant)
      fail_at(loc, "buffer '" + name + "': " + scope_name(scope) + " buffers need constant shapes (dimension " +
                       std::to_string(d) + " is symbolic)");
    if (constant && (v < 0 || (scope != Scope::kGlobal && v == 0)))
      fail_at(loc,
              "buffer '" + name + "': dimension " + std::to_string(d) + " must be positive, got " + std::to_string(v));
    b->shape.push_back(e);
  }
  const size_t nd = shape.size();
  b->strides.resize(nd);
  if (scope == Scope::kGlobal) {
    // The last dimension is contiguous; the others are runtime strides (any layout with unit inner stride).
    for (size_t d = 0; d + 1 < nd; ++d)
      b->strides[d] = VarNode::make(name + "_stride" + std::to_string(d), DataType::kInt64, loc);
    b->strides[nd - 1] = make_int(1);
  } else {
    int64_t step = 1;
    for (size_t d = nd; d-- > 0;) {
      b->strides[d] = make_int(step);
      int64_t v = 0;
      is_const_int(shape[d], &v);
      step *= v;
    }
  }
  return b;
}

Region Region::whole(const Buffer& b) {
  Region r;
  r.buffer = b;
  for (const Expr& d : b->shape) {
    r.min.push_back(make_int(0));
    r.extent.push_back(d);
  }
  return r;
}

bool Region::extents_known() const {
  for (const Expr& e : extent)
    if (!e.defined()) return false;
  return true;
}

Expr make_int(int64_t v, Loc loc) {
  const bool fits = v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  return IntImmNode::make(fits ? DataType::kInt32 : DataType::kInt64, v, loc);
}

Expr make_const(DataType t, double v, Loc loc) {
  if (is_float(t)) return FloatImmNode::make(t, v, loc);
  return IntImmNode::make(compute_type(t) == DataType::kInt32 && t != DataType::kBool ? DataType::kInt32 : t,
                          int64_t(v), loc);
}

bool is_const_int(const Expr& e, int64_t* value) {
  const IntImmNode* n = e.defined() ? e.as<IntImmNode>() : nullptr;
  if (n && value) *value = n->value;
  return n != nullptr;
}

bool is_const_number(const Expr& e, double* value) {
  if (!e.defined()) return false;
  if (const IntImmNode* i = e.as<IntImmNode>()) {
    if (value) *value = double(i->value);
    return true;
  }
  if (const FloatImmNode* f = e.as<FloatImmNode>()) {
    if (value) *value = f->value;
    return true;
  }
  return false;
}

}  // namespace tessera::tl
