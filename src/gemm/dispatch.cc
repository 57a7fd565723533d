// Chooses the implementation of a GemmProblem: an ordered list from most specialised to the reference;
// each refuses with a reason (printed with TESSERA_VERBOSE_DISPATCH=1). The reference never refuses.
#include <cstdio>
#include <cstdlib>

#include "gemm/gemm_problem.h"
#include "gemm/gemv.h"
#include "gemm/packed.h"
#include "tessera/core/cpu.h"

namespace tessera::gemm {
namespace {

bool verbose() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_VERBOSE_DISPATCH");
    return v && *v && *v != '0';
  }();
  return on;
}

void note(const GemmProblem& p, const char* impl, const char* reason) {
  if (verbose()) std::fprintf(stderr, "[tessera] %s: %s %s\n", p.fn, impl, reason ? reason : "chosen");
}

// Kernel-set accessors are only called once the ISA is known to be available (backends/cpu/README.md).
const char* packed_refusal(const GemmProblem& p, const cpu::GemmKernelSet* (*get)(), Isa need,
                           const cpu::GemmKernelSet** out) {
  if (int(active_isa()) < int(need)) return "refused: ISA not available (or capped by TESSERA_ISA)";
  const cpu::GemmKernelSet* ks = get();
  if (!ks) return "refused: not built";
  if (!ks->accepts(p.a.type) || !ks->accepts(p.b.type)) return "refused: operand dtype not supported";
  if (p.group > 0 && p.group % ks->k_align != 0) return "refused: scale group not a multiple of k_align";
  *out = ks;
  return nullptr;
}

}  // namespace

void run_gemm(const GemmProblem& p) {
  if (p.m == 0 || p.n == 0) return;

  if (int(active_isa()) >= int(Isa::kAvx512Bf16)) {
    const char* why = gemv_refusal(p);
    note(p, "gemv_avx512bf16", why);
    if (!why) return run_gemv(p, cpu::gemv_kernel_avx512bf16());
  }
  struct Candidate { const char* name; const cpu::GemmKernelSet* (*get)(); Isa need; };
  static constexpr Candidate kCandidates[] = {
      {"packed_avx512bf16", cpu::gemm_kernels_avx512bf16, Isa::kAvx512Bf16},
      {"packed_avx512", cpu::gemm_kernels_avx512, Isa::kAvx512},
      {"packed_avx2", cpu::gemm_kernels_avx2, Isa::kAvx2},
  };
  for (const Candidate& c : kCandidates) {
    const cpu::GemmKernelSet* ks = nullptr;
    const char* why = packed_refusal(p, c.get, c.need, &ks);
    note(p, c.name, why);
    if (!why) return run_packed(p, *ks);
  }
  note(p, "reference", nullptr);
  run_gemm_reference(p);
}

}  // namespace tessera::gemm
