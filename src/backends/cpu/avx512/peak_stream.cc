// Streaming read and copy loops on 512-bit zmm registers (peak_stream-inl.h), used to measure cache
// and DRAM bandwidth.
#include "backends/cpu/avx512/f32_vec.h"
#include "backends/cpu/peak_kernels.h"
#include "backends/cpu/peak_stream-inl.h"

namespace tessera::cpu {

const StreamKernels* stream_kernels_avx512() {
  static constexpr StreamKernels kKernels{"avx512", read_sum<Avx512F32>, copy<Avx512F32>};
  return &kKernels;
}

}  // namespace tessera::cpu
