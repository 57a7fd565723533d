// tessera/ep.h - expert-parallel communication between CPU ranks: DeepEP's dispatch and combine over
// POSIX shared memory (ranks of one node) and MPI (between nodes). See docs/ep.md.
//
//   tessera/ep/group.h           process groups (from mpirun), node topology, pretend nodes
//   tessera/ep/elastic_buffer.h  ElasticBuffer (DeepEP v2): dispatch / combine
//   tessera/ep/legacy_buffer.h   Buffer (DeepEP v1): layout, normal and low-latency dispatch / combine
//   tessera/ep/types.h           owned output tensors, completion events
//   tessera/ep/shm_bandwidth.h   the shared-memory copy limit `tessera info` reports
#pragma once

#include "tessera/core/dtype.h"
#include "tessera/core/tensor.h"
#include "tessera/ep/elastic_buffer.h"
#include "tessera/ep/group.h"
#include "tessera/ep/legacy_buffer.h"
#include "tessera/ep/shm_bandwidth.h"
#include "tessera/ep/types.h"
