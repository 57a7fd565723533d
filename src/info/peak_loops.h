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
};

PeakLoops select_peak_loops();

}  // namespace tessera::info
