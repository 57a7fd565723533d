// How large the quick suite's compute-bound problems are on this machine. The quick sizes were chosen
// for a 2-core AMX host; a machine (or a TESSERA_ISA cap) whose level computes slower runs them scaled
// down by its measured rate, so the quick `tessera bench` takes about the same time on any ISA
// instead of 20x longer on a scalar one. --full always runs the listed sizes (scale 1).
#pragma once

#include <cstdint>

namespace tessera::bench {

// The rate of the probe below that the quick sizes were chosen for (AMX, 2 cores, here: about 1000).
constexpr double kQuickReferenceGflops = 600;

// Measured rate of tessera's bf16 GEMM at the active level on a small fixed problem (256 x 256 x 1024,
// about 10-60 ms even on the scalar level), GFLOP/s.
double probe_gemm_gflops();
// min(1, gflops / kQuickReferenceGflops); 1 when full.
double quick_scale_for(double gflops, bool full);
// size * scale rounded down to a multiple of `step`, clamped to [min_size, size].
int64_t scaled_size(int64_t size, double scale, int64_t step, int64_t min_size);

}  // namespace tessera::bench
