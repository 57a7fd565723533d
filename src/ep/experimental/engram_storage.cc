#include "ep/experimental/engram_storage.h"

#include <cstring>

#include "ep/common/parallel_range.h"
#include "ep/transport/group_state.h"
#include "ep/transport/node_segments.h"
#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

int64_t align_up(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

int64_t EngramStore::size_hint(int64_t num_entries, int64_t hidden, int64_t num_max_tokens_per_rank,
                               int element_bytes) {
  // DeepEP's figure: 1-byte types carry a 4-byte scale pack per 32 values; entries 32-byte aligned.
  const int64_t packs = element_bytes <= 1 ? (hidden + 31) / 32 : 0;
  return align_up(hidden * element_bytes + packs * 4, 32) * (num_entries + num_max_tokens_per_rank);
}

void EngramStore::write(const TensorView& storage, const TensorView& sf) {
  const char* fn = "ElasticBuffer.engram_write";
  check_defined(fn, "storage", storage);
  check_ndim(fn, "storage", storage, {2});
  TESSERA_CHECK(storage.shape[0] > 0 && storage.shape[1] > 0, fn, ": argument 'storage' must be [num_entries > 0, ",
                "hidden > 0], got ", storage.shape_str());
  TESSERA_CHECK(storage.strides[1] == 1, fn, ": argument 'storage' must have contiguous rows, got strides ",
                storage.strides_str());
  Shape mine;
  mine.entries = storage.shape[0];
  mine.hidden = storage.shape[1];
  mine.dtype = int32_t(storage.dtype);
  if (sf.data || sf.ndim) {
    check_ndim(fn, "sf", sf, {2});
    check_dtype(fn, "sf", sf, {DType::kF32, DType::kI32});
    TESSERA_CHECK(sf.shape[0] == mine.entries && sf.shape[1] >= 1, fn, ": argument 'sf' must be [", mine.entries,
                  ", packs >= 1], got ", sf.shape_str());
    mine.packs = sf.shape[1];
    mine.sf_dtype = int32_t(sf.dtype);
  }
  // Every rank must hold the same table shape (a fetch may read any rank's entries).
  const Topology& t = comm_.topo();
  const Net& net = *comm_.group().state().net;
  std::vector<Shape> all(static_cast<size_t>(t.num_ranks));
  net.allgather(&mine, all.data(), sizeof(Shape), comm_.timeout_s(), fn);
  for (int r = 0; r < t.num_ranks; ++r)
    TESSERA_CHECK(all[size_t(r)] == mine, fn, ": rank ", r, " writes ", all[size_t(r)].entries, " x ",
                  all[size_t(r)].hidden, " entries (", all[size_t(r)].packs, " scale packs) of dtype code ",
                  all[size_t(r)].dtype, ", this rank ", mine.entries, " x ", mine.hidden, " (", mine.packs,
                  ") of dtype code ", mine.dtype, ": every rank must write the same shape and dtype");
  if (t.num_nodes > 1)
    fail(ErrorCode::kNotImplemented, fn, ": Engram across nodes (", t.describe(), ") is not implemented in tessera: ",
         "fetching from another node needs one-sided gets; it works between the ranks of one node");
  net.barrier(comm_.timeout_s(), fn);  // nobody still fetches from the previous table
  if (!written_ || !(shape_ == mine)) {
    segments_.clear();
    shape_ = mine;
    const int64_t bytes = shape_.entries * (row_bytes() + shape_.packs * 4);
    segments_ = map_node_segments(comm_.group(), "e", size_t(std::max<int64_t>(bytes, 64)), "Engram table");
  }
  char* own = segments_[size_t(t.local_rank)].data();
  const int64_t rb = row_bytes(), es = dtype_storage_bytes(storage.dtype);
  for (int64_t e = 0; e < shape_.entries; ++e)
    std::memcpy(own + e * rb, static_cast<const char*>(storage.data) + e * storage.strides[0] * es, size_t(rb));
  char* own_sf = own + shape_.entries * rb;
  for (int64_t e = 0; e < shape_.entries && shape_.packs; ++e)
    for (int64_t p = 0; p < shape_.packs; ++p)
      std::memcpy(own_sf + (e * shape_.packs + p) * 4,
                  static_cast<const char*>(sf.data) + (e * sf.strides[0] + p * sf.strides[1]) * 4, 4);
  written_ = true;
  net.barrier(comm_.timeout_s(), fn);  // every table is complete before anyone fetches
}

std::pair<OwnedTensor, OwnedTensor> EngramStore::fetch(const TensorView& indices) const {
  const char* fn = "ElasticBuffer.engram_fetch";
  TESSERA_CHECK(written_, fn, ": call engram_write(storage) first");
  check_defined(fn, "indices", indices);
  check_dtype(fn, "indices", indices, {DType::kI32});
  check_ndim(fn, "indices", indices, {1, 2});
  const Topology& t = comm_.topo();
  const int64_t T = indices.shape[0], P = indices.ndim == 2 ? indices.shape[1] : 1;
  const int64_t total = shape_.entries * t.num_ranks;
  auto index_at = [&](int64_t i, int64_t p) {
    return int64_t(indices.ptr<int32_t>()[i * indices.strides[0] + (indices.ndim == 2 ? p * indices.strides[1] : 0)]);
  };
  for (int64_t i = 0; i < T; ++i)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t g = index_at(i, p);
      TESSERA_CHECK(g >= 0 && g < total, fn, ": argument 'indices' holds ", g, " at [", i, ", ", p,
                    "]; entries are in [0, num_ranks * num_entries = ", total, ")");
    }
  const DType dtype = DType(shape_.dtype);
  OwnedTensor data = allocate_tensor(dtype, {T, P * shape_.hidden});
  OwnedTensor sf = shape_.packs ? allocate_tensor(DType(shape_.sf_dtype), {T, P * shape_.packs}) : OwnedTensor{};
  const int64_t rb = row_bytes(), pack_bytes = shape_.packs * 4;
  char* out = static_cast<char*>(data.view.data);
  char* out_sf = shape_.packs ? static_cast<char*>(sf.view.data) : nullptr;
  parallel_range(comm_.threads(), T, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t g = index_at(i, p), owner = g / shape_.entries, e = g % shape_.entries;
        const char* seg = segments_[size_t(t.local_of[size_t(owner)])].data();
        std::memcpy(out + (i * P + p) * rb, seg + e * rb, size_t(rb));
        if (out_sf)
          std::memcpy(out_sf + (i * P + p) * pack_bytes, seg + shape_.entries * rb + e * pack_bytes,
                      size_t(pack_bytes));
      }
  });
  return {data, sf};
}

}  // namespace tessera::ep::detail
