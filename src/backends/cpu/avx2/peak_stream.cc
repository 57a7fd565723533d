// Streaming read and copy loops on 256-bit ymm registers (peak_stream-inl.h), used to measure cache
// and DRAM bandwidth.
#include "backends/cpu/avx2/f32_vec.h"
#include "backends/cpu/peak_kernels.h"
#include "backends/cpu/peak_stream-inl.h"

namespace tessera::cpu {

const StreamKernels* stream_kernels_avx2() {
  static constexpr StreamKernels kKernels{"avx2", read_sum<Avx2F32>, copy<Avx2F32>};
  return &kKernels;
}

}  // namespace tessera::cpu
