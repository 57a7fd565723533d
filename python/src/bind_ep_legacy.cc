// The legacy Buffer (DeepEP v1) of tessera/ep/legacy_buffer.h for tessera.deep_ep.Buffer.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/vector.h>

#include "bind_ep_util.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

nb::tuple layout(ep::Buffer& buf, const ArrayRef& topk_idx, int num_experts) {
  const ep::DispatchLayout l =
      buf.get_dispatch_layout(to_view(topk_idx, "Buffer.get_dispatch_layout", "topk_idx"), num_experts);
  return nb::make_tuple(nb::cast(l.num_tokens_per_rank), tensor_or_none(l.num_tokens_per_rdma_rank),
                        nb::cast(l.num_tokens_per_expert), nb::cast(l.is_token_in_rank));
}

nb::tuple dispatch(ep::Buffer& buf, const ArrayRef& x, const ArrayRef* sf, std::shared_ptr<ep::LegacyHandle> handle,
                   const ArrayRef* num_tokens_per_rank, const ArrayRef* num_tokens_per_rdma_rank,
                   const ArrayRef* is_token_in_rank, const ArrayRef* num_tokens_per_expert, const ArrayRef* topk_idx,
                   const ArrayRef* topk_weights, int expert_alignment, int64_t num_worst_tokens, bool async) {
  const char* fn = "Buffer.dispatch";
  ep::LegacyDispatchArgs a;
  a.x = to_view(x, fn, "x");
  a.sf = optional_view(sf, fn, "x.sf");
  a.handle = handle;
  a.num_tokens_per_rank = optional_view(num_tokens_per_rank, fn, "num_tokens_per_rank");
  a.num_tokens_per_rdma_rank = optional_view(num_tokens_per_rdma_rank, fn, "num_tokens_per_rdma_rank");
  a.is_token_in_rank = optional_view(is_token_in_rank, fn, "is_token_in_rank");
  a.num_tokens_per_expert = optional_view(num_tokens_per_expert, fn, "num_tokens_per_expert");
  a.topk_idx = optional_view(topk_idx, fn, "topk_idx");
  a.topk_weights = optional_view(topk_weights, fn, "topk_weights");
  a.expert_alignment = expert_alignment;
  a.num_worst_tokens = num_worst_tokens;
  a.async = async;
  const ep::LegacyDispatchResult r = without_gil([&] { return buf.dispatch(a); });
  return nb::make_tuple(nb::cast(r.recv_x), tensor_or_none(r.recv_sf), tensor_or_none(r.recv_topk_idx),
                        tensor_or_none(r.recv_topk_weights), r.num_recv_tokens_per_expert_list, r.handle, r.event);
}

nb::tuple combine(ep::Buffer& buf, const ArrayRef& x, const ep::LegacyHandle& handle, const ArrayRef* topk_weights,
                  const ArrayRef* bias0, const ArrayRef* bias1, bool async) {
  const auto a = combine_args<ep::LegacyCombineArgs>("Buffer.combine", x, topk_weights, bias0, bias1, async);
  return combine_outputs(without_gil([&] { return buf.combine(a, handle); }));
}

nb::tuple ll_dispatch(ep::Buffer& buf, const ArrayRef& x, const ArrayRef& topk_idx, int num_max, int num_experts,
                      const ArrayRef* stats, bool use_fp8, bool round_scale, bool use_ue8m0, bool async, bool hook) {
  const char* fn = "Buffer.low_latency_dispatch";
  ep::LowLatencyDispatchArgs a;
  a.x = to_view(x, fn, "x");
  a.topk_idx = to_view(topk_idx, fn, "topk_idx");
  a.num_max_dispatch_tokens_per_rank = num_max;
  a.num_experts = num_experts;
  a.cumulative_local_expert_recv_stats = optional_view(stats, fn, "cumulative_local_expert_recv_stats");
  a.use_fp8 = use_fp8;
  a.round_scale = round_scale;
  a.use_ue8m0 = use_ue8m0;
  a.async = async;
  a.return_recv_hook = hook;
  const ep::LowLatencyDispatchResult r = without_gil([&] { return buf.low_latency_dispatch(a); });
  return nb::make_tuple(nb::cast(r.recv_x), tensor_or_none(r.recv_scales), nb::cast(r.recv_count), r.handle, r.event);
}

nb::tuple ll_combine(ep::Buffer& buf, const ArrayRef& x, const ArrayRef& topk_idx, const ArrayRef& topk_weights,
                     const ep::LowLatencyHandle& handle, const ArrayRef* out, bool async, bool hook) {
  const char* fn = "Buffer.low_latency_combine";
  ep::LowLatencyCombineArgs a;
  a.x = to_view(x, fn, "x");
  a.topk_idx = to_view(topk_idx, fn, "topk_idx");
  a.topk_weights = to_view(topk_weights, fn, "topk_weights");
  a.out = optional_view(out, fn, "out");
  a.async = async;
  a.return_recv_hook = hook;
  const ep::LowLatencyCombineResult r = without_gil([&] { return buf.low_latency_combine(a, handle); });
  return nb::make_tuple(out ? nb::none() : nb::cast(r.combined_x), r.event);
}

}  // namespace

