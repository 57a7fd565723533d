// Engram storage (DeepEP v2's experimental engram_write / engram_fetch): every rank holds E entries of a
// distributed table; global entry g lives on rank g / E as its entry g % E. engram_write (collective)
// copies each rank's [E, hidden] storage (and optional [E, packs] 4-byte scale packs) into a shared
// segment its node maps; engram_fetch reads any entries straight from their owners' segments (one copy,
// no message: the owners take no part). Ranks on other nodes would need one-sided gets: not implemented.
#pragma once

#include <cstdint>
#include <vector>

#include "ep/transport/comm.h"
#include "tessera/ep/types.h"

namespace tessera::ep::detail {

class EngramStore {
 public:
  explicit EngramStore(Comm& comm) : comm_(comm) {}

  void write(const TensorView& storage, const TensorView& sf);
  // data [T, P * hidden] (storage dtype), sf [T, P * packs] (undefined without scale packs).
  std::pair<OwnedTensor, OwnedTensor> fetch(const TensorView& indices) const;

  static int64_t size_hint(int64_t num_entries, int64_t hidden, int64_t num_max_tokens_per_rank, int element_bytes);

 private:
  struct Shape {
    int64_t entries = 0, hidden = 0, packs = 0;
    int32_t dtype = 0, sf_dtype = -1;
    bool operator==(const Shape& o) const {
      return entries == o.entries && hidden == o.hidden && packs == o.packs && dtype == o.dtype &&
             sf_dtype == o.sf_dtype;
    }
  };
  int64_t row_bytes() const { return shape_.hidden * dtype_storage_bytes(DType(shape_.dtype)); }

  Comm& comm_;
  Shape shape_;
  bool written_ = false;
  std::vector<ShmSegment> segments_;  // by local rank: [entries x row bytes][entries x packs x 4]
};

}  // namespace tessera::ep::detail
