// Whole-array versions of the scalar conversions in tessera/core/dtype.h. Tests compare them with
// ml_dtypes over every encoding; the quantisers of tessera.deep_gemm use them to encode.
//   cast_from_f32(x: float32 array, name) -> uint16 (bf16, f16) or uint8 codes, same shape
//   to_f32(codes: uint16/uint8 array, name) -> float32 array, same shape
// Names: bfloat16, float16, float8_e4m3fn, float8_e5m2, float4_e2m1fn (one code per byte, low nibble),
// float8_e8m0fnu; encode-only variants: float8_e4m3fn_sat, float8_e5m2_sat (saturating),
// float4_e2m1fn_deepgemm (DeepGEMM's midpoint rule), float8_e8m0fnu_ceil (DeepGEMM's ceil_to_ue8m0).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using F32In = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using CodesIn = nb::ndarray<nb::c_contig, nb::device::cpu>;

std::vector<size_t> shape_of(const nb::ndarray<nb::c_contig, nb::device::cpu>& a) {
  std::vector<size_t> s(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) s[d] = a.shape(d);
  return s;
}

// Applies fn to n inputs into a new numpy array of Out with the given shape, without the GIL.
template <class Out, class In, class Fn>
nb::object map_to_numpy(const In* in, size_t n, const std::vector<size_t>& shape, Fn fn) {
  Out* out = new Out[n];
  nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<Out*>(p); });
  {
    nb::gil_scoped_release unlocked;
    for (size_t i = 0; i < n; ++i) out[i] = fn(in[i]);
  }
  return nb::cast(nb::ndarray<nb::numpy, Out>(out, shape.size(), shape.data(), owner));
}

nb::object cast_from_f32(F32In x, const std::string& name) {
  const float* in = x.data();
  const size_t n = x.size();
  std::vector<size_t> shape(x.ndim());
  for (size_t d = 0; d < x.ndim(); ++d) shape[d] = x.shape(d);
  if (name == "bfloat16") return map_to_numpy<uint16_t>(in, n, shape, f32_to_bf16);
  if (name == "float16") return map_to_numpy<uint16_t>(in, n, shape, f32_to_f16);
  if (name == "float8_e4m3fn") return map_to_numpy<uint8_t>(in, n, shape, f32_to_e4m3);
  if (name == "float8_e4m3fn_sat") return map_to_numpy<uint8_t>(in, n, shape, f32_to_e4m3_sat);
  if (name == "float8_e5m2") return map_to_numpy<uint8_t>(in, n, shape, f32_to_e5m2);
  if (name == "float8_e5m2_sat") return map_to_numpy<uint8_t>(in, n, shape, f32_to_e5m2_sat);
  if (name == "float4_e2m1fn") return map_to_numpy<uint8_t>(in, n, shape, f32_to_e2m1);
  if (name == "float4_e2m1fn_deepgemm") return map_to_numpy<uint8_t>(in, n, shape, f32_to_e2m1_deepgemm);
  if (name == "float8_e8m0fnu") return map_to_numpy<uint8_t>(in, n, shape, f32_to_ue8m0);
  if (name == "float8_e8m0fnu_ceil") return map_to_numpy<uint8_t>(in, n, shape, f32_to_ue8m0_ceil);
  fail(ErrorCode::kInvalidArgument,
       "cast_from_f32: argument 'dtype' must be one of bfloat16, float16, "
       "float8_e4m3fn[_sat], float8_e5m2[_sat], float4_e2m1fn[_deepgemm], float8_e8m0fnu[_ceil], got '",
       name, "'");
}

template <class Code>
const Code* codes_of(const CodesIn& codes, const std::string& name) {
  TESSERA_CHECK(codes.dtype() == nb::dtype<Code>(), "to_f32: argument 'codes' must hold ", sizeof(Code) * 8,
                "-bit unsigned codes for ", name, " (view the array as uint", sizeof(Code) * 8, ")");
  return static_cast<const Code*>(codes.data());
}

nb::object to_f32(CodesIn codes, const std::string& name) {
  const size_t n = codes.size();
  const std::vector<size_t> shape = shape_of(codes);
  if (name == "bfloat16") return map_to_numpy<float>(codes_of<uint16_t>(codes, name), n, shape, bf16_to_f32);
  if (name == "float16") return map_to_numpy<float>(codes_of<uint16_t>(codes, name), n, shape, f16_to_f32);
  if (name == "float8_e4m3fn") return map_to_numpy<float>(codes_of<uint8_t>(codes, name), n, shape, e4m3_to_f32);
  if (name == "float8_e5m2") return map_to_numpy<float>(codes_of<uint8_t>(codes, name), n, shape, e5m2_to_f32);
  if (name == "float4_e2m1fn") return map_to_numpy<float>(codes_of<uint8_t>(codes, name), n, shape, e2m1_to_f32);
  if (name == "float8_e8m0fnu") return map_to_numpy<float>(codes_of<uint8_t>(codes, name), n, shape, ue8m0_to_f32);
  fail(ErrorCode::kInvalidArgument,
       "to_f32: argument 'dtype' must be one of bfloat16, float16, float8_e4m3fn, "
       "float8_e5m2, float4_e2m1fn, float8_e8m0fnu, got '",
       name, "'");
}

}  // namespace

void bind_dtypes(nb::module_& m) {
  m.def("cast_from_f32", &cast_from_f32, nb::arg("x"), nb::arg("dtype"),
        "Encodes a C-contiguous float32 array into the codes of `dtype` (uint16 or uint8, same shape).");
  m.def("to_f32", &to_f32, nb::arg("codes"), nb::arg("dtype"),
        "Decodes a C-contiguous array of `dtype` codes (uint16 or uint8) into float32.");
}

}  // namespace tessera::python
