// tessera/core.h - the foundation every component builds on, in one include.
//
//   tessera/core/dtype.h            element types and bit-exact scalar conversions
//   tessera/core/tensor.h           non-owning tensor views and the argument checks
//   tessera/core/error.h            the one exception family (tessera::Error and its codes)
//   tessera/core/thread_pool.h      the persistent worker pool, parallel_for
//   tessera/core/parallel_region.h  what code on a pool thread may ask about its region
//   tessera/core/cpu.h              CPU features and the instruction-set levels
//   tessera/core/memory.h           aligned, pre-faulted buffers
//   tessera/core/timer.h            monotonic time and benchmark statistics
//   tessera/core/json.h             JSON string literals and a small strict parser
#pragma once

#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/json.h"
#include "tessera/core/memory.h"
#include "tessera/core/parallel_region.h"
#include "tessera/core/tensor.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"
