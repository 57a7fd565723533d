// x86 half of CPU detection: CPUID for the instruction sets, XGETBV for the register state the OS
// saves, and Linux's permission for AMX tiles. Built on x86-64 (and as the scalar-only fallback on
// architectures tessera has no levels for).
#include <cstring>
#include <string>

#include "core/cpu_detect.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TESSERA_X86 1
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace tessera::detail {
namespace {

#ifdef TESSERA_X86
void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}
uint64_t xgetbv0() {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// Linux (5.16+) keeps the AMX tile data state off until a process asks for it; without the permission
// the first tile instruction faults. Granted for the whole process, so asking once here is enough.
bool request_amx_permission() {
#ifdef __linux__
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

void detect_x86(CpuFeatures& f) {
  unsigned r[4];
  cpuid(0, 0, r);
  const unsigned max_leaf = r[0];
  char vendor[13] = {};
  std::memcpy(vendor, &r[1], 4);
  std::memcpy(vendor + 4, &r[3], 4);
  std::memcpy(vendor + 8, &r[2], 4);
  f.vendor = vendor;
  cpuid(0x80000000u, 0, r);
  if (r[0] >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      cpuid(0x80000002u + i, 0, r);
      std::memcpy(brand + 16 * i, r, 16);
    }
    std::string s = brand;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    while (!s.empty() && s.front() == ' ') s.erase(s.begin());
    f.model_name = s;
  }
  cpuid(1, 0, r);
  const bool osxsave = r[2] & (1u << 27);
  f.fma = r[2] & (1u << 12);
  f.f16c = r[2] & (1u << 29);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  if (max_leaf >= 7) {
    cpuid(7, 0, r);
    f.avx2 = os_avx && (r[1] & (1u << 5));
    f.avx512f = os_avx512 && (r[1] & (1u << 16));
    f.avx512dq = os_avx512 && (r[1] & (1u << 17));
    f.avx512bw = os_avx512 && (r[1] & (1u << 30));
    f.avx512vl = os_avx512 && (r[1] & (1u << 31));
    f.avx512_vbmi = os_avx512 && (r[2] & (1u << 1));
    f.avx512_vnni = os_avx512 && (r[2] & (1u << 11));
    f.avx512_fp16 = os_avx512 && (r[3] & (1u << 23));
    // AMX-BF16 (bit 22) and AMX-TILE (bit 24); Linux also wants the process to ask for the tile state.
    f.amx_bf16 = os_amx && (r[3] & (1u << 22)) && (r[3] & (1u << 24)) && request_amx_permission();
    const unsigned sub_leaves = r[0];
    if (sub_leaves >= 1) {
      cpuid(7, 1, r);
      f.avx512_bf16 = os_avx512 && (r[0] & (1u << 5));
    }
  }
  f.fma = f.fma && os_avx;
  f.f16c = f.f16c && os_avx;
}
#endif

constexpr Isa kLevels[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx};

}  // namespace

void detect_isa_features(CpuFeatures* f) {
#ifdef TESSERA_X86
  detect_x86(*f);
#endif
  if (f->avx2 && f->fma && f->f16c) f->best = Isa::kAvx2;
  if (f->best == Isa::kAvx2 && f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl) f->best = Isa::kAvx512;
  if (f->best == Isa::kAvx512 && f->avx512_bf16 && f->avx512_vbmi) f->best = Isa::kAvx512Bf16;
  if (f->best == Isa::kAvx512Bf16 && f->amx_bf16) f->best = Isa::kAmx;
}

IsaFamily build_isa_family() {
  return IsaFamily::kX86;
}

const Isa* build_isa_levels(int* count) {
  *count = int(sizeof(kLevels) / sizeof(kLevels[0]));
  return kLevels;
}

}  // namespace tessera::detail
