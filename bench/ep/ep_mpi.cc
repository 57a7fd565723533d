#include "ep/ep_mpi.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/core/memory.h"
#include "tessera/core/timer.h"

namespace tessera::bench {
namespace {

MPI_Comm comm_of(const ep::Group& group) {
  return MPI_Comm_f2c(MPI_Fint(group.fortran_handle()));
}

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

double median_call_ms(const ep::Group& group, int warmup, int reps, const std::function<void()>& call) {
  MPI_Comm comm = comm_of(group);
  std::vector<double> samples;
  for (int i = 0; i < warmup + reps; ++i) {
    MPI_Barrier(comm);
    const int64_t t0 = now_ns();
    call();
    double ms = double(now_ns() - t0) * 1e-6, slowest = 0;
    MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (i >= warmup) samples.push_back(slowest);
  }
  return median(samples);
}

double sum_over_ranks(const ep::Group& group, double value) {
  double sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_of(group));
  return sum;
}

double mpi_alltoallv_ms(const ep::Group& group, const std::vector<int64_t>& send_bytes,
                        const std::vector<int64_t>& recv_bytes, int warmup, int reps) {
  const int R = group.size();
  const size_t n = static_cast<size_t>(R);
  std::vector<int> scount(n), sdispl(n), rcount(n), rdispl(n);
  int64_t stotal = 0, rtotal = 0;
  for (int d = 0; d < R; ++d) {
    TESSERA_CHECK(stotal + send_bytes[size_t(d)] < INT32_MAX && rtotal + recv_bytes[size_t(d)] < INT32_MAX,
                  "mpi_alltoallv_ms: payload too large for int counts");
    scount[size_t(d)] = int(send_bytes[size_t(d)]);
    sdispl[size_t(d)] = int(stotal);
    stotal += send_bytes[size_t(d)];
    rcount[size_t(d)] = int(recv_bytes[size_t(d)]);
    rdispl[size_t(d)] = int(rtotal);
    rtotal += recv_bytes[size_t(d)];
  }
  AlignedPtr<char> sbuf = aligned_array<char>(size_t(std::max<int64_t>(stotal, 64)));
  AlignedPtr<char> rbuf = aligned_array<char>(size_t(std::max<int64_t>(rtotal, 64)));
  std::memset(sbuf.get(), 0x3C, size_t(stotal));
  std::memset(rbuf.get(), 0, size_t(rtotal));
  MPI_Comm comm = comm_of(group);
  return median_call_ms(group, warmup, reps, [&] {
    MPI_Alltoallv(sbuf.get(), scount.data(), sdispl.data(), MPI_BYTE, rbuf.get(), rcount.data(), rdispl.data(),
                  MPI_BYTE, comm);
  });
}

}  // namespace tessera::bench
