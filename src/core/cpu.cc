#include "tessera/core/cpu.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "tessera/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TESSERA_X86 1
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace tessera {
namespace {

#ifdef TESSERA_X86
void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) { __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]); }
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
#endif

// Size in bytes of the level-`level` data (or unified) cache of cpu0 as sysfs reports it, else 0.
int64_t sysfs_cache_bytes(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(level_file >> l) || !(type_file >> type) || !(size_file >> size)) continue;
    if (l != level || type == "Instruction" || size.empty()) continue;
    const int64_t unit = (size.back() == 'K' || size.back() == 'k') ? 1024 : size.back() == 'M' ? 1 << 20 : 1;
    return std::atoll(size.c_str()) * unit;
  }
  return 0;
}

void detect_caches(CpuFeatures* f) {
  const int sysconf_names[4] = {0, _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  int64_t* out[4] = {nullptr, &f->l1d_bytes, &f->l2_bytes, &f->l3_bytes};
  for (int level = 1; level <= 3; ++level) {
    int64_t v = sysfs_cache_bytes(level);
    if (v <= 0) v = sysconf(sysconf_names[level]);
    if (v > 0) *out[level] = v;
  }
}

CpuFeatures detect() {
  CpuFeatures f;
  f.logical_cpus = int(std::thread::hardware_concurrency());
  if (f.logical_cpus <= 0) f.logical_cpus = 1;
  detect_caches(&f);
#ifdef TESSERA_X86
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
  const bool os_avx = (xcr0 & 0x6) == 0x6;            // XMM and YMM state
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
#endif
  if (f.avx2 && f.fma && f.f16c) f.best = Isa::kAvx2;
  if (f.best == Isa::kAvx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) f.best = Isa::kAvx512;
  if (f.best == Isa::kAvx512 && f.avx512_bf16 && f.avx512_vbmi) f.best = Isa::kAvx512Bf16;
  if (f.best == Isa::kAvx512Bf16 && f.amx_bf16) f.best = Isa::kAmx;
  return f;
}

Isa cap_from_env() {
  const char* force = std::getenv("TESSERA_FORCE_REFERENCE");
  if (force && *force && std::strcmp(force, "0") != 0) return Isa::kScalar;
  const char* isa = std::getenv("TESSERA_ISA");
  if (isa && *isa) return isa_from_name(isa);
  return Isa::kAmx;
}

std::atomic<int>& isa_cap() {
  static std::atomic<int> cap{int(cap_from_env())};
  return cap;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
    case Isa::kAmx: return "amx";
  }
  return "?";
}

Isa isa_from_name(const std::string& name) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    if (name == isa_name(i)) return i;
  fail(ErrorCode::kInvalidArgument, "unknown ISA '", name, "' (TESSERA_ISA must be one of scalar, avx2, avx512, avx512bf16, amx)");
}

Isa active_isa() {
  const int best = int(cpu_features().best);
  const int cap = isa_cap().load(std::memory_order_relaxed);
  return Isa(best < cap ? best : cap);
}

void set_isa_cap(Isa cap) { isa_cap().store(int(cap)); }

std::string cpu_feature_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(f.avx2, "avx2"); add(f.fma, "fma"); add(f.f16c, "f16c");
  add(f.avx512f, "avx512f"); add(f.avx512bw, "avx512bw"); add(f.avx512dq, "avx512dq");
  add(f.avx512vl, "avx512vl"); add(f.avx512_vbmi, "avx512_vbmi"); add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_bf16, "avx512_bf16"); add(f.avx512_fp16, "avx512_fp16"); add(f.amx_bf16, "amx_bf16");
  return s.empty() ? "none" : s;
}

}  // namespace tessera
