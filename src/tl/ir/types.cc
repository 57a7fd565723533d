// Element types, scopes and source locations of the tile language IR.
#include "tessera/tl/types.h"

#include <mutex>
#include <set>
#include <string>

#include "tessera/core/error.h"

namespace tessera::tl {
namespace {

struct Name {
  const char* name;
  DataType type;
};
// The first entry for each type is its canonical name; the rest are TileLang / numpy aliases.
constexpr Name kNames[] = {
    {"bool", DataType::kBool},
    {"int8", DataType::kInt8},
    {"int16", DataType::kInt16},
    {"int32", DataType::kInt32},
    {"int64", DataType::kInt64},
    {"uint8", DataType::kUInt8},
    {"uint16", DataType::kUInt16},
    {"uint32", DataType::kUInt32},
    {"uint64", DataType::kUInt64},
    {"float16", DataType::kFloat16},
    {"bfloat16", DataType::kBFloat16},
    {"float32", DataType::kFloat32},
    {"float64", DataType::kFloat64},
    {"float8_e4m3", DataType::kFloat8E4M3},
    {"float8_e5m2", DataType::kFloat8E5M2},
    {"float4_e2m1", DataType::kFloat4E2M1},
    {"handle", DataType::kHandle},
    {"float8_e4m3fn", DataType::kFloat8E4M3},
    {"float4_e2m1fn", DataType::kFloat4E2M1},
    {"float4_e2m1fn_x2", DataType::kFloat4E2M1},
    {"float", DataType::kFloat32},
    {"half", DataType::kFloat16},
    {"double", DataType::kFloat64},
    {"int", DataType::kInt32},
    {"bf16", DataType::kBFloat16},
    {"fp16", DataType::kFloat16},
    {"fp32", DataType::kFloat32},
};

int rank(DataType t) {  // promotion order of compute types
  switch (t) {
    case DataType::kBool:
      return 0;
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kInt32:
      return 1;
    case DataType::kUInt32:
      return 2;
    case DataType::kInt64:
      return 3;
    case DataType::kUInt64:
      return 4;
    case DataType::kFloat32:
      return 5;
    case DataType::kFloat64:
      return 6;
    default:
      return 5;  // low-precision floats compute in float32
  }
}

}  // namespace

const char* type_name(DataType t) {
  for (const Name& n : kNames)
    if (n.type == t) return n.name;
  return "?";
}

DataType type_from_name(std::string_view name) {
  for (const Name& n : kNames)
    if (name == n.name) return n.type;
  fail(ErrorCode::kInvalidArgument, "tl: unknown dtype '", std::string(name),
       "'; expected one of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, "
       "float32, float64, float8_e4m3, float8_e5m2, float4_e2m1");
}

int type_bytes(DataType t) {
  switch (t) {
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2:
    case DataType::kFloat4E2M1:
      return 1;
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUInt32:
    case DataType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

bool is_float(DataType t) {
  switch (t) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2:
    case DataType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool is_int(DataType t) {
  return !is_float(t) && t != DataType::kHandle;
}

bool is_signed_int(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 || t == DataType::kInt64;
}

bool is_low_precision_float(DataType t) {
  return is_float(t) && t != DataType::kFloat32 && t != DataType::kFloat64;
}

DataType compute_type(DataType t) {
  if (is_low_precision_float(t)) return DataType::kFloat32;
  switch (t) {
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kInt16:
    case DataType::kUInt16:
      return DataType::kInt32;
    default:
      return t;
  }
}

DataType promote(DataType a, DataType b) {
  const DataType ca = compute_type(a), cb = compute_type(b);
  return rank(ca) >= rank(cb) ? ca : cb;
}

const char* scope_name(Scope s) {
  switch (s) {
    case Scope::kGlobal:
      return "global";
    case Scope::kShared:
      return "shared";
    case Scope::kFragment:
      return "fragment";
    case Scope::kLocal:
      return "local";
  }
  return "?";
}

Loc Loc::make(std::string_view file, int line) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> names;  // never freed: Loc keeps pointers into it
  std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(file);
  if (it == names.end()) it = names.emplace(file).first;
  return Loc{&*it, line};
}

std::string Loc::str() const {
  if (!file) return "<unknown>";
  return *file + ":" + std::to_string(line);
}

}  // namespace tessera::tl
