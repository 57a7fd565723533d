// Output tensors of the ep buffers come from a cache of pre-faulted blocks: dispatch outputs are tens
// of MB, which glibc maps fresh (and faults page by page) on every call; reusing blocks keeps that
// cost out of steady state. Blocks are sized in 64 KiB steps (2 MiB above 16 MiB) and reused by size.
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/env.h"
#include "ep/common/owned_tensor.h"
#include "tessera/core/error.h"
#include "tessera/core/memory.h"
#include "tessera/ep/types.h"

namespace tessera::ep {
namespace {

struct Cache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;  // by size
  int64_t cached = 0;
  int64_t limit = 0;
  Cache() { limit = env::integer("TESSERA_EP_TENSOR_CACHE_MB", 4096, 0, 1 << 30) << 20; }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static destruction order
  return *c;
}

size_t block_size(size_t bytes) {
  const size_t step = bytes > (16u << 20) ? (2u << 20) : (64u << 10);
  return (std::max<size_t>(bytes, 1) + step - 1) / step * step;
}

void release(void* p, size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.cached + int64_t(bytes) > c.limit) {
    std::free(p);
    return;
  }
  c.free_blocks.emplace(bytes, p);
  c.cached += int64_t(bytes);
}

std::shared_ptr<void> acquire(size_t bytes) {
  const size_t size = block_size(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end()) {
      void* p = it->second;
      c.free_blocks.erase(it);
      c.cached -= int64_t(size);
      return std::shared_ptr<void>(p, [size](void* q) { release(q, size); });
    }
  }
  void* p = aligned_alloc_bytes(size);
  prefault(p, size);
  return std::shared_ptr<void>(p, [size](void* q) { release(q, size); });
}

}  // namespace

OwnedTensor allocate_tensor(DType dtype, const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= std::max<int64_t>(shape[d], 1);
  }
  return allocate_tensor(dtype, shape, strides);
}

OwnedTensor allocate_tensor(DType dtype, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  TESSERA_CHECK(shape.size() <= size_t(kMaxDims) && shape.size() == strides.size(),
                "tessera.ep: internal error: bad tensor rank");
  int64_t extent = 1;  // elements spanned
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    empty |= shape[d] == 0;
    extent += (shape[d] - 1) * strides[d];
  }
  const size_t bytes = empty ? 0 : size_t(extent) * size_t(dtype_storage_bytes(dtype));
  return detail::owned_view(acquire(bytes), dtype, shape, strides);
}

OwnedTensor detail::owned_view(std::shared_ptr<void> storage, DType dtype, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& strides) {
  OwnedTensor t;
  t.view.data = storage.get();
  t.storage = std::move(storage);
  t.view.dtype = dtype;
  t.view.ndim = int(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    t.view.shape[d] = shape[d];
    t.view.strides[d] = strides[d];
  }
  return t;
}

int64_t tensor_cache_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.cached;
}

void Event::wait() {
  if (!finish_ || !*finish_) return;
  std::function<void()> f = std::move(*finish_);
  *finish_ = nullptr;
  f();
}

bool Event::done() const {
  return !finish_ || !*finish_;
}

}  // namespace tessera::ep
