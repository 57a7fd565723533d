#include "tessera/core/dtype.h"

#include <string>

#include "tessera/core/error.h"

namespace tessera {

int dtype_storage_bytes(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF4E2M1:
    case DType::kUE8M0:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 1;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "float32";
    case DType::kF64:
      return "float64";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    case DType::kF8E4M3:
      return "float8_e4m3fn";
    case DType::kF8E5M2:
      return "float8_e5m2";
    case DType::kF4E2M1:
      return "float4_e2m1fn_x2";
    case DType::kUE8M0:
      return "float8_e8m0fnu";
    case DType::kI8:
      return "int8";
    case DType::kU8:
      return "uint8";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  struct Alias {
    const char* name;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kF32},
      {"f32", DType::kF32},
      {"float", DType::kF32},
      {"float64", DType::kF64},
      {"f64", DType::kF64},
      {"double", DType::kF64},
      {"bfloat16", DType::kBF16},
      {"bf16", DType::kBF16},
      {"float16", DType::kF16},
      {"f16", DType::kF16},
      {"half", DType::kF16},
      {"float8_e4m3fn", DType::kF8E4M3},
      {"e4m3", DType::kF8E4M3},
      {"fp8", DType::kF8E4M3},
      {"float8_e5m2", DType::kF8E5M2},
      {"e5m2", DType::kF8E5M2},
      {"float4_e2m1fn_x2", DType::kF4E2M1},
      {"e2m1", DType::kF4E2M1},
      {"fp4", DType::kF4E2M1},
      {"float8_e8m0fnu", DType::kUE8M0},
      {"ue8m0", DType::kUE8M0},
      {"int8", DType::kI8},
      {"uint8", DType::kU8},
      {"int32", DType::kI32},
      {"int64", DType::kI64},
      {"bool", DType::kBool},
  };
  for (const Alias& a : kAliases)
    if (name == a.name) return a.t;
  fail(ErrorCode::kInvalidArgument, "unknown dtype name '", std::string(name), "'");
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return f32_from_bits(sign | 0x7F800000u | (m << 13));
  // Normals and subnormals: rescale an f32 with the same fields by 2^(127-15).
  const float mag = f32_from_bits(e << 23 | m << 13) * 0x1p112f;
  return f32_from_bits(sign | f32_bits(mag));
}

}  // namespace tessera
