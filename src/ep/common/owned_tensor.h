// OwnedTensor over memory that `storage` keeps alive (a cached block, a buffer's own block, a slice of a
// shared-memory arena): the one place an ep output's view is filled in. The caller checks the rank
// (at most kMaxDims) and that `storage` covers the strided extent.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/ep/types.h"

namespace tessera::ep::detail {

OwnedTensor owned_view(std::shared_ptr<void> storage, DType dtype, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides);

}  // namespace tessera::ep::detail
