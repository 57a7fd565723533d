// tessera/ep/types.h - owned output tensors and completion events of the ep buffers.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::ep {

// A tensor whose memory the ep component allocated (outputs of dispatch/combine). The memory comes
// from a cache of pre-faulted blocks and goes back to it when the last copy of `storage` is dropped,
// so steady-state calls do not pay page faults. `view` describes it (row-major unless stated).
struct OwnedTensor {
  std::shared_ptr<void> storage;
  TensorView view;
  bool defined() const { return storage != nullptr; }
};

// Allocates an owned tensor; with explicit strides the storage covers the strided extent.
OwnedTensor allocate_tensor(DType dtype, const std::vector<int64_t>& shape);
OwnedTensor allocate_tensor(DType dtype, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
// Bytes held by the cache now, and an upper bound (TESSERA_EP_TENSOR_CACHE_MB, default 4096).
int64_t tensor_cache_bytes();

// Completion of an asynchronous operation: wait() finishes the receive side (waiting for peers and
// unpacking or reducing into the outputs). Operations are completed in order; a later operation on
// the same buffer completes earlier pending ones first. An Event without work is complete.
class Event {
 public:
  Event() = default;
  explicit Event(std::shared_ptr<std::function<void()>> finish) : finish_(std::move(finish)) {}
  void wait();        // throws the operation's error, if any (once)
  bool done() const;  // true once wait() ran (or nothing was pending)

 private:
  std::shared_ptr<std::function<void()>> finish_;
};

}  // namespace tessera::ep
