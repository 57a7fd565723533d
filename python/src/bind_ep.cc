// The ep component of tessera/ep.h for tessera.deep_ep: process groups, owned output tensors, events,
// dispatch handles and ElasticBuffer (the legacy Buffer is in bind_ep_legacy.cc). Every call that
// communicates releases the GIL: it waits for other processes.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bind_ep_util.h"
#include "bindings.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using ep::OwnedTensor;

nb::dict topology_dict(const ep::Group& g) {
  const ep::Topology& t = g.topology();
  nb::dict d;
  d["rank"] = t.rank;
  d["num_ranks"] = t.num_ranks;
  d["node"] = t.node;
  d["num_nodes"] = t.num_nodes;
  d["local_rank"] = t.local_rank;
  d["num_local_ranks"] = t.num_local_ranks;
  d["num_hosts"] = t.num_hosts;
  d["node_of"] = t.node_of;
  d["ranks_per_node"] = t.ranks_per_node_option;
  d["description"] = t.describe();
  return d;
}

template <class T>
nb::bytes bytes_of(const std::vector<T>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

void bind_tensor_and_event(nb::module_& m) {
  nb::class_<OwnedTensor>(m, "EpTensor", "An output array owned by the ep component (see tessera.deep_ep._native).")
      .def_prop_ro("dtype", [](const OwnedTensor& t) { return std::string(dtype_name(t.view.dtype)); })
      .def_prop_ro("shape",
                   [](const OwnedTensor& t) { return std::vector<int64_t>(t.view.shape, t.view.shape + t.view.ndim); })
      .def_prop_ro(
          "strides",
          [](const OwnedTensor& t) { return std::vector<int64_t>(t.view.strides, t.view.strides + t.view.ndim); })
      .def(
          "memory",
          [](nb::handle self) {
            const OwnedTensor& t = nb::cast<const OwnedTensor&>(self);
            int64_t extent = 1;
            bool empty = false;
            for (int d = 0; d < t.view.ndim; ++d) {
              empty |= t.view.shape[d] == 0;
              extent += (t.view.shape[d] - 1) * t.view.strides[d];
            }
            const size_t bytes = empty ? 0 : size_t(extent) * size_t(dtype_storage_bytes(t.view.dtype));
            const size_t shape[1] = {bytes};
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(t.view.data, 1, shape, self);
          },
          "The bytes the tensor spans, as a uint8 numpy array that keeps this object alive.");

  nb::class_<ep::Event>(m, "EpEvent", "Completion of an asynchronous ep operation.")
      .def("wait", &ep::Event::wait, nb::call_guard<nb::gil_scoped_release>())
      .def("done", &ep::Event::done);
}

void bind_group(nb::module_& m) {
  nb::class_<ep::Group>(m, "EpGroup", "An MPI-backed process group (tessera.deep_ep.Group wraps it).")
      .def_static("world", &ep::Group::world, nb::arg("ranks_per_node") = ep::kRanksPerNodeFromEnv,
                  nb::call_guard<nb::gil_scoped_release>())
      .def_static("from_fortran_handle", &ep::Group::from_fortran_handle, nb::arg("handle"),
                  nb::arg("ranks_per_node") = ep::kRanksPerNodeFromEnv, nb::call_guard<nb::gil_scoped_release>())
      .def_static("from_world_ranks", &ep::Group::from_world_ranks, nb::arg("world_ranks"),
                  nb::arg("ranks_per_node") = ep::kRanksPerNodeFromEnv, nb::call_guard<nb::gil_scoped_release>())
      .def("rank", &ep::Group::rank)
      .def("size", &ep::Group::size)
      .def("barrier", &ep::Group::barrier, nb::arg("timeout_s") = 300.0, nb::call_guard<nb::gil_scoped_release>())
      .def("fortran_handle", &ep::Group::fortran_handle)
      .def("topology", &topology_dict);
  m.def("ep_mpi_available", &ep::mpi_available);
  m.def("ep_measure_shm_copy_gbps", &ep::measure_shm_copy_gbps, nb::arg("bytes") = 0,
        nb::call_guard<nb::gil_scoped_release>());
  m.def("ep_measure_shm_copy_gbps_in_group", &ep::measure_shm_copy_gbps_in_group, nb::arg("group"),
        nb::arg("bytes") = 0, nb::call_guard<nb::gil_scoped_release>());
}

void bind_handle(nb::module_& m) {
  nb::class_<ep::EpHandle>(m, "EpHandle", "The native part of a dispatch handle (EPHandle wraps it).")
      .def_ro("do_expand", &ep::EpHandle::do_expand)
      .def_ro("num_experts", &ep::EpHandle::num_experts)
      .def_ro("expert_alignment", &ep::EpHandle::expert_alignment)
      .def_ro("num_max_tokens_per_rank", &ep::EpHandle::num_max_tokens_per_rank)
      .def_ro("num_topk", &ep::EpHandle::num_topk)
      .def_ro("num_sms", &ep::EpHandle::num_sms)
      .def_ro("num_tokens", &ep::EpHandle::num_tokens)
      .def_ro("num_recv_tokens", &ep::EpHandle::num_recv_tokens)
      .def_ro("num_expanded_tokens", &ep::EpHandle::num_expanded_tokens)
      .def_ro("num_recv_tokens_per_expert_list", &ep::EpHandle::num_recv_tokens_per_expert_list)
      .def_prop_ro("topk_idx", [](const ep::EpHandle& h) { return bytes_of(h.topk_idx); })
      .def_prop_ro("psum_num_recv_tokens_per_scaleup_rank",
                   [](const ep::EpHandle& h) { return bytes_of(h.psum_num_recv_tokens_per_scaleup_rank); })
      .def_prop_ro("psum_num_recv_tokens_per_expert",
                   [](const ep::EpHandle& h) { return bytes_of(h.psum_num_recv_tokens_per_expert); })
      .def_prop_ro("num_unaligned_recv_tokens_per_expert",
                   [](const ep::EpHandle& h) { return bytes_of(h.num_unaligned_recv_tokens_per_expert); })
      .def_prop_ro("recv_src_metadata", [](const ep::EpHandle& h) { return bytes_of(h.recv_src_metadata); })
      .def_prop_ro("dst_buffer_slot_idx", [](const ep::EpHandle& h) { return bytes_of(h.dst_buffer_slot_idx); });
}

nb::tuple dispatch(ep::ElasticBuffer& buf, const ArrayRef& x, const ArrayRef* sf, const ArrayRef* topk_idx,
                   const ArrayRef* topk_weights, const ArrayRef* stats, int num_experts, int num_max,
                   int expert_alignment, std::shared_ptr<ep::EpHandle> handle, bool do_handle_copy,
                   std::optional<bool> do_cpu_sync, bool do_expand, bool do_zero_padding, bool tma_sf, bool async,
                   int num_sms) {
  const char* fn = "ElasticBuffer.dispatch";
  ep::DispatchArgs a;
  a.x = to_view(x, fn, "x");
  a.sf = optional_view(sf, fn, "x.sf");
  a.topk_idx = optional_view(topk_idx, fn, "topk_idx");
  a.topk_weights = optional_view(topk_weights, fn, "topk_weights");
  a.cumulative_local_expert_recv_stats = optional_view(stats, fn, "cumulative_local_expert_recv_stats");
  a.num_experts = num_experts;
  a.num_max_tokens_per_rank = num_max;
  a.expert_alignment = expert_alignment;
  a.handle = handle;
  a.do_handle_copy = do_handle_copy;
  a.do_cpu_sync = do_cpu_sync;
  a.do_expand = do_expand;
  a.do_zero_padding = do_zero_padding;
  a.use_tma_aligned_col_major_sf = tma_sf;
  a.async = async;
  a.num_sms = num_sms;
  const ep::DispatchResult r = without_gil([&] { return buf.dispatch(a); });
  return nb::make_tuple(nb::cast(r.recv_x), tensor_or_none(r.recv_sf), tensor_or_none(r.recv_topk_idx),
                        tensor_or_none(r.recv_topk_weights), r.handle, r.event);
}

nb::tuple combine(ep::ElasticBuffer& buf, const ArrayRef& x, const ep::EpHandle& handle, const ArrayRef* topk_weights,
                  const ArrayRef* bias0, const ArrayRef* bias1, bool async, int num_sms) {
  auto a = combine_args<ep::CombineArgs>("ElasticBuffer.combine", x, topk_weights, bias0, bias1, async);
  a.num_sms = num_sms;
  return combine_outputs(without_gil([&] { return buf.combine(a, handle); }));
}

void bind_elastic(nb::module_& m) {
  nb::class_<ep::ElasticBuffer>(m, "EpElasticBuffer", "ElasticBuffer (DeepEP v2); tessera.deep_ep wraps it.")
      .def(
          "__init__",
          [](ep::ElasticBuffer* self, std::shared_ptr<ep::Group> group, std::optional<int64_t> num_bytes,
             int64_t num_cpu_bytes, int num_max_tokens_per_rank, int hidden, int num_topk, bool use_fp8_dispatch,
             bool deterministic, bool allow_hybrid_mode, bool allow_multiple_reduction,
             bool prefer_overlap_with_compute, double num_cpu_timeout_secs, bool explicitly_destroy) {
            ep::ElasticBufferConfig c;
            c.num_bytes = num_bytes;
            c.num_cpu_bytes = num_cpu_bytes;
            c.num_max_tokens_per_rank = num_max_tokens_per_rank;
            c.hidden = hidden;
            c.num_topk = num_topk;
            c.use_fp8_dispatch = use_fp8_dispatch;
            c.deterministic = deterministic;
            c.allow_hybrid_mode = allow_hybrid_mode;
            c.allow_multiple_reduction = allow_multiple_reduction;
            c.prefer_overlap_with_compute = prefer_overlap_with_compute;
            c.num_cpu_timeout_secs = num_cpu_timeout_secs;
            c.explicitly_destroy = explicitly_destroy;
            nb::gil_scoped_release release;
            new (self) ep::ElasticBuffer(std::move(group), c);
          },
          nb::arg("group"), nb::arg("num_bytes").none(), nb::arg("num_cpu_bytes"), nb::arg("num_max_tokens_per_rank"),
          nb::arg("hidden"), nb::arg("num_topk"), nb::arg("use_fp8_dispatch"), nb::arg("deterministic"),
          nb::arg("allow_hybrid_mode"), nb::arg("allow_multiple_reduction"), nb::arg("prefer_overlap_with_compute"),
          nb::arg("num_cpu_timeout_secs"), nb::arg("explicitly_destroy"))
      .def_static(
          "get_buffer_size_hint",
          [](const ep::Group& g, int num_max, int hidden, int topk, bool fp8, bool hybrid, bool multi) {
            return ep::ElasticBuffer::get_buffer_size_hint(g, num_max, hidden, topk, fp8, hybrid, multi);
          },
          nb::arg("group"), nb::arg("num_max_tokens_per_rank"), nb::arg("hidden"), nb::arg("num_topk"),
          nb::arg("use_fp8_dispatch"), nb::arg("allow_hybrid_mode"), nb::arg("allow_multiple_reduction"))
      .def("dispatch", &dispatch, nb::arg("x"), nb::arg("sf").none(), nb::arg("topk_idx").none(),
           nb::arg("topk_weights").none(), nb::arg("stats").none(), nb::arg("num_experts"), nb::arg("num_max"),
           nb::arg("expert_alignment"), nb::arg("handle").none(), nb::arg("do_handle_copy"),
           nb::arg("do_cpu_sync").none(), nb::arg("do_expand"), nb::arg("do_zero_padding"), nb::arg("tma_sf"),
           nb::arg("async_"), nb::arg("num_sms"))
      .def("combine", &combine, nb::arg("x"), nb::arg("handle"), nb::arg("topk_weights").none(),
           nb::arg("bias0").none(), nb::arg("bias1").none(), nb::arg("async_"), nb::arg("num_sms"))
      .def(
          "get_combine_input",
          [](ep::ElasticBuffer& buf, const ep::EpHandle& handle, int64_t hidden) {
            return buf.get_combine_input(handle, hidden);
          },
          nb::arg("handle"), nb::arg("hidden"))
      .def("barrier", &ep::ElasticBuffer::barrier, nb::call_guard<nb::gil_scoped_release>())
      // experimental: pipeline-parallel send/recv and all-gather sessions
      .def_static("get_pp_buffer_size_hint", &ep::ElasticBuffer::get_pp_buffer_size_hint)
      .def("pp_set_config", &ep::ElasticBuffer::pp_set_config, nb::call_guard<nb::gil_scoped_release>())
      .def("pp_send",
           [](ep::ElasticBuffer& buf, const ArrayRef& t, int dst) {
             const TensorView v = to_view(t, "ElasticBuffer.pp_send", "t");
             nb::gil_scoped_release release;
             buf.pp_send(v, dst);
           })
      .def("pp_recv",
           [](ep::ElasticBuffer& buf, const ArrayRef& t, int src) {
             const TensorView v = to_view(t, "ElasticBuffer.pp_recv", "t");
             nb::gil_scoped_release release;
             buf.pp_recv(v, src);
           })
      .def_static("get_agrs_buffer_size_hint", &ep::ElasticBuffer::get_agrs_buffer_size_hint)
      .def("agrs_set_config", &ep::ElasticBuffer::agrs_set_config, nb::call_guard<nb::gil_scoped_release>())
      .def("create_agrs_session", &ep::ElasticBuffer::create_agrs_session)
      .def("destroy_agrs_session", &ep::ElasticBuffer::destroy_agrs_session)
      .def("agrs_get_inplace_tensor", &ep::ElasticBuffer::agrs_get_inplace_tensor)
      .def("all_gather",
           [](ep::ElasticBuffer& buf, const std::vector<ArrayRef>& ts) {
             std::vector<TensorView> views;
             for (size_t i = 0; i < ts.size(); ++i) views.push_back(to_view(ts[i], "ElasticBuffer.all_gather", "t"));
             const ep::AllGatherResult r = without_gil([&] { return buf.all_gather(views); });
             return nb::make_tuple(r.gathered, r.event);
           })
      .def_static("get_engram_storage_size_hint",
                  [](int64_t entries, int64_t hidden, int64_t num_max, const std::string& dtype) {
                    return ep::ElasticBuffer::get_engram_storage_size_hint(entries, hidden, num_max,
                                                                           dtype_from_name(dtype));
                  })
      .def(
          "engram_write",
          [](ep::ElasticBuffer& buf, const ArrayRef& storage, const ArrayRef* sf) {
            const TensorView s = to_view(storage, "ElasticBuffer.engram_write", "storage");
            const TensorView f = optional_view(sf, "ElasticBuffer.engram_write", "sf");
            nb::gil_scoped_release release;
            buf.engram_write(s, f);
          },
          nb::arg("storage"), nb::arg("sf").none())
      .def("engram_fetch",
           [](ep::ElasticBuffer& buf, const ArrayRef& indices) {
             const TensorView v = to_view(indices, "ElasticBuffer.engram_fetch", "indices");
             const ep::EngramFetchResult r = without_gil([&] { return buf.engram_fetch(v); });
             return nb::make_tuple(nb::cast(r.data), tensor_or_none(r.sf));
           })
      .def("destroy", &ep::ElasticBuffer::destroy, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("rank_idx", &ep::ElasticBuffer::rank_idx)
      .def_prop_ro("num_ranks", &ep::ElasticBuffer::num_ranks)
      .def_prop_ro("num_bytes", &ep::ElasticBuffer::num_bytes)
      .def_prop_ro("num_scaleout_ranks", &ep::ElasticBuffer::num_scaleout_ranks)
      .def_prop_ro("num_scaleup_ranks", &ep::ElasticBuffer::num_scaleup_ranks)
      .def_prop_ro("scaleout_rank_idx", &ep::ElasticBuffer::scaleout_rank_idx)
      .def_prop_ro("scaleup_rank_idx", &ep::ElasticBuffer::scaleup_rank_idx)
      .def_prop_ro("hybrid_mode", &ep::ElasticBuffer::hybrid_mode)
      .def("get_theoretical_num_sms", &ep::ElasticBuffer::get_theoretical_num_sms, nb::arg("num_experts"),
           nb::arg("num_topk"));
}

}  // namespace

void bind_ep(nb::module_& m) {
  bind_tensor_and_event(m);
  bind_group(m);
  bind_handle(m);
  bind_elastic(m);
  bind_ep_legacy(m);
}

}  // namespace tessera::python
