#include "ep/common/record_layout.h"

#include <cstring>

#include "ep/common/active_kernels.h"
#include "ep/common/parallel_range.h"

namespace tessera::ep::detail {

void write_dispatch_records(char* area, int64_t capacity, const DispatchRecord& rec, const TokenRows& from,
                            const int32_t* picks, int64_t n, int64_t hidden_bytes, int64_t sf_bytes, int threads) {
  const cpu::EpKernels& k = kernels();
  const bool streaming = n * hidden_bytes >= int64_t(kStreamingMinBytes);
  char* sf_plane = area + rec.sf_off(capacity);
  char* idx_plane = area + rec.idx_off(capacity);
  char* meta_plane = area + rec.meta_off(capacity);
  const int topk = rec.num_topk;
  parallel_range(threads, n, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t t = picks ? picks[j] : j;
      if (hidden_bytes) k.copy(area + j * rec.x_bytes, from.x + t * from.x_stride, size_t(hidden_bytes), streaming);
      if (sf_bytes) std::memcpy(sf_plane + j * rec.sf_bytes, from.sf + t * from.sf_stride, size_t(sf_bytes));
      if (rec.idx_bytes) std::memcpy(idx_plane + j * rec.idx_bytes, from.idx + t * from.idx_stride, size_t(topk) * 8);
      int32_t* meta = reinterpret_cast<int32_t*>(meta_plane + j * rec.meta_bytes);
      meta[0] = from.src_token(t);
      float* w = reinterpret_cast<float*>(meta + 1);
      if (from.w) {
        std::memcpy(w, from.w + t * from.meta_stride, size_t(topk) * 4);
      } else {
        std::memset(w, 0, size_t(topk) * 4);
      }
    }
    if (streaming) k.store_fence();
  });
}

}  // namespace tessera::ep::detail
