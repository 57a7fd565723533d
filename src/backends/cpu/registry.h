// The kernel registry: for every kernel slot, its implementations from the most specialised ISA level
// down to the scalar one. Components ask it which implementation a level gets; none keeps its own ladder
// of active_isa() checks. TESSERA_VERBOSE_DISPATCH=1 prints each choice and every refusal with its
// reason; `tessera info --kernels` prints the whole slot x level matrix.
//
// Not for ISA files (it includes interface headers of every slot and uses the standard library).
#pragma once

#include <string>

#include "tessera/core/cpu.h"

namespace tessera::cpu {

enum class Slot : int {
  kGemmPacked,    // GemmKernelSet: packing and register-blocked micro-kernel (gemm_kernel_set.h)
  kGemmFinalize,  // fp32 workspace -> D conversion and store
  kGemvBf16,      // decode rows (small M), bf16 weights
  kGemvFp8,       // decode rows, e4m3 weights
  kGemvFp4,       // decode rows, e2m1 weights
  kMla,           // MlaKernelSet: FlashMLA scores, softmax, PV, FP8 KV dequantisation (mla_kernel_set.h)
  kMlaBwd,        // MlaBwdKernelSet: dense MHA prefill backward products and steps (mla_bwd_kernel_set.h)
  kMqaLogits,     // MQA logits rows and e4m3 -> bf16 conversion (mqa_logits_kernels.h)
  kSelect,        // top-k streaming filters, compaction and bf16 passes (select_kernels.h)
  kEp,            // ep copy, reductions and FP8 cast (ep_kernels.h)
  kTlGemv,        // tile language: T.gemm with few rows (tl_gemv.h)
  kTlVector,      // tile language: generated vector code (the compiler flags of the level)
  kCount
};

// One implementation of a slot.
struct KernelImpl {
  const char* name;  // e.g. "mla_avx512bf16", "mla_hwy"
  Isa need;          // the lowest level it runs at (levels of its family, or any when kScalar: isa_includes)
  // The kernel table for `level` (>= need), or nullptr when it was not built. Called only when `level`
  // is available on this CPU (an accessor in an ISA file may execute that level's instructions).
  const void* (*get)(Isa level);
};

struct SlotInfo {
  const char* name;
  const KernelImpl* impls;  // most specialised first; the last one needs kScalar and never refuses
  int count;
};

const SlotInfo& slot_info(Slot slot);

// Refusal of a built implementation for one problem: a reason ("d_qk not a multiple of 32"), or nullptr
// to accept. `problem` is the caller's, passed through.
using RefuseFn = const char* (*)(const KernelImpl& impl, const void* table, const void* problem);

struct KernelChoice {
  const KernelImpl* impl = nullptr;
  const void* table = nullptr;
};

// The first implementation of `slot` whose level is <= `level`, that is built and that `refuse` (when
// given) accepts. `caller` names the operation in TESSERA_VERBOSE_DISPATCH lines. `level` must be
// available on this CPU (default: active_isa()).
KernelChoice choose_kernel(Slot slot, const char* caller, const RefuseFn refuse = nullptr,
                           const void* problem = nullptr);
KernelChoice choose_kernel_at(Slot slot, Isa level, const char* caller, const RefuseFn refuse = nullptr,
                              const void* problem = nullptr);

// The table choose_kernel() gives `slot` at the active level when nothing refuses, chosen once per
// level and kept (for hot paths that ask per token or per tile; the level can change at run time).
const void* cached_kernel(Slot slot, const char* caller);

template <class Table>
const Table& kernels_for(Slot slot, const char* caller) {
  return *static_cast<const Table*>(choose_kernel(slot, caller).table);
}

// What `level` gets for `slot` when no problem refuses it: the implementation name, without calling any
// accessor (safe for levels this CPU lacks). For `tessera info --kernels`.
const char* planned_kernel(Slot slot, Isa level);

// True when TESSERA_VERBOSE_DISPATCH is set (components print their own extra choices with it).
bool verbose_dispatch();
// Prints "[tessera] caller: impl reason-or-chosen" when verbose_dispatch().
void note_dispatch(const char* caller, const char* impl, const char* reason);

// The matrix slot x level for `tessera info --kernels`, one line per slot.
std::string kernel_matrix_text();

}  // namespace tessera::cpu
