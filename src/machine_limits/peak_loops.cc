#include "machine_limits/peak_loops.h"

#include <cstring>

#include "tessera/core/cpu.h"

namespace tessera::info {
namespace {

// ---- portable fallbacks (plain x86-64 or any other target) ----

constexpr int kPortableAcc = 16;

// acc = acc * x + y on 16 independent chains; without FMA hardware that is a multiply and an add.
double portable_f32_loop(int64_t iters, float* sink) {
  const float seed = *static_cast<volatile float*>(sink);
  const float x = 0.999f + seed * 1e-9f, y = 1e-3f;
  float acc[kPortableAcc];
  for (int j = 0; j < kPortableAcc; ++j) acc[j] = seed + float(j);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kPortableAcc; ++j) acc[j] = acc[j] * x + y;
  float total = 0.0f;
  for (float a : acc) total += a;
  *sink = total;
  return double(iters) * kPortableAcc * 2;
}

// Integer sums of 8-byte words on 8 chains (integer adds may be reordered, so the compiler is free to
// vectorise this; float adds could not be).
float portable_read_sum(const float* src, int64_t n) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(src);
  uint64_t acc[8] = {};
  for (int64_t off = 0; off < n * 4; off += 64) {
    for (int j = 0; j < 8; ++j) {
      uint64_t w;
      std::memcpy(&w, bytes + off + 8 * j, 8);
      acc[j] += w;
    }
  }
  uint64_t total = 0;
  for (uint64_t a : acc) total ^= a;
  return float(total & 0xFFFF);
}

void portable_copy(float* dst, const float* src, int64_t n, int) {
  std::memcpy(dst, src, size_t(n) * 4);
}

constexpr cpu::StreamKernels kPortableStream{"portable", portable_read_sum, portable_copy};

}  // namespace

// The loops of the active level, so a capped run (TESSERA_ISA=avx2) measures the limits of a CPU that
// has only that level.
PeakLoops select_peak_loops() {
  const Isa level = active_isa();
  PeakLoops loops{portable_f32_loop, "portable", nullptr, "none", nullptr, "none", &kPortableStream};
  if (isa_includes(level, Isa::kAvx2)) {
    loops.f32_fma = cpu::peak_f32_fma_avx2();
    loops.f32_name = "avx2 vfmadd231ps ymm";
    loops.stream = cpu::stream_kernels_avx2();
  }
  if (isa_includes(level, Isa::kAvx512)) {
    loops.f32_fma = cpu::peak_f32_fma_avx512();
    loops.f32_name = "avx512 vfmadd231ps zmm";
    loops.stream = cpu::stream_kernels_avx512();
  }
  if (isa_includes(level, Isa::kAvx512Bf16)) {
    loops.bf16_dot = cpu::peak_bf16_dot_avx512bf16();
    loops.bf16_name = "avx512bf16 vdpbf16ps zmm";
  }
  if (isa_includes(level, Isa::kAmx)) {
    loops.bf16_amx = cpu::peak_bf16_amx();
    loops.bf16_amx_name = "amx tdpbf16ps 2x2 tiles";
  }
  return loops;
}

}  // namespace tessera::info
