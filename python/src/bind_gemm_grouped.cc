// The MoE GEMMs and the other DeepGEMM GEMMs of tessera/gemm_grouped.h. Arguments arrive as ArrayRef
// (tessera/_arrays.py) in a flat positional form; tessera/deep_gemm/_grouped.py and _einsum.py give
// them DeepGEMM's names and defaults. Every compute call runs without the GIL.
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/gemm_grouped.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using OptRecipe = std::optional<std::array<int, 3>>;
using OptPair = std::optional<std::array<int, 2>>;

gemm::Recipe make_recipe(OptRecipe recipe, OptPair recipe_a, OptPair recipe_b, bool disable_ue8m0_cast) {
  gemm::Recipe r;
  r.recipe = recipe;
  r.recipe_a = recipe_a;
  r.recipe_b = recipe_b;
  r.disable_ue8m0_cast = disable_ue8m0_cast;
  return r;
}

gemm::ScaledTensor scaled(const char* fn, const ArrayRef& data, const ArrayRef& sf, const char* data_arg,
                          const char* sf_arg) {
  return {to_view(data, fn, data_arg), to_view(sf, fn, sf_arg)};
}

gemm::ContiguousLayout contiguous_layout(const char* fn, const ArrayRef& grouped_layout, bool use_psum_layout,
                                         bool ensure_zero_padding, int mk_alignment) {
  gemm::ContiguousLayout layout;
  layout.grouped_layout = to_view(grouped_layout, fn, "grouped_layout");
  layout.use_psum_layout = use_psum_layout;
  layout.ensure_zero_padding = ensure_zero_padding;
  layout.mk_alignment = mk_alignment;
  return layout;
}

gemm::KGroupedLayout k_grouped_layout(const char* fn, const ArrayRef& grouped_layout, std::vector<int64_t> ks,
                                      bool use_psum_layout, int k_alignment) {
  gemm::KGroupedLayout layout;
  layout.grouped_layout = to_view(grouped_layout, fn, "grouped_layout");
  layout.ks = std::move(ks);
  layout.use_psum_layout = use_psum_layout;
  layout.k_alignment = k_alignment;
  return layout;
}

// Holds the view of an optional array so a pointer to it can be passed on.
struct OptionalView {
  TensorView view;
  bool present = false;
  OptionalView(const ArrayRef* ref, const char* fn, const char* arg) {
    if (ref) {
      view = to_view(*ref, fn, arg);
      present = true;
    }
  }
  const TensorView* get() const { return present ? &view : nullptr; }
};

using PlainContiguous = void (*)(const TensorView&, const TensorView&, const TensorView&,
                                 const gemm::ContiguousLayout&);
using ScaledContiguous = void (*)(const gemm::ScaledTensor&, const gemm::ScaledTensor&, const TensorView&,
                                  const gemm::ContiguousLayout&, const gemm::Recipe&);

