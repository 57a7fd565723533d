// tessera/core/cpu.h - CPU feature detection and the instruction-set levels tessera dispatches on.
//
// Detected once (x86: CPUID + XGETBV for OS-enabled register state; ARM: the kernel's HWCAP/HWCAP2 bits).
// The level used by kernels is the best detected one, capped by the environment variable TESSERA_ISA
// (x86: scalar|avx2|avx512|avx512bf16|amx; ARM: scalar|neon|neon_bf16|sve) or set_isa_cap();
// TESSERA_FORCE_REFERENCE=1 is the same as TESSERA_ISA=scalar.
//
// Levels come in two families, x86 and ARM; scalar belongs to both. Within a family a higher level
// includes the lower ones; across families nothing is included (isa_includes), so compare levels with
// it, never with their numbers.
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
  kNeon = 5,        // ARM: Advanced SIMD (128-bit), every AArch64 CPU
  kNeonBf16 = 6,    // ARM: kNeon + BF16 dot/matrix products (BFDOT, BFMMLA) + I8MM
  kSve = 7,         // ARM: kNeonBf16's instructions + SVE (scalable vectors) with BF16
};

// Levels of both families, for arrays indexed by int(Isa).
constexpr int kIsaCount = int(Isa::kSve) + 1;

enum class IsaFamily : int { kX86, kArm };

// The family this build runs on (x86 on x86-64 builds, ARM on AArch64 builds).
IsaFamily host_isa_family();
// True when `level` runs everything `need` does: `need` is scalar, or both are of one family and
// `level` is at least `need`.
bool isa_includes(Isa level, Isa need);
// The levels of this build's family, scalar first, most specialised last.
const Isa* host_isa_levels(int* count);
// The highest level of this build's family (the cap when nothing caps).
Isa host_isa_top();

struct CpuFeatures {
  std::string vendor, model_name;
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_bf16 = false, avx512_vbmi = false, avx512_vnni = false, avx512_fp16 = false;
  bool amx_bf16 = false;  // tiles and tdpbf16ps usable: CPUID, XCR0 tile state and the Linux permission
  // ARM (HWCAP/HWCAP2): Advanced SIMD, its dot products, BF16 and int8 matrix products, SVE and SVE2.
  bool asimd = false, asimddp = false, arm_bf16 = false, i8mm = false, sve = false, sve2 = false;
  int sve_vector_bytes = 0;  // SVE register width the kernel gives this process (prctl), 0 without SVE
  int logical_cpus = 1;
  // Data cache sizes this (possibly virtual) machine reports, per core for L1/L2 and shared for L3; from
  // sysfs first (sysconf can report the host's whole L3 inside a VM), else sysconf, else a typical size.
  int64_t l1d_bytes = 32 << 10, l2_bytes = 1 << 20, l3_bytes = 32 << 20;
  Isa best = Isa::kScalar;  // best level the hardware and OS support
};

const CpuFeatures& cpu_features();
const char* isa_name(Isa isa);
Isa isa_from_name(const std::string& name);  // any family's level; throws on unknown names
// The level kernels use: min(cpu_features().best, cap).
Isa active_isa();
// For tests and users validating other hardware; throws when `cap` is of the other family.
void set_isa_cap(Isa cap);
// Space-separated feature list, e.g. "avx2 fma f16c avx512f ... avx512_bf16" or "asimd ... sve sve_vl=256".
std::string cpu_feature_string();

}  // namespace tessera
