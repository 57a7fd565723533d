// tessera/tl/expr_ops.h - arithmetic on IR expressions for C++ kernels (operators and the T.* helpers).
//
// Operators fold constants (ceildiv(1024, 128) is 8) and tag new nodes with the thread's current
// source location (set by KernelBuilder::set_loc, or TL_HERE in C++ kernels).
#pragma once

#include <type_traits>

#include "tessera/tl/ir.h"

namespace tessera::tl {

// The location new expression nodes get on this thread.
Loc current_loc();
void set_current_loc(Loc loc);
#define TL_HERE ::tessera::tl::Loc::make(__FILE__, __LINE__)

// Python-like constants: integers become int32 (int64 when large), floating values float32.
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
Expr lift(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return IntImmNode::make(DataType::kBool, v, current_loc());
  } else if constexpr (std::is_integral_v<T>) {
    return make_int(int64_t(v), current_loc());
  } else {
    return FloatImmNode::make(DataType::kFloat32, double(v), current_loc());
  }
}
inline Expr lift(Expr e) {
  return e;
}

Expr binary(BinOp op, Expr a, Expr b);  // constant-folding constructor
Expr compare(CmpOp op, Expr a, Expr b);

#define TESSERA_TL_BINARY_OPERATOR(sym, fn)                              \
  Expr fn(Expr a, Expr b);                                               \
  inline Expr operator sym(Expr a, Expr b) {                             \
    return fn(a, b);                                                     \
  }                                                                      \
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0> \
  Expr operator sym(Expr a, T b) {                                       \
    return fn(a, lift(b));                                               \
  }                                                                      \
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0> \
  Expr operator sym(T a, Expr b) {                                       \
    return fn(lift(a), b);                                               \
  }

TESSERA_TL_BINARY_OPERATOR(+, add)
TESSERA_TL_BINARY_OPERATOR(-, sub)
TESSERA_TL_BINARY_OPERATOR(*, mul)
TESSERA_TL_BINARY_OPERATOR(/, div)  // integers: floor division
TESSERA_TL_BINARY_OPERATOR(%, floormod)
TESSERA_TL_BINARY_OPERATOR(<, lt)
TESSERA_TL_BINARY_OPERATOR(<=, le)
TESSERA_TL_BINARY_OPERATOR(>, gt)
TESSERA_TL_BINARY_OPERATOR(>=, ge)
TESSERA_TL_BINARY_OPERATOR(&&, logical_and)
TESSERA_TL_BINARY_OPERATOR(||, logical_or)
#undef TESSERA_TL_BINARY_OPERATOR
Expr operator-(Expr a);
Expr operator!(Expr a);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr ceildiv(Expr a, Expr b);
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
Expr ceildiv(Expr a, T b) {
  return ceildiv(a, lift(b));
}
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
Expr min(Expr a, T b) {
  return min(a, lift(b));
}
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
Expr max(Expr a, T b) {
  return max(a, lift(b));
}

Expr select(Expr cond, Expr t, Expr f);  // T.if_then_else
Expr cast(DataType t, Expr v);
Expr call(Intrinsic op, std::vector<Expr> args);
inline Expr exp(Expr x) {
  return call(Intrinsic::kExp, {x});
}
inline Expr exp2(Expr x) {
  return call(Intrinsic::kExp2, {x});
}
inline Expr log(Expr x) {
  return call(Intrinsic::kLog, {x});
}
inline Expr sqrt(Expr x) {
  return call(Intrinsic::kSqrt, {x});
}
inline Expr rsqrt(Expr x) {
  return call(Intrinsic::kRsqrt, {x});
}
inline Expr abs(Expr x) {
  return call(Intrinsic::kAbs, {x});
}
Expr infinity(DataType t);  // +inf of a float type

}  // namespace tessera::tl
