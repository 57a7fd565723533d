#include "ep/experimental/all_gather_sessions.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "ep/common/active_kernels.h"
#include "ep/transport/group_state.h"
#include "ep/transport/node_segments.h"
#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

constexpr int64_t kAlign = 32;  // DeepEP: every gathered tensor's nbytes is a multiple of 32

}  // namespace

// Per segment: the owner's ended sessions, then per source rank the all_gathers that arrived.
struct AgrsSessions::Control {
  alignas(64) std::atomic<uint64_t> sessions_done;
};

namespace {

size_t control_bytes(int ranks) {
  return size_t(64) * size_t(1 + ranks);
}

std::atomic<uint64_t>* arrivals(void* control, int source) {
  return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(control) + 64 * size_t(1 + source));
}

}  // namespace

AgrsSessions::AgrsSessions(Comm& comm, int64_t num_max_session_bytes, int num_max_all_gathers_per_session)
    : comm_(comm) {
  const char* fn = "ElasticBuffer.agrs_set_config";
  TESSERA_CHECK(num_max_session_bytes > 0, fn, ": argument 'num_max_session_bytes' must be > 0, got ",
                num_max_session_bytes);
  TESSERA_CHECK(num_max_all_gathers_per_session > 0, fn,
                ": argument 'num_max_all_gathers_per_session' must be > 0, got ", num_max_all_gathers_per_session);
  const Topology& t = comm.topo();
  max_bytes_ = (num_max_session_bytes + 63) / 64 * 64;
  max_gathers_ = num_max_all_gathers_per_session;
  shared_ = t.num_nodes == 1;
  if (shared_) {
    segments_ = std::make_shared<std::vector<ShmSegment>>(
        map_node_segments(comm.group(), "g", control_bytes(t.num_ranks) + size_t(max_bytes_), "AGRS segment"));
  } else {
    char* p = static_cast<char*>(aligned_alloc_bytes(size_t(max_bytes_)));
    prefault(p, size_t(max_bytes_));
    private_ = std::shared_ptr<char>(p, [](char* q) { std::free(q); });
  }
  peer_ready_.assign(size_t(t.num_local_ranks), false);
  comm.group().state().net->barrier(kSetupTimeoutS, fn);
}

AgrsSessions::Control* AgrsSessions::control(int local) const {
  return reinterpret_cast<Control*>((*segments_)[size_t(local)].data());
}

char* AgrsSessions::data(int local) const {
  if (!shared_) return private_.get();
  return (*segments_)[size_t(local)].data() + control_bytes(comm_.topo().num_ranks);
}

std::shared_ptr<void> AgrsSessions::keep(char* p) const {
  return shared_ ? std::shared_ptr<void>(segments_, p) : std::shared_ptr<void>(private_, p);
}

int64_t AgrsSessions::place(const char* fn, size_t j, int64_t n, int64_t* at) const {
  const int R = comm_.topo().num_ranks;
  TESSERA_CHECK(n > 0 && n % kAlign == 0, fn, ": tensor ", j, " has ", n,
                " bytes; DeepEP needs a positive multiple of 32 for every tensor");
  TESSERA_CHECK(*at + n * R <= max_bytes_, fn, ": the session needs ", *at + n * R, " bytes with tensor ", j,
                ", more than num_max_session_bytes=", max_bytes_, " of agrs_set_config");
  const int64_t base = *at;
  *at += n * R;
  return base;
}

void AgrsSessions::check_in_session(const char* fn) const {
  TESSERA_CHECK(in_session_, fn, ": no AGRS session is active (call it inside `with buffer.agrs_new_session():` / ",
                "between create_agrs_session and destroy_agrs_session)");
}

void AgrsSessions::create_session() {
  TESSERA_CHECK(!in_session_, "ElasticBuffer.create_agrs_session: a session is already active (sessions do not nest)");
  in_session_ = true;
  ++session_;
  cursor_ = 0;
  gathers_ = 0;
  peer_ready_.assign(peer_ready_.size(), false);
}

void AgrsSessions::destroy_session() {
  TESSERA_CHECK(in_session_, "ElasticBuffer.destroy_agrs_session: no AGRS session is active");
  in_session_ = false;
  // Peers may now overwrite this rank's gathered tensors of the session.
  if (shared_) control(comm_.topo().local_rank)->sessions_done.store(session_, std::memory_order_release);
}

