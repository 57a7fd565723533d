// The host target (see tessera/tl/target.h).
#include "tessera/core/cpu.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

Target Target::host() {
  Target t;
  const CpuFeatures& f = cpu_features();
  const Isa isa = active_isa();
  t.isa = isa_name(isa);
  t.cpu = f.model_name + " | " + cpu_feature_string();
  const std::vector<std::string> avx2 = {"-mavx2", "-mfma", "-mf16c"};
  std::vector<std::string> avx512 = avx2;
  for (const char* x : {"-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"}) avx512.push_back(x);
  if (isa == f.best && isa != Isa::kScalar) {
    t.isa_flags = {"-march=native"};  // built at run time for this machine: use all of it
  } else if (isa == Isa::kAvx512Bf16 || isa == Isa::kAmx) {  // tl emits no tile instructions
    t.isa_flags = avx512;
    for (const char* x : {"-mavx512bf16", "-mavx512vbmi", "-mavx512vnni"}) t.isa_flags.push_back(x);
  } else if (isa == Isa::kAvx512) {
    t.isa_flags = avx512;
  } else if (isa == Isa::kAvx2) {
    t.isa_flags = avx2;
  }
  t.vector_lanes = isa >= Isa::kAvx512 ? 16 : (isa == Isa::kAvx2 ? 8 : 0);
  return t;
}

std::string Target::str() const { return name + "-" + isa; }

}  // namespace tessera::tl