template <PlainContiguous kFn>
void def_plain_contiguous(nb::module_& m, const char* name) {
  m.def(
      name,
      [name](const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef& grouped_layout,
             bool use_psum_layout, bool ensure_zero_padding, int mk_alignment) {
        kFn(to_view(a, name, "a"), to_view(b, name, "b"), to_view(d, name, "d"),
            contiguous_layout(name, grouped_layout, use_psum_layout, ensure_zero_padding, mk_alignment));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("grouped_layout"), nb::arg("use_psum_layout"),
      nb::arg("ensure_zero_padding"), nb::arg("mk_alignment"), nb::call_guard<nb::gil_scoped_release>());
}

template <ScaledContiguous kFn>
void def_scaled_contiguous(nb::module_& m, const char* name) {
  m.def(
      name,
      [name](const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb, const ArrayRef& d,
             const ArrayRef& grouped_layout, OptRecipe recipe, OptPair recipe_a, OptPair recipe_b,
             bool disable_ue8m0_cast, bool use_psum_layout, bool ensure_zero_padding, int mk_alignment) {
        kFn(scaled(name, a, sfa, "a", "a.scale"), scaled(name, b, sfb, "b", "b.scale"), to_view(d, name, "d"),
            contiguous_layout(name, grouped_layout, use_psum_layout, ensure_zero_padding, mk_alignment),
            make_recipe(recipe, recipe_a, recipe_b, disable_ue8m0_cast));
      },
      nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("grouped_layout"),
      nb::arg("recipe").none(), nb::arg("recipe_a").none(), nb::arg("recipe_b").none(), nb::arg("disable_ue8m0_cast"),
      nb::arg("use_psum_layout"), nb::arg("ensure_zero_padding"), nb::arg("mk_alignment"),
      nb::call_guard<nb::gil_scoped_release>());
}

void bind_m_grouped(nb::module_& m) {
  def_plain_contiguous<gemm::m_grouped_bf16_gemm_nt_contiguous>(m, "m_grouped_bf16_gemm_nt_contiguous");
  def_plain_contiguous<gemm::m_grouped_bf16_gemm_nn_contiguous>(m, "m_grouped_bf16_gemm_nn_contiguous");
  def_scaled_contiguous<gemm::m_grouped_fp8_fp4_gemm_nt_contiguous>(m, "m_grouped_fp8_fp4_gemm_nt_contiguous");
  def_scaled_contiguous<gemm::m_grouped_fp8_fp4_gemm_nn_contiguous>(m, "m_grouped_fp8_fp4_gemm_nn_contiguous");

  m.def(
      "m_grouped_bf16_gemm_nt_masked",
      [](const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef& masked_m, int64_t expected_m) {
        const char* fn = "m_grouped_bf16_gemm_nt_masked";
        gemm::m_grouped_bf16_gemm_nt_masked(to_view(a, fn, "a"), to_view(b, fn, "b"), to_view(d, fn, "d"),
                                            to_view(masked_m, fn, "masked_m"), expected_m);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("masked_m"), nb::arg("expected_m"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "m_grouped_fp8_fp4_gemm_nt_masked",
      [](const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb, const ArrayRef& d,
         const ArrayRef& masked_m, int64_t expected_m, OptRecipe recipe, OptPair recipe_a, OptPair recipe_b,
         bool disable_ue8m0_cast) {
        const char* fn = "m_grouped_fp8_fp4_gemm_nt_masked";
        gemm::m_grouped_fp8_fp4_gemm_nt_masked(scaled(fn, a, sfa, "a", "a.scale"), scaled(fn, b, sfb, "b", "b.scale"),
                                               to_view(d, fn, "d"), to_view(masked_m, fn, "masked_m"), expected_m,
                                               make_recipe(recipe, recipe_a, recipe_b, disable_ue8m0_cast));
      },
      nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("masked_m"),
      nb::arg("expected_m"), nb::arg("recipe").none(), nb::arg("recipe_a").none(), nb::arg("recipe_b").none(),
      nb::arg("disable_ue8m0_cast"), nb::call_guard<nb::gil_scoped_release>());
}

void bind_k_grouped(nb::module_& m) {
  m.def(
      "k_grouped_bf16_gemm_tn_contiguous",
      [](const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef* c, const ArrayRef& grouped_layout,
         std::vector<int64_t> ks, bool use_psum_layout, int k_alignment) {
        const char* fn = "k_grouped_bf16_gemm_tn_contiguous";
        const OptionalView cv(c, fn, "c");
        gemm::k_grouped_bf16_gemm_tn_contiguous(
            to_view(a, fn, "a"), to_view(b, fn, "b"), to_view(d, fn, "d"), cv.get(),
            k_grouped_layout(fn, grouped_layout, std::move(ks), use_psum_layout, k_alignment));
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("c").none(), nb::arg("grouped_layout"), nb::arg("ks"),
      nb::arg("use_psum_layout"), nb::arg("k_alignment"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "k_grouped_fp8_gemm_tn_contiguous",
      [](const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb, const ArrayRef& d,
         const ArrayRef* c, const ArrayRef& grouped_layout, std::vector<int64_t> ks, bool use_psum_layout,
         int k_alignment, int gran_k) {
        const char* fn = "k_grouped_fp8_gemm_tn_contiguous";
        const OptionalView cv(c, fn, "c");
        gemm::k_grouped_fp8_gemm_tn_contiguous(
            scaled(fn, a, sfa, "a", "a.scale"), scaled(fn, b, sfb, "b", "b.scale"), to_view(d, fn, "d"), cv.get(),
            k_grouped_layout(fn, grouped_layout, std::move(ks), use_psum_layout, k_alignment), gran_k);
      },
      nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("c").none(),
      nb::arg("grouped_layout"), nb::arg("ks"), nb::arg("use_psum_layout"), nb::arg("k_alignment"), nb::arg("gran_k"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "k_grouped_fp8_gemm_nt_contiguous",
      [](const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb, const ArrayRef& d,
         const ArrayRef* c, const std::vector<int64_t>& ks) {
        const char* fn = "k_grouped_fp8_gemm_nt_contiguous";
        const OptionalView cv(c, fn, "c");
        gemm::k_grouped_fp8_gemm_nt_contiguous(scaled(fn, a, sfa, "a", "a.scale"), scaled(fn, b, sfb, "b", "b.scale"),
                                               to_view(d, fn, "d"), cv.get(), ks);
      },
      nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("c").none(), nb::arg("ks"),
      nb::call_guard<nb::gil_scoped_release>());
}

void bind_other_gemms(nb::module_& m) {
  m.def(
      "fp8_gemm_nt_skip_head_mid",
      [](const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb, const ArrayRef& d,
         std::array<int64_t, 3> head_splits, OptRecipe recipe, OptPair recipe_a, OptPair recipe_b,
         bool disable_ue8m0_cast) {
        const char* fn = "fp8_gemm_nt_skip_head_mid";
        gemm::fp8_gemm_nt_skip_head_mid(scaled(fn, a, sfa, "a", "a.scale"), scaled(fn, b, sfb, "b", "b.scale"),
                                        to_view(d, fn, "d"), head_splits,
                                        make_recipe(recipe, recipe_a, recipe_b, disable_ue8m0_cast));
      },
      nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("head_splits"),
      nb::arg("recipe").none(), nb::arg("recipe_a").none(), nb::arg("recipe_b").none(), nb::arg("disable_ue8m0_cast"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "einsum",
      [](const std::string& expr, const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef* c) {
        const char* fn = "einsum";
        const OptionalView cv(c, fn, "c");
        gemm::einsum(expr, to_view(a, fn, "a"), to_view(b, fn, "b"), to_view(d, fn, "d"), cv.get());
      },
      nb::arg("expr"), nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("c").none(),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "fp8_einsum",
      [](const std::string& expr, const ArrayRef& a, const ArrayRef& sfa, const ArrayRef& b, const ArrayRef& sfb,
         const ArrayRef& d, const ArrayRef* c, OptRecipe recipe) {
        const char* fn = "fp8_einsum";
        const OptionalView cv(c, fn, "c");
        gemm::fp8_einsum(expr, scaled(fn, a, sfa, "a", "a.scale"), scaled(fn, b, sfb, "b", "b.scale"),
                         to_view(d, fn, "d"), cv.get(), make_recipe(recipe, std::nullopt, std::nullopt, false));
      },
      nb::arg("expr"), nb::arg("a"), nb::arg("sfa"), nb::arg("b"), nb::arg("sfb"), nb::arg("d"), nb::arg("c").none(),
      nb::arg("recipe").none(), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "tf32_hc_prenorm_gemm",
      [](const ArrayRef& a, const ArrayRef& b, const ArrayRef& d, const ArrayRef& sqr_sum, int num_splits) {
        const char* fn = "tf32_hc_prenorm_gemm";
        gemm::tf32_hc_prenorm_gemm(to_view(a, fn, "a"), to_view(b, fn, "b"), to_view(d, fn, "d"),
                                   to_view(sqr_sum, fn, "sqr_sum"), num_splits);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("d"), nb::arg("sqr_sum"), nb::arg("num_splits"),
      nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace

void bind_gemm_grouped(nb::module_& m) {
  bind_m_grouped(m);
  bind_k_grouped(m);
  bind_other_gemms(m);
}

}  // namespace tessera::python
