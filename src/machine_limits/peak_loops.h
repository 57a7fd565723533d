// Chooses the loops that measure this machine's limits: the widest ones the hardware has (not capped
// by TESSERA_ISA: the limits describe the machine, not the kernels a user allowed), with portable
// fallbacks for CPUs below AVX2.
#pragma once

#include "backends/cpu/peak_kernels.h"

namespace tessera::info {

struct PeakLoops {
  cpu::ComputePeakFn f32_fma;
  const char* f32_name;
  cpu::ComputePeakFn bf16_dot;  // nullptr without AVX512_BF16
  const char* bf16_name;
  cpu::ComputePeakFn bf16_amx;  // nullptr without usable AMX tiles
  const char* bf16_amx_name;
  const cpu::StreamKernels* stream;

  // The loop behind bf16_peak_gflops (measure_machine_limits and measure_bf16_peak_gflops): the
  // tiles, else vdpbf16ps, else the fp32 FMA loop.
  cpu::ComputePeakFn bf16_peak() const { return bf16_amx ? bf16_amx : bf16_dot ? bf16_dot : f32_fma; }
};

PeakLoops select_peak_loops();

}  // namespace tessera::info
