// ARM half of CPU detection: the instruction sets from the kernel's HWCAP/HWCAP2 bits (what the kernel
// lets user space run, so no separate OS check as on x86) and the SVE register width this process has.
#include <sys/auxv.h>
#include <sys/prctl.h>

#include <fstream>
#include <string>

#include "core/cpu_detect.h"

// Bit values from the kernel's arch/arm64 uapi (hwcap.h, prctl.h), for C libraries that predate them.
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif
#ifndef HWCAP2_SVE2
#define HWCAP2_SVE2 (1 << 1)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1 << 14)
#endif
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
#ifndef PR_SVE_VL_LEN_MASK
#define PR_SVE_VL_LEN_MASK 0xffff
#endif

namespace tessera::detail {
namespace {

constexpr Isa kLevels[] = {Isa::kScalar, Isa::kNeon, Isa::kNeonBf16, Isa::kSve};

// "ARM implementer 0x41 part 0xd40" from /proc/cpuinfo (AArch64 kernels print no model name).
void read_identity(CpuFeatures* f) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, implementer, part;
  while (std::getline(in, line) && (implementer.empty() || part.empty())) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(value.begin());
    if (line.rfind("CPU implementer", 0) == 0) implementer = value;
    if (line.rfind("CPU part", 0) == 0) part = value;
  }
  f->vendor = implementer.empty() ? "ARM" : "ARM implementer " + implementer;
  f->model_name = part.empty() ? "AArch64 CPU" : "AArch64 CPU part " + part;
}

}  // namespace

void detect_isa_features(CpuFeatures* f) {
  read_identity(f);
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f->asimd = hw & HWCAP_ASIMD;
  f->asimddp = hw & HWCAP_ASIMDDP;
  f->sve = hw & HWCAP_SVE;
  f->sve2 = hw2 & HWCAP2_SVE2;
  f->i8mm = hw2 & HWCAP2_I8MM;
  f->arm_bf16 = hw2 & HWCAP2_BF16;
  if (f->sve) {
    const int vl = prctl(PR_SVE_GET_VL, 0, 0, 0, 0);
    f->sve_vector_bytes = vl > 0 ? (vl & PR_SVE_VL_LEN_MASK) : 0;
  }
  if (f->asimd) f->best = Isa::kNeon;
  if (f->best == Isa::kNeon && f->arm_bf16 && f->i8mm) f->best = Isa::kNeonBf16;
  if (f->best == Isa::kNeonBf16 && f->sve && f->sve_vector_bytes >= 16) f->best = Isa::kSve;
}

IsaFamily build_isa_family() {
  return IsaFamily::kArm;
}

const Isa* build_isa_levels(int* count) {
  *count = int(sizeof(kLevels) / sizeof(kLevels[0]));
  return kLevels;
}

}  // namespace tessera::detail
