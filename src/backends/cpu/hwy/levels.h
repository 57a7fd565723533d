// Maps tessera's instruction-set levels to the Highway targets the files in this folder are compiled for.
// Each file here is compiled once per target by Highway's foreach_target.h (functions carry the target's
// attributes, so nothing outside the target namespaces is built with wider instructions); a file exports
// one accessor taking the level, which returns the table of that level's target or nullptr.
//
//   tessera level          Highway target   registers
//   kAvx2                  HWY_AVX2         256-bit, AVX2 + FMA + F16C
//   kAvx512 and above      HWY_AVX3         512-bit, AVX-512 F/BW/DQ/VL
//   kNeon and above (ARM)  HWY_NEON         128-bit Advanced SIMD (Highway's A64 NEON target also
//                                           enables AES; tessera's kernels use none of its AES ops)
//
// Highway's SVE targets are not built (src/CMakeLists.txt says why), so kNeonBf16 and kSve run the NEON
// code here; their BFDOT/BFMMLA and SVE kernels are separate work (docs/cpu.md, section ARM64).
//
// Use only outside HWY_NAMESPACE, under #if HWY_ONCE:
//   const EpKernels* ep_kernels_hwy(Isa isa) { TESSERA_HWY_SELECT(isa, ep_kernel_table); }
// where ep_kernel_table() is a function defined in every target's namespace.
#pragma once

#include "tessera/core/cpu.h"

#if HWY_TARGETS & HWY_AVX2
#define TESSERA_HWY_CASE_AVX2(fn) \
  if (isa_ == ::tessera::Isa::kAvx2) return N_AVX2::fn();
#else
#define TESSERA_HWY_CASE_AVX2(fn)
#endif

#if HWY_TARGETS & HWY_AVX3
#define TESSERA_HWY_CASE_AVX3(fn) \
  if (int(isa_) >= int(::tessera::Isa::kAvx512)) return N_AVX3::fn();
#else
#define TESSERA_HWY_CASE_AVX3(fn)
#endif

#if HWY_TARGETS & HWY_NEON
#define TESSERA_HWY_CASE_NEON(fn) \
  if (::tessera::isa_includes(isa_, ::tessera::Isa::kNeon)) return N_NEON::fn();
#else
#define TESSERA_HWY_CASE_NEON(fn)
#endif

#define TESSERA_HWY_SELECT(isa, fn)    \
  do {                                 \
    const ::tessera::Isa isa_ = (isa); \
    TESSERA_HWY_CASE_AVX3(fn)          \
    TESSERA_HWY_CASE_AVX2(fn)          \
    TESSERA_HWY_CASE_NEON(fn)          \
    return nullptr;                    \
  } while (0)
