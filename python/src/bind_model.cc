// The DeepSeek-V3.2 runner of tessera/model.h as _C.Model. tessera.model wraps it (argument checks,
// docstrings); steps run without the GIL and return new numpy float32 arrays.
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "tessera/model.h"
#include "tessera/model_ep.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

// Moves a vector into a numpy array of the given shape (the array owns the memory).
template <class T>
nb::object to_numpy(std::vector<T>&& v, std::vector<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner));
}

// (logits, hidden, topk); the last two are None unless asked for.
nb::tuple step_result(model::StepOutput&& out, const model::Config& c, bool hidden) {
  const size_t rows = size_t(out.rows), layers = size_t(c.n_layers);
  nb::object logits = to_numpy(std::move(out.logits), {rows, size_t(c.vocab_size)});
  if (!hidden) return nb::make_tuple(logits, nb::none(), nb::none());
  return nb::make_tuple(logits, to_numpy(std::move(out.hidden), {layers, rows, size_t(c.dim)}),
                        to_numpy(std::move(out.topk), {layers, rows, size_t(c.index_topk)}));
}

nb::dict config_dict(const model::Config& c) {
  nb::dict d;
  d["vocab_size"] = c.vocab_size;
  d["dim"] = c.dim;
  d["inter_dim"] = c.inter_dim;
  d["moe_inter_dim"] = c.moe_inter_dim;
  d["n_layers"] = c.n_layers;
  d["n_dense_layers"] = c.n_dense_layers;
  d["n_heads"] = c.n_heads;
  d["n_routed_experts"] = c.n_routed_experts;
  d["n_shared_experts"] = c.n_shared_experts;
  d["n_activated_experts"] = c.n_activated_experts;
  d["n_expert_groups"] = c.n_expert_groups;
  d["n_limited_groups"] = c.n_limited_groups;
  d["score_func"] = c.score_func;
  d["route_scale"] = c.route_scale;
  d["q_lora_rank"] = c.q_lora_rank;
  d["kv_lora_rank"] = c.kv_lora_rank;
  d["qk_nope_head_dim"] = c.qk_nope_head_dim;
  d["qk_rope_head_dim"] = c.qk_rope_head_dim;
  d["v_head_dim"] = c.v_head_dim;
  d["original_seq_len"] = c.original_seq_len;
  d["rope_theta"] = c.rope_theta;
  d["rope_factor"] = c.rope_factor;
  d["beta_fast"] = c.beta_fast;
  d["beta_slow"] = c.beta_slow;
  d["mscale"] = c.mscale;
  d["max_seq_len"] = c.max_seq_len;
  d["max_batch_size"] = c.max_batch_size;
  d["index_n_heads"] = c.index_n_heads;
  d["index_head_dim"] = c.index_head_dim;
  d["index_topk"] = c.index_topk;
  d["dtype"] = c.dtype;
  if (c.scale_fmt.empty())
    d["scale_fmt"] = nb::none();
  else
    d["scale_fmt"] = c.scale_fmt;
  return d;
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<model::Model>(m, "Model")
      .def(
          "__init__",
          [](model::Model* self, const std::string& path, int64_t max_batch_size, int64_t max_seq_len, int ranks,
             std::shared_ptr<ep::Group> ep_group, int64_t ep_max_tokens, double ep_timeout, bool batch_invariant,
             bool prefault_weights, bool lock_weights) {
            nb::gil_scoped_release unlocked;
            model::ModelOptions opt;
            opt.max_batch_size = max_batch_size;
            opt.max_seq_len = max_seq_len;
            opt.ranks = ranks;
            opt.batch_invariant = batch_invariant;
            opt.prefault_weights = prefault_weights;
            opt.lock_weights = lock_weights;
            // The exchange is collective over the group; the config comes from the checkpoint.
            if (ep_group)
              opt.exchange = model::make_ep_exchange(ep_group, model::Config::from_file(path + "/config.json"),
                                                     ep_max_tokens, ep_timeout);
            new (self) model::Model(path, opt);
          },
          nb::arg("path"), nb::arg("max_batch_size"), nb::arg("max_seq_len"), nb::arg("ranks"),
          nb::arg("ep_group").none() = nullptr, nb::arg("ep_max_tokens") = 0, nb::arg("ep_timeout") = 300.0,
          nb::arg("batch_invariant") = false, nb::arg("prefault_weights") = false, nb::arg("lock_weights") = false)
      .def("config", [](const model::Model& self) { return config_dict(self.config()); })
      .def_prop_ro("max_batch_size", &model::Model::max_batch_size)
      .def_prop_ro("max_seq_len", &model::Model::max_seq_len)
      .def("seq_len", &model::Model::seq_len, nb::arg("slot"))
      .def("reset", &model::Model::reset, nb::arg("slot"))
      .def("reset_all", &model::Model::reset_all)
      .def(
          "prefill",
          [](model::Model& self, const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
             bool all_tokens, bool return_hidden) {
            model::StepOutput out;
            {
              nb::gil_scoped_release unlocked;
              out = self.prefill(slots, tokens, all_tokens, return_hidden);
            }
            return step_result(std::move(out), self.config(), return_hidden);
          },
          nb::arg("slots"), nb::arg("tokens"), nb::arg("all_tokens"), nb::arg("return_hidden"))
      .def(
          "decode",
          [](model::Model& self, const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
             bool return_hidden) {
            model::StepOutput out;
            {
              nb::gil_scoped_release unlocked;
              out = self.decode(slots, tokens, return_hidden);
            }
            return step_result(std::move(out), self.config(), return_hidden);
          },
          nb::arg("slots"), nb::arg("tokens"), nb::arg("return_hidden"))
      .def("generate", &model::Model::generate, nb::arg("prompts"), nb::arg("max_new_tokens"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("fill_synthetic_context", &model::Model::fill_synthetic_context, nb::arg("slot"), nb::arg("len"),
           nb::arg("seed"), nb::call_guard<nb::gil_scoped_release>())
      .def("last_step_times", [](const model::Model& self) {
        nb::dict d;
        const model::StepTimes& t = self.last_step_times();
        for (int i = 0; i < int(model::Component::kCount); ++i)
          d[model::component_name(model::Component(i))] = t.seconds[i];
        return d;
      });
}

}  // namespace tessera::python
