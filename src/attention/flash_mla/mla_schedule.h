// Split plans and part assignments (tessera's meaning of FlashMLA's tile-scheduler metadata).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/flash_mla.h"

namespace tessera::flash_mla {

// Splits request i's list (capacity lens[i] tokens) into parts so that about kTargetUnits units exist in
// total (units_per_item units per (request, split) item), each split at least kMinSplitTokens long, and
// assigns the items to `parts` contiguous, length-balanced ranges. Depends on nothing else - in
// particular not on the thread count - so the split (and hence every output bit) is reproducible.
constexpr int64_t kTargetUnits = 16;
constexpr int64_t kMinSplitTokens = 512;
// Requests per call: bounds the schedule's work lists (int32 prefix sums of splits) before they are built.
constexpr int64_t kMaxRequests = int64_t(1) << 24;
Schedule make_schedule(const std::vector<int64_t>& lens, int64_t units_per_item, int64_t parts);

// Structural check of a caller-supplied schedule for `requests` requests (sizes, prefix sums, ranges
// that tile the items exactly once); throws naming fn and the field.
void check_schedule(const char* fn, const Schedule& schedule, int64_t requests);

// Throws unless `now` equals the configuration recorded by the first call on a FlashMLASchedMeta.
void check_same_config(const char* fn, const SchedConfig& recorded, const SchedConfig& now);

}  // namespace tessera::flash_mla
