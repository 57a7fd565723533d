// tessera/core/thread_pool.h - one persistent pool of worker threads.
//
// parallel_for statically partitions a range over the pool: share t gets the contiguous chunk
// [t*n/T, (t+1)*n/T), run by pool thread t or by a thread that was free first (parallel_shares).
// Kernels must produce the same bits for every T, so nothing may depend on how the range was split
// except which thread computes which independent outputs. Workers spin briefly after a job before they
// sleep, so back-to-back small jobs (decode) do not pay a wake-up each time. Nested calls run inline on
// the calling thread.
#pragma once

#include <cstdint>
#include <functional>

#include "tessera/core/parallel_region.h"

namespace tessera {

// Number of threads used by parallel_for (default: the logical CPUs available to the process,
// or TESSERA_NUM_THREADS).
int num_threads();
// n <= 0 resets to the default. Safe between parallel calls, not during one.
void set_num_threads(int n);

// Runs fn(thread_index, num_threads) once on each of the pool's threads (SPMD style): the calls run
// on distinct threads at the same time, so they may wait for each other (a barrier).
void parallel_run(const std::function<void(int, int)>& fn, int max_threads = 0);

// Runs fn(share, shares) once for each share in [0, shares), shares = num_threads() (at most
// max_shares when > 0): the calling thread runs share 0, and any thread that has finished its own share
// takes shares no thread has started. Every share runs exactly once, but several may run one after
// another on one thread, so shares must not wait for each other. Use it for independent work: a worker
// that the OS keeps off its CPU (other processes on the machine) then delays nothing.
void parallel_shares(const std::function<void(int, int)>& fn, int max_shares = 0);

// fn(begin, end) over a static partition of [0, n) into at most num_threads() chunks.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// fn(i0, i1) for every cell of an n0 x n1 tile space, cells handed out in row-major order in static
// contiguous chunks (consecutive cells of one thread share i0 when possible).
void parallel_for_2d(int64_t n0, int64_t n1, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tessera
