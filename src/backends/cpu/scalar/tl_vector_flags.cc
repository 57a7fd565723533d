// The host-compiler flags of the tile language's generated code per level (see tl_vector.h).
//
// Each level names its instruction sets explicitly, never -march=native: a level capped by TESSERA_ISA,
// or a process whose CPU differs from the compiler's (an emulator, a container moved between hosts),
// must not get wider instructions than its level. -mtune=native only schedules for the machine that
// compiles (no instructions added); without it GCC's generic tuning splits every unaligned 256-bit
// load into two halves.
#include "backends/cpu/tl_vector.h"
#include "tessera/core/cpu.h"

namespace tessera::cpu {
namespace {

constexpr const char* kScalar[] = {nullptr};
constexpr const char* kAvx2[] = {"-mavx2", "-mfma", "-mf16c", "-mtune=native", nullptr};
constexpr const char* kAvx512[] = {"-mavx2",     "-mfma",      "-mf16c",        "-mavx512f", "-mavx512bw",
                                   "-mavx512dq", "-mavx512vl", "-mtune=native", nullptr};
constexpr const char* kAvx512Bf16[] = {"-mavx2",       "-mfma",        "-mf16c",        "-mavx512f",
                                       "-mavx512bw",   "-mavx512dq",   "-mavx512vl",    "-mavx512bf16",
                                       "-mavx512vbmi", "-mavx512vnni", "-mtune=native", nullptr};

// ARM: 8 fp32 lanes, two 128-bit registers per vector operation (the compiler splits GCC vectors wider
// than the ISA's). No -mtune=native: a cross compiler on an x86 host has no ARM CPU to read.
constexpr const char* kNeon[] = {"-march=armv8-a", nullptr};
constexpr const char* kNeonBf16[] = {"-march=armv8.2-a+bf16+i8mm", nullptr};
constexpr const char* kSve[] = {"-march=armv8.2-a+bf16+i8mm+sve", nullptr};

const TlVectorFlags kTables[] = {{0, kScalar}, {8, kAvx2},     {16, kAvx512}, {16, kAvx512Bf16},
                                 {8, kNeon},   {8, kNeonBf16}, {8, kSve}};

}  // namespace

const TlVectorFlags* tl_vector_flags(Isa level) {
  if (level == Isa::kSve) return &kTables[6];
  if (level == Isa::kNeonBf16) return &kTables[5];
  if (level == Isa::kNeon) return &kTables[4];
  if (isa_includes(level, Isa::kAvx512Bf16)) return &kTables[3];
  if (level == Isa::kAvx512) return &kTables[2];
  if (level == Isa::kAvx2) return &kTables[1];
  return &kTables[0];
}

}  // namespace tessera::cpu
