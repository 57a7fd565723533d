// The kernel registry's tables: one list per slot, most specialised level first (see registry.h).
// An implementation whose `get` is null is the component's own portable code (the table is null). ARM
// entries come first (their levels number above x86's, keeping each list's `need` non-increasing);
// isa_includes() keeps every level to its own family's entries. Highway's ARM entries start at kNeon:
// the accessor maps each ARM level to its target (hwy/levels.h).
#include "backends/cpu/registry.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/mla_bwd_kernel_set.h"
#include "backends/cpu/mla_kernel_set.h"
#include "backends/cpu/mqa_logits_kernels.h"
#include "backends/cpu/select_kernels.h"
#include "backends/cpu/tl_gemv.h"
#include "backends/cpu/tl_vector.h"
#include "core/env.h"
#include "tessera/info.h"

namespace tessera::cpu {
namespace {

template <const GemmKernelSet* (*Get)()>
const void* gemm_set(Isa) {
  return Get();
}

const KernelImpl kGemmPacked[] = {
    {"packed_neon_bf16", Isa::kNeonBf16, gemm_set<gemm_kernels_neon_bf16>},
    {"packed_neon", Isa::kNeon, gemm_set<gemm_kernels_neon>},
    {"packed_amx", Isa::kAmx, gemm_set<gemm_kernels_amx>},
    {"packed_avx512bf16", Isa::kAvx512Bf16, gemm_set<gemm_kernels_avx512bf16>},
    {"packed_avx512", Isa::kAvx512, gemm_set<gemm_kernels_avx512>},
    {"packed_avx2", Isa::kAvx2, gemm_set<gemm_kernels_avx2>},
    {"reference", Isa::kScalar, nullptr},
};

const KernelImpl kGemmFinalize[] = {
    {"finalize_hwy", Isa::kNeon,
     [](Isa l) -> const void* { return reinterpret_cast<const void*>(gemm_finalize_hwy(l)); }},
    {"finalize_avx512", Isa::kAvx512,
     [](Isa) -> const void* { return reinterpret_cast<const void*>(gemm_finalize_avx512()); }},
    {"finalize_hwy", Isa::kAvx2,
     [](Isa l) -> const void* { return reinterpret_cast<const void*>(gemm_finalize_hwy(l)); }},
    {"finalize_scalar", Isa::kScalar, nullptr},
};

// GEMV tables are the kernel function pointers (GemvFn, GemvFp4Fn) themselves.
template <class Fn>
const void* fn_table(Fn fn) {
  return reinterpret_cast<const void*>(fn);
}

const KernelImpl kGemvBf16[] = {
    {"gemv_neon_bf16", Isa::kNeonBf16, [](Isa) { return fn_table(gemv_kernel_neon_bf16()); }},
    {"gemv_hwy", Isa::kNeon, [](Isa l) { return fn_table(gemv_kernel_hwy(l)); }},
    {"gemv_amx", Isa::kAmx, [](Isa) { return fn_table(gemv_kernel_amx()); }},
    {"gemv_avx512bf16", Isa::kAvx512Bf16, [](Isa) { return fn_table(gemv_kernel_avx512bf16()); }},
    {"gemv_hwy", Isa::kAvx2, [](Isa l) { return fn_table(gemv_kernel_hwy(l)); }},
    {"packed_gemm", Isa::kScalar, nullptr},
};
const KernelImpl kGemvFp8[] = {
    {"gemv_neon_bf16", Isa::kNeonBf16, [](Isa) { return fn_table(gemv_kernel_neon_bf16()); }},
    {"gemv_hwy", Isa::kNeon, [](Isa l) { return fn_table(gemv_kernel_hwy(l)); }},
    {"gemv_amx_e4m3", Isa::kAmx, [](Isa) { return fn_table(gemv_kernel_amx()); }},
    {"gemv_avx512bf16", Isa::kAvx512Bf16, [](Isa) { return fn_table(gemv_kernel_avx512bf16()); }},
    {"gemv_hwy", Isa::kAvx2, [](Isa l) { return fn_table(gemv_kernel_hwy(l)); }},
    {"packed_gemm", Isa::kScalar, nullptr},
};
const KernelImpl kGemvFp4[] = {
    {"gemv_fp4_neon_bf16", Isa::kNeonBf16, [](Isa) { return fn_table(gemv_fp4_kernel_neon_bf16()); }},
    {"gemv_fp4_hwy", Isa::kNeon, [](Isa l) { return fn_table(gemv_fp4_kernel_hwy(l)); }},
    {"gemv_fp4_amx", Isa::kAmx, [](Isa) { return fn_table(gemv_fp4_kernel_amx()); }},
    {"gemv_fp4_avx512bf16", Isa::kAvx512Bf16, [](Isa) { return fn_table(gemv_fp4_kernel_avx512bf16()); }},
    {"gemv_fp4_hwy", Isa::kAvx2, [](Isa l) { return fn_table(gemv_fp4_kernel_hwy(l)); }},
    {"packed_gemm", Isa::kScalar, nullptr},
};

const KernelImpl kMla[] = {
    {"mla_neon_bf16", Isa::kNeonBf16, [](Isa) -> const void* { return mla_kernels_neon_bf16(); }},
    {"mla_hwy", Isa::kNeon, [](Isa l) -> const void* { return mla_kernels_hwy(l); }},
    {"mla_amx", Isa::kAmx, [](Isa) -> const void* { return mla_kernels_amx(); }},
    {"mla_avx512bf16", Isa::kAvx512Bf16, [](Isa) -> const void* { return mla_kernels_avx512bf16(); }},
    {"mla_hwy", Isa::kAvx2, [](Isa l) -> const void* { return mla_kernels_hwy(l); }},
    {"mla_scalar", Isa::kScalar, [](Isa) -> const void* { return mla_kernels_scalar(); }},
};

// The backward's products run on the level's GEMM set (fp16 inputs: an fp32 one) and its element-wise
// steps on the widest vector code at or below the level. The AMX set takes 128 x 128 tiles (fewer
// accumulator loads and stores per product; the vector sets do not gain from them: see the lab notes).
template <const GemmKernelSet* (*Gemm)(), const GemmKernelSet* (*GemmF32)(), const MlaBwdTileOps* (*Ops)(),
          int kTileRows = 64, int kTileKeys = 64, bool kPairPanels = false>
const MlaBwdKernelSet* mla_bwd_set(const char* name) {
  static const MlaBwdKernelSet set = {name, Gemm(), GemmF32(), Ops(), kTileRows, kTileKeys, kPairPanels};
  return set.gemm && set.gemm_f32 && set.ops ? &set : nullptr;
}

const KernelImpl kMlaBwd[] = {
    {"mla_bwd_neon_bf16", Isa::kNeonBf16,
     [](Isa) -> const void* {
       return mla_bwd_set<gemm_kernels_neon_bf16, gemm_kernels_neon, mla_bwd_ops_neon>("mla_bwd_neon_bf16");
     }},
    {"mla_bwd_neon", Isa::kNeon,
     [](Isa) -> const void* {
       return mla_bwd_set<gemm_kernels_neon, gemm_kernels_neon, mla_bwd_ops_neon>("mla_bwd_neon");
     }},
    {"mla_bwd_amx", Isa::kAmx,
     [](Isa) -> const void* {
       return mla_bwd_set<gemm_kernels_amx, gemm_kernels_avx512, mla_bwd_ops_avx512, 128, 128, true>("mla_bwd_amx");
     }},
    {"mla_bwd_avx512bf16", Isa::kAvx512Bf16,
     [](Isa) -> const void* {
       return mla_bwd_set<gemm_kernels_avx512bf16, gemm_kernels_avx512, mla_bwd_ops_avx512, 64, 64, true>(
           "mla_bwd_avx512bf16");
     }},
    {"mla_bwd_avx512", Isa::kAvx512,
     [](Isa) -> const void* {
       return mla_bwd_set<gemm_kernels_avx512, gemm_kernels_avx512, mla_bwd_ops_avx512>("mla_bwd_avx512");
     }},
    {"mla_bwd_avx2", Isa::kAvx2,
     [](Isa) -> const void* {
       return mla_bwd_set<gemm_kernels_avx2, gemm_kernels_avx2, mla_bwd_ops_avx2>("mla_bwd_avx2");
     }},
    {"mla_bwd_scalar", Isa::kScalar,
     [](Isa) -> const void* {
       static const MlaBwdKernelSet set = {"mla_bwd_scalar", nullptr, nullptr, mla_bwd_ops_scalar(), 32, 64, false};
       return &set;
     }},
};

const KernelImpl kMqaLogits[] = {
    {"mqa_neon_bf16", Isa::kNeonBf16, [](Isa) -> const void* { return mqa_kernels_neon_bf16(); }},
    {"mqa_hwy", Isa::kNeon, [](Isa l) -> const void* { return mqa_kernels_hwy(l); }},
    {"mqa_amx", Isa::kAmx, [](Isa) -> const void* { return mqa_kernels_amx(); }},
    {"mqa_avx512bf16", Isa::kAvx512Bf16, [](Isa) -> const void* { return mqa_kernels_avx512bf16(); }},
    {"mqa_hwy", Isa::kAvx2, [](Isa l) -> const void* { return mqa_kernels_hwy(l); }},
    {"mqa_scalar", Isa::kScalar, [](Isa) -> const void* { return mqa_kernels_scalar(); }},
};

const KernelImpl kSelect[] = {
    {"select_hwy", Isa::kNeon, [](Isa l) -> const void* { return select_kernels_hwy(l); }},
    {"select_avx512", Isa::kAvx512, [](Isa) -> const void* { return select_kernels_avx512(); }},
    {"select_hwy", Isa::kAvx2, [](Isa l) -> const void* { return select_kernels_hwy(l); }},
    {"select_scalar", Isa::kScalar, [](Isa) -> const void* { return select_kernels_scalar(); }},
};

const KernelImpl kEp[] = {
    {"ep_hwy", Isa::kNeon, [](Isa l) -> const void* { return ep_kernels_hwy(l); }},
    {"ep_hwy", Isa::kAvx2, [](Isa l) -> const void* { return ep_kernels_hwy(l); }},
    {"ep_scalar", Isa::kScalar, [](Isa) -> const void* { return ep_kernels_scalar(); }},
};

const KernelImpl kTlGemv[] = {
    {"tl_gemv_hwy", Isa::kNeon, [](Isa l) -> const void* { return reinterpret_cast<const void*>(tl_gemv_hwy(l)); }},
    {"tl_gemv_avx512bf16", Isa::kAvx512Bf16,
     [](Isa) -> const void* { return reinterpret_cast<const void*>(tl_gemv_avx512bf16()); }},
    {"tl_gemv_hwy", Isa::kAvx2, [](Isa l) -> const void* { return reinterpret_cast<const void*>(tl_gemv_hwy(l)); }},
    {"tile_loops", Isa::kScalar, nullptr},
};

template <Isa kLevel>
const void* tl_flags(Isa) {
  return tl_vector_flags(kLevel);
}

const KernelImpl kTlVector[] = {
    {"sve_flags", Isa::kSve, tl_flags<Isa::kSve>},
    {"neon_bf16_flags", Isa::kNeonBf16, tl_flags<Isa::kNeonBf16>},
    {"neon_flags", Isa::kNeon, tl_flags<Isa::kNeon>},
    {"avx512bf16_flags", Isa::kAvx512Bf16, tl_flags<Isa::kAvx512Bf16>},
    {"avx512_flags", Isa::kAvx512, tl_flags<Isa::kAvx512>},
    {"avx2_flags", Isa::kAvx2, tl_flags<Isa::kAvx2>},
    {"scalar_loops", Isa::kScalar, tl_flags<Isa::kScalar>},
};

#define TESSERA_SLOT(name, list) \
  { name, list, int(sizeof(list) / sizeof(list[0])) }
const SlotInfo kSlots[int(Slot::kCount)] = {
    TESSERA_SLOT("gemm_packed", kGemmPacked), TESSERA_SLOT("gemm_finalize", kGemmFinalize),
    TESSERA_SLOT("gemv_bf16", kGemvBf16),     TESSERA_SLOT("gemv_fp8", kGemvFp8),
    TESSERA_SLOT("gemv_fp4", kGemvFp4),       TESSERA_SLOT("mla", kMla),
    TESSERA_SLOT("mla_bwd", kMlaBwd),         TESSERA_SLOT("mqa_logits", kMqaLogits),
    TESSERA_SLOT("select", kSelect),          TESSERA_SLOT("ep", kEp),
    TESSERA_SLOT("tl_gemv", kTlGemv),         TESSERA_SLOT("tl_vector", kTlVector),
};
#undef TESSERA_SLOT

}  // namespace

const SlotInfo& slot_info(Slot slot) {
  return kSlots[int(slot)];
}

bool verbose_dispatch() {
  static const bool on = env::flag("TESSERA_VERBOSE_DISPATCH");
  return on;
}

void note_dispatch(const char* caller, const char* impl, const char* reason) {
  if (verbose_dispatch())
    std::fprintf(stderr, "[tessera] %s: %s %s\n", caller ? caller : "?", impl, reason ? reason : "chosen");
}

KernelChoice choose_kernel_at(Slot slot, Isa level, const char* caller, const RefuseFn refuse, const void* problem) {
  const SlotInfo& s = slot_info(slot);
  for (int i = 0; i < s.count; ++i) {
    const KernelImpl& k = s.impls[i];
    if (!isa_includes(level, k.need)) {
      if (verbose_dispatch()) note_dispatch(caller, k.name, "refused: ISA not available (or capped by TESSERA_ISA)");
      continue;
    }
    const void* table = k.get ? k.get(level) : nullptr;
    if (k.get && !table) {
      note_dispatch(caller, k.name, "refused: not built");
      continue;
    }
    const char* why = refuse ? refuse(k, table, problem) : nullptr;
    note_dispatch(caller, k.name, why);
    if (!why) return {&k, table};
  }
  return {};  // only when the caller's refuse rejected the scalar entry too
}

KernelChoice choose_kernel(Slot slot, const char* caller, const RefuseFn refuse, const void* problem) {
  return choose_kernel_at(slot, active_isa(), caller, refuse, problem);
}

namespace {
const KernelImpl* planned_impl(Slot slot, Isa level) {
  const SlotInfo& s = slot_info(slot);
  for (int i = 0; i < s.count; ++i)
    if (isa_includes(level, s.impls[i].need)) return &s.impls[i];
  return nullptr;
}
}  // namespace

const void* cached_kernel(Slot slot, const char* caller) {
  struct Cached {
    std::atomic<const KernelImpl*> impl{nullptr};  // set last: the table below is valid once it is
    std::atomic<const void*> table{nullptr};       // may stay null (the component's portable code)
  };
  static Cached cache[int(Slot::kCount)][kIsaCount];
  const Isa level = active_isa();
  Cached& c = cache[int(slot)][int(level)];
  if (c.impl.load(std::memory_order_acquire)) return c.table.load(std::memory_order_relaxed);
  const KernelChoice k = choose_kernel_at(slot, level, caller);
  c.table.store(k.table, std::memory_order_relaxed);
  c.impl.store(k.impl, std::memory_order_release);
  return k.table;
}

const char* planned_kernel(Slot slot, Isa level) {
  const KernelImpl* k = planned_impl(slot, level);
  return k ? k->name : "-";
}

std::string kernel_matrix_text() {
  int count = 0;
  const Isa* host_levels = host_isa_levels(&count);
  std::vector<Isa> levels(host_levels, host_levels + count);  // this build's family, most specialised first
  std::reverse(levels.begin(), levels.end());
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-14s", "slot");
  out += line;
  for (Isa l : levels) {
    std::snprintf(line, sizeof line, " %-22s", isa_name(l));
    out += line;
  }
  out += "\n";
  for (int s = 0; s < int(Slot::kCount); ++s) {
    std::snprintf(line, sizeof line, "%-14s", kSlots[s].name);
    out += line;
    for (Isa l : levels) {
      const KernelImpl* k = planned_impl(Slot(s), l);
      // A portable implementation at a SIMD level is a slow path: marked so it shows at a glance.
      const bool slow = k && k->need == Isa::kScalar && l != Isa::kScalar;
      std::snprintf(line, sizeof line, " %-22s", (std::string(k ? k->name : "-") + (slow ? " *" : "")).c_str());
      out += line;
    }
    out += "\n";
  }
  out += "\n* portable scalar code at a SIMD level\n";
  return out;
}

}  // namespace tessera::cpu

namespace tessera {
std::string kernel_registry_matrix() {
  return cpu::kernel_matrix_text();
}
}  // namespace tessera
