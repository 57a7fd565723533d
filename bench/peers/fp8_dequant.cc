#include "peers/fp8_dequant.h"

#include <algorithm>
#include <cstring>

// The clones give the peer AVX2 / AVX-512 code on x86 CPUs that have it; elsewhere the baseline vector
// code (NEON on AArch64) is what -O3 gives.
#if defined(__x86_64__)
#define TESSERA_PEER_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_PEER_CLONES
#endif

namespace tessera::bench {
namespace {

// One block of `count` values sharing `scale`. Branch-free so the compiler vectorises it (this file is
// also built with -O3).
TESSERA_PEER_CLONES void dequantize_block(const uint8_t* q, float scale, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t b = q[i];
    // Exponent and mantissa bits placed in an f32, times 2^120, give the e4m3 magnitude exactly
    // (subnormals included).
    float mag;
    const uint32_t em_bits = (b & 0x7Fu) << 20;
    std::memcpy(&mag, &em_bits, 4);
    uint32_t v;
    const float value = mag * 0x1p120f * scale;
    std::memcpy(&v, &value, 4);
    v ^= (b & 0x80u) << 24;
    out[i] = uint16_t((v + 0x7FFFu + ((v >> 16) & 1u)) >> 16);
  }
}

}  // namespace

void dequantize_fp8_rows_to_bf16(const GemmOperand& src, int64_t r0, int64_t r1, uint16_t* out) {
  const int64_t cols = src.cols, sc = src.scale_cols();
  for (int64_t r = r0; r < r1; ++r) {
    const float* row_scale = src.scale.get() + (r / src.gran_rows) * sc;
    for (int64_t kb = 0; kb < sc; ++kb) {
      const int64_t c0 = kb * GemmOperand::kGranK, count = std::min(GemmOperand::kGranK, cols - c0);
      dequantize_block(src.data.get() + r * cols + c0, row_scale[kb], count, out + r * cols + c0);
    }
  }
}

}  // namespace tessera::bench