std::vector<OwnedTensor> AgrsSessions::inplace(const std::vector<int64_t>& nbytes) {
  const char* fn = "ElasticBuffer.agrs_get_inplace_tensor";
  check_in_session(fn);
  const Topology& t = comm_.topo();
  std::vector<OwnedTensor> out;
  int64_t at = cursor_;
  for (size_t j = 0; j < nbytes.size(); ++j) {
    char* p = data(t.local_rank) + place(fn, j, nbytes[j], &at) + nbytes[j] * t.rank;
    OwnedTensor v;
    v.storage = keep(p);
    v.view = TensorView(p, DType::kU8, {nbytes[j]});
    out.push_back(v);
  }
  return out;
}

std::pair<std::vector<OwnedTensor>, Event> AgrsSessions::all_gather(const std::vector<TensorView>& tensors) {
  const char* fn = "ElasticBuffer.all_gather";
  check_in_session(fn);
  const Topology& t = comm_.topo();
  const int R = t.num_ranks;
  TESSERA_CHECK(!tensors.empty(), fn, ": argument 't' holds no tensor");
  TESSERA_CHECK(gathers_ < max_gathers_, fn, ": more than num_max_all_gathers_per_session=", max_gathers_,
                " all_gathers in one session");
  std::vector<int64_t> nbytes, base;
  int64_t at = cursor_;
  for (size_t j = 0; j < tensors.size(); ++j) {
    const TensorView& x = tensors[j];
    TESSERA_CHECK(x.data != nullptr && x.is_contiguous(), fn, ": tensor ", j, " must be defined and contiguous");
    TESSERA_CHECK(x.ndim < kMaxDims, fn, ": tensor ", j, " has ", x.ndim, " dimensions; the result adds one (max ",
                  kMaxDims, ")");
    nbytes.push_back(x.numel() * dtype_storage_bytes(x.dtype));
    base.push_back(place(fn, j, nbytes.back(), &at));
  }
  cursor_ = at;
  ++gathers_;
  const uint64_t g = ++total_gathers_;

  if (shared_) {
    for (int l = 0; l < t.num_local_ranks; ++l) {
      const int peer = t.node_ranks[size_t(t.node)][size_t(l)];
      if (!peer_ready_[size_t(l)] && l != t.local_rank) {
        const Control* c = control(l);
        comm_.wait([&] { return c->sessions_done.load(std::memory_order_acquire) >= session_ - 1; }, peer,
                   "end its previous AGRS session");
        peer_ready_[size_t(l)] = true;
      }
      for (size_t j = 0; j < tensors.size(); ++j) {
        char* dst = data(l) + base[j] + nbytes[j] * t.rank;
        if (dst == tensors[j].data) continue;  // the in-place tensor of this rank's own slot
        kernels().copy(dst, tensors[j].data, size_t(nbytes[j]), l != t.local_rank && nbytes[j] >= (1 << 20));
      }
      kernels().store_fence();
      arrivals(control(l), t.rank)->store(g, std::memory_order_release);
    }
  } else {
    for (size_t j = 0; j < tensors.size(); ++j) {
      char* dst = data(t.local_rank) + base[j];
      const char* src = static_cast<const char*>(tensors[j].data);
      std::vector<char> copy;
      if (src >= dst && src < dst + nbytes[j] * R) {  // an in-place tensor: MPI needs disjoint buffers
        copy.assign(src, src + nbytes[j]);
        src = copy.data();
      }
      comm_.group().state().net->allgather(src, dst, size_t(nbytes[j]), comm_.timeout_s(), fn);
    }
  }

  std::vector<OwnedTensor> out;
  for (size_t j = 0; j < tensors.size(); ++j) {
    const TensorView& x = tensors[j];
    char* p = data(t.local_rank) + base[j];
    OwnedTensor v;
    v.storage = keep(p);
    v.view.data = p;
    v.view.dtype = x.dtype;
    v.view.ndim = x.ndim + 1;
    v.view.shape[0] = R;
    int64_t stride = 1;
    for (int d = x.ndim; d >= 1; --d) {
      v.view.shape[d] = x.shape[d - 1];
      v.view.strides[d] = stride;
      stride *= x.shape[d - 1];
    }
    v.view.strides[0] = stride;
    out.push_back(v);
  }
  Event ev;
  if (shared_) {
    Comm* comm = &comm_;
    void* mine = control(t.local_rank);
    auto wait = std::make_shared<std::function<void()>>([comm, mine, g, R] {
      for (int s = 0; s < R; ++s) {
        std::atomic<uint64_t>* a = arrivals(mine, s);
        comm->wait([&] { return a->load(std::memory_order_acquire) >= g; }, s, "all_gather its tensor");
      }
    });
    ev = Event(wait);
  }
  return {out, ev};
}

}  // namespace tessera::ep::detail
