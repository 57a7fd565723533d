// tessera/core/timer.h - monotonic time and the small statistics benchmarks report.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

int64_t now_ns();
// Median of the samples (the mean of the two middle ones for even sizes); 0 for an empty vector.
double median(std::vector<double> v);

}  // namespace tessera
