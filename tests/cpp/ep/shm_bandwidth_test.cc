// The in-group shared-memory measurements behind `tessera bench ep`'s limit and ceiling: both patterns
// return a rate exactly when the rank's node has other ranks (pretend one-rank nodes get 0).
#include "tessera/ep/shm_bandwidth.h"

#include <string>

#include "ep_test_util.h"

namespace tessera::ep::test {
namespace {

TEST(ShmBandwidth, PatternsInGroup) {
  Group& g = world_group();
  const bool has_peers = g.topology().num_local_ranks > 1;
  for (const ShmPattern pattern : {ShmPattern::kCopy, ShmPattern::kFanOut}) {
    // 1 MiB per rank: small enough for a test, not a multiple of the fan-out's 14336-byte rows.
    const double gbps = measure_shm_pattern_gbps_in_group(g, pattern, int64_t(1) << 20);
    if (has_peers) {
      EXPECT_GT(gbps, 0.0) << "pattern " << int(pattern);
      EXPECT_LT(gbps, 1e4) << "pattern " << int(pattern);
    } else {
      EXPECT_EQ(gbps, 0.0) << "pattern " << int(pattern);
    }
  }
  EXPECT_EQ(measure_shm_copy_gbps_in_group(g, int64_t(1) << 20) > 0.0, has_peers);
}

}  // namespace
}  // namespace tessera::ep::test
