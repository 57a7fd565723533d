// The benchmark harness behind `tessera bench`: components, the rows they produce, and the reports.
//
// Every row is one case: our op on one shape, its median time, GFLOP/s, GB/s, the percent of this
// machine's measured limit (tessera::machine_limits()) and the throughput ratio to a peer library run
// in the same process right after ours (peer time / our time: > 1 means we are faster).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "tessera/info.h"

namespace tessera::bench {

constexpr double kNotAvailable = std::numeric_limits<double>::quiet_NaN();

struct Options {
  bool full = false;  // every case instead of the quick subset
  int threads = 0;    // threads for us and the peers (the pool size when the run starts)
  // Quick runs: compute-bound cases shrink by this factor (0, 1] on a machine or ISA level slower than
  // the one the quick sizes were chosen for (quick_scale.h); 1 with --full.
  double quick_scale = 1;
};

struct Row {
  std::string component;  // "gemm"
  std::string op;         // "bf16_gemm_nt"
  int64_t m = 0, n = 0, k = 0;
  // "ok", or why the row has no valid numbers ("wrong result: ...", "error: ...").
  std::string status = "ok";
  double time_ms = kNotAvailable, gflops = kNotAvailable, gbps = kNotAvailable;
  double pct_of_limit = kNotAvailable;
  std::string limit_name;                     // which MachineLimits figure pct_of_limit divides by
  double limit_value = kNotAvailable;         // that figure, where it was measured right after the row
  double pct_of_start_limit = kNotAvailable;  // the same throughput over the figure of the run's start
  // The highest pct_of_limit an ideal implementation of this case reaches, when it is below 100%
  // (ep dispatch: the rank's own tokens are copied too but not counted; NaN: no such bound).
  double pct_ceiling = kNotAvailable;
  // The same bound through the peer's matmul where the component measures one (attention: oneDNN on
  // the row's products), as a percentage of the same limit.
  double pct_peer_ceiling = kNotAvailable;
  double check_error = kNotAvailable;  // worst verification error / its tolerance (<= 1 passes)
  std::string peer;                    // the first peer's name; empty when it is not available in this build
  double peer_time_ms = kNotAvailable, peer_ratio = kNotAvailable;
  // The second peer (the gemm suite's OpenBLAS; the kernels suite's torch): its name, time and ratio.
  std::string peer2 = "OpenBLAS";
  double openblas_time_ms = kNotAvailable, openblas_ratio = kNotAvailable;
  bool ok() const { return status == "ok"; }
};

struct Component {
  const char* name;
  const char* summary;  // one line for the usage message
  const char* help;     // the text `tessera bench <name> --help` prints
  std::vector<Row> (*run)(const Options& options, const MachineLimits& limits);
  // Prints this component's group geometric means and target check lines for its rows.
  void (*summarize)(std::FILE* out, const std::vector<Row>& rows);
};

const std::vector<Component>& components();
const Component* find_component(const std::string& name);  // nullptr when unknown

// Reports. The table has one aligned line per row; the summary calls each component's summary on its
// rows; the JSON form is one array of row objects.
void print_table(std::FILE* out, const std::vector<Row>& rows);
void print_summary(std::FILE* out, const std::vector<Row>& rows);
void print_json(std::FILE* out, const std::vector<Row>& rows);

// Geometric means over the rows that passed, each metric over the rows where it is available.
struct GeoMeans {
  int rows = 0;
  double pct_of_limit = kNotAvailable, peer_ratio = kNotAvailable, openblas_ratio = kNotAvailable;
  double pct_of_start_limit = kNotAvailable;
};
GeoMeans geo_means(const std::vector<const Row*>& rows);
// "1.23x" or "n/a"; "45.6%" or "n/a".
std::string format_ratio(double ratio);
std::string format_pct(double pct);

}  // namespace tessera::bench
