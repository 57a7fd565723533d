// The state behind a legacy Buffer (v1) and the data its opaque handles carry.
#pragma once

#include <memory>
#include <vector>

#include "ep/common/routing.h"
#include "ep/elastic/state.h"
#include "tessera/ep/legacy_buffer.h"

namespace tessera::ep::detail {

struct LegacyHandleData {
  const void* owner = nullptr;
  std::shared_ptr<const Routing> routing;
  std::vector<int64_t> recv_count, recv_base;  // per source rank
  DType x_dtype = DType::kBF16;
  int64_t hidden = 0, sf_packs = 0;
};

struct LowLatencyHandleData {
  const void* owner = nullptr;
  std::shared_ptr<const Routing> routing;
  std::vector<int64_t> recv_count;              // records received per source rank
  std::vector<std::vector<int32_t>> lane_rows;  // per source: [count * lanes] flat row of each local lane, -1
  int lanes = 1;                                // min(num_topk, experts per rank)
};

struct LegacyState {
  std::shared_ptr<Group> group;
  BufferConfig config;
  std::unique_ptr<Comm> comm;
  PendingOps pending;
  bool destroyed = false;
  // Low-latency outputs: two sets that alternate between calls.
  std::shared_ptr<void> ll_x[2], ll_scales[2];
  size_t ll_x_bytes[2] = {0, 0}, ll_scales_bytes[2] = {0, 0};
  int ll_next = 0;
  // Low-latency dispatch scratch, reused by every call (start() completes the previous operation, whose
  // finish reads them, first): the sender's FP8 cast [T][H] and its scales [T][packs], the receiver's
  // staged scale packs. Fresh vectors per call were zero-filled (~1.2 MB for 128 tokens of hidden 7168)
  // only to be overwritten.
  std::vector<uint8_t> ll_cast;
  std::vector<char> ll_cast_scales, ll_staged;

  Comm& start(const char* fn);
};

}  // namespace tessera::ep::detail
