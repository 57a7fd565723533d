// tessera/ep/shm_bandwidth.h - the physical limit of an intra-node all-to-all: how fast one process
// can copy into another process's shared memory while that process does the same in return.
//
// Convention (unlike the STREAM-style figures of tessera/info.h, which count read + written bytes):
// payload bytes, counted once, delivered per second by ONE process while its peer copies the same
// amount the other way; both copies use the ep data plane's copy loop (non-temporal stores into the
// peer's region, as dispatch and combine do). A perfect one-copy dispatch moving B bytes to a peer
// per rank would take B / shm_copy_gbps seconds; that is the denominator of `tessera bench ep`'s
// percent-of-limit column.
#pragma once

#include <cstdint>

#include "tessera/ep/group.h"

namespace tessera::ep {

// Forks one helper process; both copy `bytes` (0: 128 MiB, well beyond the caches) per repetition,
// one thread each; the median of 7 repetitions. Needs no MPI. Throws Error(kRuntime) if shared
// memory or fork fail. `tessera info` shows this figure.
double measure_shm_copy_gbps(int64_t bytes = 0);

// The same between the ranks of this rank's node (every rank copies into the next one's segment, all
// at once, with the ep data plane's threads per rank); collective over the group, every rank gets the
// node's median. Used by `tessera bench ep` so the limit and the measurement share one run. A
// one-rank node returns 0.
double measure_shm_copy_gbps_in_group(Group& group, int64_t bytes = 0);

// The traffic pattern of a dispatch without its bookkeeping, so a benchmark can state what the best
// transport reaches on this host in the same run (`tessera bench ep`'s ceiling column):
//  kCopy:   the limit above (each rank copies `bytes` into the next rank's segment);
//  kFanOut: each rank reads its `bytes` once and writes every 14336-byte row to every rank of its
//           node, itself included, with the ep copy loop (the row stays in L1 between its copies).
// Returns payload GB/s per rank that crosses to other processes: bytes * (ranks - 1) for the fan-out
// (the rank's own copy is memory traffic, not payload), bytes for the copy. Same rules otherwise:
// collective over the group, every rank gets the node's median, a one-rank node returns 0.
enum class ShmPattern { kCopy, kFanOut };
double measure_shm_pattern_gbps_in_group(Group& group, ShmPattern pattern, int64_t bytes = 0);

}  // namespace tessera::ep
