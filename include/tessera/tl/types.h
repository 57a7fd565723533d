// tessera/tl/types.h - element types, memory scopes and source locations of the tile language IR.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::tl {

// Element type of a value or buffer. Arithmetic on float16 / bfloat16 / float8 values is carried out in
// float32 and rounded once when the value is stored or explicitly cast (docs/tl.md, "numerics").
enum class DataType : uint8_t {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kFloat8E4M3,  // float8_e4m3fn
  kFloat8E5M2,
  // float4_e2m1fn. On-chip buffers hold one code per byte (low nibble); a global tensor is packed like
  // DeepGEMM's and TileKernels' FP4 (two codes per byte, element 2i in the low nibble).
  kFloat4E2M1,
  kHandle,  // an address (only produced by lowering: operands of runtime calls)
};

const char* type_name(DataType t);  // "float32", "bfloat16", ...
// TileLang's names and aliases ("float", "half", "float8_e4m3fn", "int", ...). Throws kInvalidArgument.
DataType type_from_name(std::string_view name);
int type_bytes(DataType t);  // storage bytes; 8 for handles; 1 for float4 (on-chip: a code per byte)
bool is_float(DataType t);   // every floating type including float8
bool is_int(DataType t);     // signed or unsigned integers and bool
bool is_signed_int(DataType t);
// Floating types narrower than float32: values live in float32 registers while computed.
bool is_low_precision_float(DataType t);
// The type arithmetic happens in: float32 for low-precision floats, int32 for narrow ints and bool.
DataType compute_type(DataType t);
// The result type of a binary arithmetic op on a and b (C-like promotion on compute types).
DataType promote(DataType a, DataType b);

// Where a buffer lives. Global buffers are kernel arguments; the others are per block. On the CPU a
// block runs on one thread, so shared and fragment buffers are both per-block scratch memory; the
// scope still matters for the rules tile ops check (e.g. gemm's C must be a fragment).
enum class Scope : uint8_t { kGlobal, kShared, kFragment, kLocal };
const char* scope_name(Scope s);  // "global", "shared", "fragment", "local"

// The kernel source line a node came from. file points at an interned string (never freed).
struct Loc {
  const std::string* file = nullptr;
  int line = 0;
  static Loc make(std::string_view file, int line);
  bool known() const { return file != nullptr; }
  std::string str() const;  // "kernel.py:12", or "<unknown>"
};

}  // namespace tessera::tl
