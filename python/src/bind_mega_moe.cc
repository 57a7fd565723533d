// DeepGEMM's Mega MoE of tessera/mega_moe.h: the symmetric buffer (its own region as a numpy byte
// array, the offsets of its views) and the two fused calls. tessera/deep_gemm/_mega.py gives them
// DeepGEMM's names and defaults. The calls wait for the other ranks, so they run without the GIL.
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/ep/group.h"
#include "tessera/mega_moe.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using mega_moe::SymmBuffer;

mega_moe::Options options(const std::array<int, 3>& recipe, const std::string& activation, std::optional<float> clamp,
                          bool fast_math) {
  mega_moe::Options o;
  o.recipe = recipe;
  o.activation = activation;
  o.activation_clamp = clamp;
  o.fast_math = fast_math;
  return o;
}

struct OptionalStats {
  TensorView view;
  const TensorView* get = nullptr;
  OptionalStats(const ArrayRef* ref, const char* fn) {
    if (ref) {
      view = to_view(*ref, fn, "cumulative_local_expert_recv_stats");
      get = &view;
    }
  }
};

}  // namespace

void bind_mega_moe(nb::module_& m) {
  nb::class_<SymmBuffer>(m, "MegaMoeBuffer",
                         "A rank's Mega MoE symmetric buffer (tessera.deep_gemm.SymmBuffer wraps it).")
      .def_static(
          "create",
          [](std::shared_ptr<ep::Group> group, int num_experts, int num_max_tokens_per_rank, int num_topk, int hidden,
             int intermediate_hidden, const std::string& mma_type) {
            mega_moe::BufferShape s;
            s.num_experts = num_experts;
            s.num_max_tokens_per_rank = num_max_tokens_per_rank;
            s.num_topk = num_topk;
            s.hidden = hidden;
            s.intermediate_hidden = intermediate_hidden;
            s.mma_type = mega_moe::parse_mma_type("get_symm_buffer_for_mega_moe", mma_type);
            nb::gil_scoped_release release;
            return SymmBuffer::create(std::move(group), s);
          },
          nb::arg("group").none(), nb::arg("num_experts"), nb::arg("num_max_tokens_per_rank"), nb::arg("num_topk"),
          nb::arg("hidden"), nb::arg("intermediate_hidden"), nb::arg("mma_type"))
      .def_prop_ro("rank", &SymmBuffer::rank)
      .def_prop_ro("num_ranks", [](const SymmBuffer& b) { return b.shape().num_ranks; })
      .def_prop_ro("nbytes", &SymmBuffer::bytes)
      .def("offsets",
           [](const SymmBuffer& b) {
             const mega_moe::BufferLayout& l = b.layout();
             nb::dict d;
             d["x"] = l.x;
             d["x_sf"] = l.x_sf;
             d["topk_idx"] = l.topk_idx;
             d["topk_weights"] = l.topk_weights;
             d["combine"] = l.combine;
             return d;
           })
      .def(
          "memory",
          [](nb::handle self) {
            const SymmBuffer& b = nb::cast<const SymmBuffer&>(self);
            const size_t shape[1] = {b.bytes()};
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(b.data(), 1, shape, self);
          },
          "This rank's region as a uint8 numpy array that keeps the buffer alive.");

  m.def(
      "fp8_fp4_mega_moe",
      [](const ArrayRef& y, const ArrayRef& l1, const ArrayRef& l1_sf, const ArrayRef& l2, const ArrayRef& l2_sf,
         const ArrayRef* stats, SymmBuffer& buffer, std::array<int, 3> recipe, const std::string& activation,
         std::optional<float> clamp, bool fast_math) {
        const char* fn = "fp8_fp4_mega_moe";
        const OptionalStats st(stats, fn);
        const gemm::ScaledTensor w1{to_view(l1, fn, "l1_weights[0]"), to_view(l1_sf, fn, "l1_weights[1]")};
        const gemm::ScaledTensor w2{to_view(l2, fn, "l2_weights[0]"), to_view(l2_sf, fn, "l2_weights[1]")};
        const TensorView yv = to_view(y, fn, "y");
        nb::gil_scoped_release release;
        mega_moe::fp8_fp4_mega_moe(yv, w1, w2, st.get, buffer, options(recipe, activation, clamp, fast_math));
      },
      nb::arg("y"), nb::arg("l1"), nb::arg("l1_sf"), nb::arg("l2"), nb::arg("l2_sf"), nb::arg("stats").none(),
      nb::arg("buffer"), nb::arg("recipe"), nb::arg("activation"), nb::arg("activation_clamp").none(),
      nb::arg("fast_math"));

  m.def(
      "bf16_mega_moe",
      [](const ArrayRef& y, const ArrayRef& l1, const ArrayRef& l2, const ArrayRef* stats, SymmBuffer& buffer,
         const std::string& activation, std::optional<float> clamp, bool fast_math) {
        const char* fn = "bf16_mega_moe";
        const OptionalStats st(stats, fn);
        const TensorView yv = to_view(y, fn, "y"), w1 = to_view(l1, fn, "l1_weights"),
                         w2 = to_view(l2, fn, "l2_weights");
        nb::gil_scoped_release release;
        mega_moe::bf16_mega_moe(yv, w1, w2, st.get, buffer, options({1, 1, 32}, activation, clamp, fast_math));
      },
      nb::arg("y"), nb::arg("l1"), nb::arg("l2"), nb::arg("stats").none(), nb::arg("buffer"), nb::arg("activation"),
      nb::arg("activation_clamp").none(), nb::arg("fast_math"));
}

}  // namespace tessera::python
