// Timing of work spread over the pool threads, shared by the machine-limit loops (measure.cc) and the
// GEMM kernel ceiling (kernel_ceiling.cc).
#pragma once

#include <functional>

namespace tessera::info {

// Runs body(t, nt) on up to `threads` pool threads at once, all released from one barrier; returns the
// work (flops or bytes, summed over the bodies' return values) per second over the span from the first
// thread's start to the last thread's end, so stragglers count against it.
double timed_rate(int threads, const std::function<double(int, int)>& body);

// The median of kRateReps such repetitions.
constexpr int kRateReps = 7;
double median_rate(int threads, const std::function<double(int, int)>& body);

}  // namespace tessera::info
