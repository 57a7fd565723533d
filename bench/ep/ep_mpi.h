// The MPI side of `tessera bench ep`: reductions for timing across ranks and the MPI_Alltoallv peer.
// MPI is reached through the group's communicator handle (tessera::ep::Group::fortran_handle()).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/ep/group.h"

namespace tessera::bench {

// Whether this process was started by an MPI launcher (mpirun sets OMPI_/PMI_ variables).
bool launched_by_mpirun();

// Median over `reps` timed calls (after `warmup` untimed ones) of the slowest rank's time, in ms:
// every rank starts each call after a barrier.
double median_call_ms(const ep::Group& group, int warmup, int reps, const std::function<void()>& call);

// Sum over the group.
double sum_over_ranks(const ep::Group& group, double value);

// MPI_Alltoallv of byte counts send_bytes[d] (to each rank) / recv_bytes[s] (from each rank) between
// pre-filled buffers: median ms over reps, timed like median_call_ms.
double mpi_alltoallv_ms(const ep::Group& group, const std::vector<int64_t>& send_bytes,
                        const std::vector<int64_t>& recv_bytes, int warmup, int reps);

}  // namespace tessera::bench
