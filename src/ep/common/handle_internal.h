// The part of a dispatch handle only the ep component reads: the routing that was sent, what each
// source contributed, the hybrid forward plan and the layout of the dispatched rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ep/common/routing.h"
#include "ep/transport/transport.h"
#include "tessera/core/dtype.h"

namespace tessera::ep::detail {

struct HandleInternal {
  const void* owner = nullptr;  // the buffer state that made it
  std::shared_ptr<const Routing> routing;
  ForwardPlan fwd;
  std::vector<int64_t> recv_count;  // rows received from each source rank
  std::vector<int64_t> recv_base;   // first row of each source rank in the non-expanded layout
  Mode mode = Mode::kDirect;
  DType x_dtype = DType::kBF16;
  int64_t hidden = 0, sf_packs = 0;
  DType sf_dtype = DType::kF32;
};

}  // namespace tessera::ep::detail