void bind_ep_legacy(nb::module_& m) {
  nb::class_<ep::LegacyHandle>(m, "EpLegacyHandle", "Opaque handle of a legacy Buffer dispatch.")
      .def_ro("num_recv_tokens", &ep::LegacyHandle::num_recv_tokens)
      .def_ro("rank_prefix_matrix", &ep::LegacyHandle::rank_prefix_matrix);
  nb::class_<ep::LowLatencyHandle>(m, "EpLowLatencyHandle", "Handle of a low-latency dispatch.")
      .def_ro("src_info", &ep::LowLatencyHandle::src_info)
      .def_ro("layout_range", &ep::LowLatencyHandle::layout_range)
      .def_ro("num_max_dispatch_tokens_per_rank", &ep::LowLatencyHandle::num_max_dispatch_tokens_per_rank)
      .def_ro("hidden", &ep::LowLatencyHandle::hidden)
      .def_ro("num_experts", &ep::LowLatencyHandle::num_experts);
  nb::class_<ep::Buffer>(m, "EpBuffer", "Buffer (DeepEP v1); tessera.deep_ep.Buffer wraps it.")
      .def(
          "__init__",
          [](ep::Buffer* self, std::shared_ptr<ep::Group> group, int64_t nvl, int64_t rdma, bool low_latency, int qps,
             bool explicitly_destroy, bool enable_shrink, double timeout) {
            ep::BufferConfig c;
            c.num_nvl_bytes = nvl;
            c.num_rdma_bytes = rdma;
            c.low_latency_mode = low_latency;
            c.num_qps_per_rank = qps;
            c.explicitly_destroy = explicitly_destroy;
            c.enable_shrink = enable_shrink;
            c.num_cpu_timeout_secs = timeout;
            nb::gil_scoped_release release;
            new (self) ep::Buffer(std::move(group), c);
          },
          nb::arg("group"), nb::arg("num_nvl_bytes"), nb::arg("num_rdma_bytes"), nb::arg("low_latency_mode"),
          nb::arg("num_qps_per_rank"), nb::arg("explicitly_destroy"), nb::arg("enable_shrink"),
          nb::arg("num_cpu_timeout_secs"))
      .def_static("get_low_latency_rdma_size_hint", &ep::Buffer::get_low_latency_rdma_size_hint)
      .def("get_dispatch_layout", &layout, nb::arg("topk_idx"), nb::arg("num_experts"))
      .def("dispatch", &dispatch, nb::arg("x"), nb::arg("sf").none(), nb::arg("handle").none(),
           nb::arg("num_tokens_per_rank").none(), nb::arg("num_tokens_per_rdma_rank").none(),
           nb::arg("is_token_in_rank").none(), nb::arg("num_tokens_per_expert").none(), nb::arg("topk_idx").none(),
           nb::arg("topk_weights").none(), nb::arg("expert_alignment"), nb::arg("num_worst_tokens"), nb::arg("async_"))
      .def("combine", &combine, nb::arg("x"), nb::arg("handle"), nb::arg("topk_weights").none(),
           nb::arg("bias0").none(), nb::arg("bias1").none(), nb::arg("async_"))
      .def("low_latency_dispatch", &ll_dispatch, nb::arg("x"), nb::arg("topk_idx"), nb::arg("num_max"),
           nb::arg("num_experts"), nb::arg("stats").none(), nb::arg("use_fp8"), nb::arg("round_scale"),
           nb::arg("use_ue8m0"), nb::arg("async_"), nb::arg("hook"))
      .def("low_latency_combine", &ll_combine, nb::arg("x"), nb::arg("topk_idx"), nb::arg("topk_weights"),
           nb::arg("handle"), nb::arg("out").none(), nb::arg("async_"), nb::arg("hook"))
      .def("barrier", &ep::Buffer::barrier, nb::call_guard<nb::gil_scoped_release>())
      .def("destroy", &ep::Buffer::destroy, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("rank", &ep::Buffer::rank)
      .def_prop_ro("group_size", &ep::Buffer::group_size)
      .def_prop_ro("num_rdma_ranks", &ep::Buffer::num_rdma_ranks)
      .def_prop_ro("num_nvl_ranks", &ep::Buffer::num_nvl_ranks)
      .def_prop_ro("low_latency_mode", &ep::Buffer::low_latency_mode);
}

}  // namespace tessera::python
