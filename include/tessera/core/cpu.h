// tessera/core/cpu.h - CPU feature detection and the instruction-set levels tessera dispatches on.
//
// Detected once (CPUID + XGETBV for OS-enabled register state). The level used by kernels is the best
// detected one, capped by the environment variable TESSERA_ISA (scalar|avx2|avx512|avx512bf16|amx) or
// set_isa_cap(); TESSERA_FORCE_REFERENCE=1 is the same as TESSERA_ISA=scalar.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

enum class Isa : int {
  kScalar = 0,      // portable C++; the reference path, always available
  kAvx2 = 1,        // AVX2 + FMA + F16C
  kAvx512 = 2,      // AVX-512 F/BW/DQ/VL
  kAvx512Bf16 = 3,  // AVX-512 + BF16 dot products + VBMI (byte permutes for fp8/fp4 lookups)
  kAmx = 4,         // kAvx512Bf16 + AMX tiles with bf16 products (tdpbf16ps), OS-enabled and granted
};

struct CpuFeatures {
  std::string vendor, model_name;
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_bf16 = false, avx512_vbmi = false, avx512_vnni = false, avx512_fp16 = false;
  bool amx_bf16 = false;  // tiles and tdpbf16ps usable: CPUID, XCR0 tile state and the Linux permission
  int logical_cpus = 1;
  // Data cache sizes this (possibly virtual) machine reports, per core for L1/L2 and shared for L3; from
  // sysfs first (sysconf can report the host's whole L3 inside a VM), else sysconf, else a typical size.
  int64_t l1d_bytes = 32 << 10, l2_bytes = 1 << 20, l3_bytes = 32 << 20;
  Isa best = Isa::kScalar;  // best level the hardware and OS support
};

const CpuFeatures& cpu_features();
const char* isa_name(Isa isa);
Isa isa_from_name(const std::string& name);  // throws on unknown names
// The level kernels use: min(cpu_features().best, cap).
Isa active_isa();
void set_isa_cap(Isa cap);  // for tests and users validating other hardware
// Space-separated feature list, e.g. "avx2 fma f16c avx512f ... avx512_bf16".
std::string cpu_feature_string();

}  // namespace tessera
