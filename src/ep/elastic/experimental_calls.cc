// ElasticBuffer's experimental DeepEP v2 calls, each forwarding to its piece in src/ep/experimental:
// pipeline-parallel send/recv (pipeline_ring.h), all-gather sessions (all_gather_sessions.h) and Engram
// storage (engram_storage.h).
#include "ep/elastic/state.h"
#include "tessera/core/error.h"

namespace tessera::ep {

using detail::ElasticState;

namespace {

// These calls are not numbered collective operations (no Comm::begin): they name themselves for
// wait errors and refuse a buffer an earlier failure broke.
detail::Comm& named(ElasticState& st, const char* fn) {
  detail::Comm& comm = st.start(fn);
  comm.name_op(fn);
  return comm;
}

detail::PpChannels& pp_of(ElasticState& st, const char* fn) {
  named(st, fn);
  TESSERA_CHECK(st.pp != nullptr, fn, ": call pp_set_config(num_max_tensor_bytes, num_max_inflight_tensors) first");
  return *st.pp;
}

detail::AgrsSessions& agrs_of(ElasticState& st, const char* fn) {
  named(st, fn);
  TESSERA_CHECK(st.agrs != nullptr, fn, ": call agrs_set_config(num_max_session_bytes, ",
                "num_max_all_gathers_per_session) first");
  return *st.agrs;
}

}  // namespace

int64_t ElasticBuffer::get_pp_buffer_size_hint(int64_t num_max_tensor_bytes, int num_max_inflight_tensors) {
  return detail::PpChannels::buffer_bytes(num_max_tensor_bytes, num_max_inflight_tensors);
}

void ElasticBuffer::pp_set_config(int64_t num_max_tensor_bytes, int num_max_inflight_tensors) {
  detail::Comm& comm = named(*st_, "ElasticBuffer.pp_set_config");
  TESSERA_CHECK(!st_->pp || !st_->pp->sends_pending(), "ElasticBuffer.pp_set_config: pipeline tensors this rank ",
                "sent to another node were not received yet; pp_recv them before changing the configuration");
  st_->pp.reset();
  st_->pp = std::make_unique<detail::PpChannels>(comm, num_max_tensor_bytes, num_max_inflight_tensors);
}

void ElasticBuffer::pp_send(const TensorView& t, int dst_rank_idx) {
  pp_of(*st_, "ElasticBuffer.pp_send").send(t, dst_rank_idx);
}

void ElasticBuffer::pp_recv(const TensorView& t, int src_rank_idx) {
  pp_of(*st_, "ElasticBuffer.pp_recv").recv(t, src_rank_idx);
}

int64_t ElasticBuffer::get_agrs_buffer_size_hint(const Group&, int64_t num_max_session_bytes) {
  return num_max_session_bytes;
}

void ElasticBuffer::agrs_set_config(int64_t num_max_session_bytes, int num_max_all_gathers_per_session) {
  detail::Comm& comm = named(*st_, "ElasticBuffer.agrs_set_config");
  st_->agrs.reset();
  st_->agrs = std::make_unique<detail::AgrsSessions>(comm, num_max_session_bytes, num_max_all_gathers_per_session);
}

void ElasticBuffer::create_agrs_session() {
  agrs_of(*st_, "ElasticBuffer.create_agrs_session").create_session();
}

void ElasticBuffer::destroy_agrs_session() {
  agrs_of(*st_, "ElasticBuffer.destroy_agrs_session").destroy_session();
}

std::vector<OwnedTensor> ElasticBuffer::agrs_get_inplace_tensor(const std::vector<int64_t>& nbytes) {
  return agrs_of(*st_, "ElasticBuffer.agrs_get_inplace_tensor").inplace(nbytes);
}

AllGatherResult ElasticBuffer::all_gather(const std::vector<TensorView>& tensors) {
  auto [gathered, event] = agrs_of(*st_, "ElasticBuffer.all_gather").all_gather(tensors);
  return AllGatherResult{std::move(gathered), std::move(event)};
}

int64_t ElasticBuffer::get_engram_storage_size_hint(int64_t num_entries, int64_t hidden,
                                                    int64_t num_max_tokens_per_rank, DType dtype) {
  return detail::EngramStore::size_hint(num_entries, hidden, num_max_tokens_per_rank, dtype_storage_bytes(dtype));
}

void ElasticBuffer::engram_write(const TensorView& storage, const TensorView& sf) {
  detail::Comm& comm = named(*st_, "ElasticBuffer.engram_write");
  if (!st_->engram) st_->engram = std::make_unique<detail::EngramStore>(comm);
  st_->engram->write(storage, sf);
}

EngramFetchResult ElasticBuffer::engram_fetch(const TensorView& indices) {
  const char* fn = "ElasticBuffer.engram_fetch";
  named(*st_, fn);
  TESSERA_CHECK(st_->engram != nullptr, fn, ": call engram_write(storage) first");
  auto [data, sf] = st_->engram->fetch(indices);
  return EngramFetchResult{std::move(data), std::move(sf), Event()};
}

}  // namespace tessera::ep
