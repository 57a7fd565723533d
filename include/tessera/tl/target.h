// tessera/tl/target.h - what a kernel is compiled for: the target name that selects tile-op
// implementations, the instruction set, the vector width of vectorized loops and the compiler flags.
#pragma once

#include <string>
#include <vector>

namespace tessera::tl {

struct Target {
  std::string name = "cpu";            // tile-op registry key
  std::string isa;                     // "avx512bf16", "avx512", "avx2" or "scalar"
  int vector_lanes = 16;               // lanes of a vectorized loop (TESSERA_TL_VW); 0 = scalar loops only
  std::vector<std::string> isa_flags;  // host-compiler flags for the ISA
  std::string cpu;  // CPU model and feature list (part of the cache key: -mtune=native schedules for it)

  // The running machine at the active ISA level (tessera::active_isa(), so TESSERA_ISA caps it): the
  // flags of that level from the kernel registry (slot kTlVector), never -march=native.
  static Target host();
  std::string str() const;  // "cpu-avx512bf16"
};

}  // namespace tessera::tl
