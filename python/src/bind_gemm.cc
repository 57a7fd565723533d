// The dense GEMM API of tessera/gemm.h. Arguments arrive as ArrayRef (tessera/_arrays.py); every
// compute call runs without the GIL. Argument names in messages are DeepGEMM's ('a', 'b', 'd', 'c').
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>

#include <array>
#include <optional>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/gemm.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using PlainGemm = void (*)(const TensorView&, const TensorView&, const TensorView&, const TensorView*);
using ScaledGemm = void (*)(const gemm::ScaledTensor&, const gemm::ScaledTensor&, const TensorView&, const TensorView*,
                            const gemm::Recipe&);

template <PlainGemm kFn>
void plain_gemm(const char* fn, const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef* c) {
  const TensorView av = to_view(a, fn, "a"), bv = to_view(b, fn, "b"), dv = to_view(d, fn, "d");
  TensorView cv;
  if (c) cv = to_view(*c, fn, "c");
  kFn(av, bv, dv, c ? &cv : nullptr);
}

template <ScaledGemm kFn>
void scaled_gemm(const char* fn, const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb,
                 const ArrayRef& d, const ArrayRef* c, std::optional<std::array<int, 3>> recipe,
                 std::optional<std::array<int, 2>> recipe_a, std::optional<std::array<int, 2>> recipe_b,
                 bool disable_ue8m0_cast) {
  const gemm::ScaledTensor as{to_view(a, fn, "a"), to_view(sfa, fn, "a.scale")};
  const gemm::ScaledTensor bs{to_view(b, fn, "b"), to_view(sfb, fn, "b.scale")};
  const TensorView dv = to_view(d, fn, "d");
  TensorView cv;
  if (c) cv = to_view(*c, fn, "c");
  gemm::Recipe r;
  r.recipe = recipe;
  r.recipe_a = recipe_a;
  r.recipe_b = recipe_b;
  r.disable_ue8m0_cast = disable_ue8m0_cast;
  kFn(as, bs, dv, c ? &cv : nullptr, r);
}

template <PlainGemm kFn>
void def_plain(nb::module_& m, const char* name) {
  m.def(
      name,
      [name](const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef* c) {
        plain_gemm<kFn>(name, a, b, d, c);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("c").none(), nb::call_guard<nb::gil_scoped_release>());
}

template <ScaledGemm kFn>
void def_scaled(nb::module_& m, const char* name) {
  m.def(
      name,
      [name](const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb, const ArrayRef& d,
             const ArrayRef* c, std::optional<std::array<int, 3>> recipe, std::optional<std::array<int, 2>> recipe_a,
             std::optional<std::array<int, 2>> recipe_b, bool disable_ue8m0_cast) {
        scaled_gemm<kFn>(name, a, sfa, b, sfb, d, c, recipe, recipe_a, recipe_b, disable_ue8m0_cast);
      },
      nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("c").none(),
      nb::arg("recipe").none(), nb::arg("recipe_a").none(), nb::arg("recipe_b").none(), nb::arg("disable_ue8m0_cast"),
      nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace

void bind_gemm(nb::module_& m) {
  def_plain<gemm::bf16_gemm_nt>(m, "bf16_gemm_nt");
  def_plain<gemm::bf16_gemm_nn>(m, "bf16_gemm_nn");
  def_plain<gemm::bf16_gemm_tn>(m, "bf16_gemm_tn");
  def_plain<gemm::bf16_gemm_tt>(m, "bf16_gemm_tt");
  def_plain<gemm::cublaslt_gemm_nt>(m, "cublaslt_gemm_nt");
  def_plain<gemm::cublaslt_gemm_nn>(m, "cublaslt_gemm_nn");
  def_plain<gemm::cublaslt_gemm_tn>(m, "cublaslt_gemm_tn");
  def_plain<gemm::cublaslt_gemm_tt>(m, "cublaslt_gemm_tt");
  def_scaled<gemm::fp8_fp4_gemm_nt>(m, "fp8_fp4_gemm_nt");
  def_scaled<gemm::fp8_fp4_gemm_nn>(m, "fp8_fp4_gemm_nn");
  def_scaled<gemm::fp8_fp4_gemm_tn>(m, "fp8_fp4_gemm_tn");
  def_scaled<gemm::fp8_fp4_gemm_tt>(m, "fp8_fp4_gemm_tt");

  m.def("get_tma_aligned_size", &gemm::get_tma_aligned_size, nb::arg("x"), nb::arg("element_size"));
  m.def(
      "copy_to_mn_major_tma_aligned",
      [](const ArrayRef& sf, const ArrayRef& dst) {
        const char* fn = "get_mn_major_tma_aligned_tensor";
        gemm::copy_to_mn_major_tma_aligned(to_view(sf, fn, "sf"), to_view(dst, fn, "dst"));
      },
      nb::arg("sf"), nb::arg("dst"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "pack_ue8m0_mn_major",
      [](const ArrayRef& sf, const ArrayRef& dst) {
        const char* fn = "get_mn_major_tma_aligned_packed_ue8m0_tensor";
        gemm::pack_ue8m0_mn_major(to_view(sf, fn, "sf"), to_view(dst, fn, "dst"));
      },
      nb::arg("sf"), nb::arg("dst"), nb::call_guard<nb::gil_scoped_release>());
  m.def("set_num_sms", &gemm::set_num_sms, nb::arg("new_num_sms"));
  m.def("get_num_sms", &gemm::get_num_sms);
}

}  // namespace tessera::python
