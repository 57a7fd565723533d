#include "tessera/core/cpu.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/cpu_detect.h"
#include "tessera/core/error.h"

namespace tessera {
namespace {

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
  detail::detect_isa_features(&f);
  return f;
}

// "an ARM CPU: scalar, neon, neon_bf16, sve" for errors.
std::string host_family_levels_text() {
  int n = 0;
  const Isa* levels = detail::build_isa_levels(&n);
  std::string s = detail::build_isa_family() == IsaFamily::kArm ? "on ARM CPUs, levels " : "on x86 CPUs, levels ";
  for (int i = 0; i < n; ++i) s += std::string(i ? ", " : "") + isa_name(levels[i]);
  return s;
}

Isa cap_from_env() {
  const char* force = std::getenv("TESSERA_FORCE_REFERENCE");
  if (force && *force && std::strcmp(force, "0") != 0) return Isa::kScalar;
  const char* isa = std::getenv("TESSERA_ISA");
  if (!isa || !*isa) return host_isa_top();
  const Isa cap = isa_from_name(isa);
  if (!isa_includes(host_isa_top(), cap))
    fail(ErrorCode::kInvalidArgument, "TESSERA_ISA='", isa, "' is a level of the other CPU family; this build runs ",
         host_family_levels_text());
  return cap;
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
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512bf16";
    case Isa::kAmx:
      return "amx";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonBf16:
      return "neon_bf16";
    case Isa::kSve:
      return "sve";
  }
  return "?";
}

Isa isa_from_name(const std::string& name) {
  for (Isa i :
       {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx, Isa::kNeon, Isa::kNeonBf16, Isa::kSve})
    if (name == isa_name(i)) return i;
  fail(ErrorCode::kInvalidArgument, "unknown ISA '", name,
       "' (TESSERA_ISA must be one of scalar, avx2, avx512, avx512bf16, amx on x86; scalar, neon, neon_bf16, sve on "
       "ARM)");
}

IsaFamily host_isa_family() {
  return detail::build_isa_family();
}

bool isa_includes(Isa level, Isa need) {
  if (need == Isa::kScalar) return true;
  const bool level_arm = int(level) >= int(Isa::kNeon), need_arm = int(need) >= int(Isa::kNeon);
  return level != Isa::kScalar && level_arm == need_arm && int(level) >= int(need);
}

const Isa* host_isa_levels(int* count) {
  return detail::build_isa_levels(count);
}

Isa host_isa_top() {
  int n = 0;
  const Isa* levels = detail::build_isa_levels(&n);
  return levels[n - 1];
}

Isa active_isa() {
  const int best = int(cpu_features().best);
  const int cap = isa_cap().load(std::memory_order_relaxed);
  return Isa(best < cap ? best : cap);
}

void set_isa_cap(Isa cap) {
  if (!isa_includes(host_isa_top(), cap))
    fail(ErrorCode::kInvalidArgument, "set_isa_cap: cap '", isa_name(cap),
         "' is a level of the other CPU family; this build runs ", host_family_levels_text());
  isa_cap().store(int(cap));
}

std::string cpu_feature_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vl, "avx512vl");
  add(f.avx512_vbmi, "avx512_vbmi");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_fp16, "avx512_fp16");
  add(f.amx_bf16, "amx_bf16");
  add(f.asimd, "asimd");
  add(f.asimddp, "asimddp");
  add(f.arm_bf16, "bf16");
  add(f.i8mm, "i8mm");
  add(f.sve, "sve");
  add(f.sve2, "sve2");
  add(f.sve_vector_bytes > 0, ("sve_vl=" + std::to_string(8 * f.sve_vector_bytes)).c_str());
  return s.empty() ? "none" : s;
}

}  // namespace tessera
