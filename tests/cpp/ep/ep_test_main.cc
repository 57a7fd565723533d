// main() of the multi-rank ep tests, run as `mpirun -np N tessera_ep_tests`. Every rank runs every
// test (the buffers' methods are collective); rank 0 prints the usual GoogleTest report, the other
// ranks print only their failures, prefixed with their rank. Any failing rank fails the job.
#include <gtest/gtest.h>

#include <cstdio>

#include "ep_test_util.h"
#include "tessera/core/thread_pool.h"

namespace {

class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto& world = tessera::ep::test::world_group();
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(world.rank()));
  } else {
    std::printf("ep tests: %s, %d pool threads per rank\n", world.topology().describe().c_str(),
                tessera::num_threads());
  }
  return RUN_ALL_TESTS();
}
