// Chooses the implementation of a GemmProblem: an ordered list from most specialised to the reference;
// each refuses with a reason (printed with TESSERA_VERBOSE_DISPATCH=1). The reference never refuses.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cpu/registry.h"
#include "core/env.h"
#include "gemm/fp4_widen.h"
#include "gemm/gemm_problem.h"
#include "gemm/gemv.h"
#include "gemm/packed.h"
#include "tessera/core/cpu.h"

namespace tessera::gemm {
namespace {

// The registry's refusal of a packed kernel set (slot kGemmPacked) for a GemmProblem.
const char* packed_refusal(const cpu::KernelImpl&, const void* table, const void* problem) {
  const auto* ks = static_cast<const cpu::GemmKernelSet*>(table);
  const auto& p = *static_cast<const GemmProblem*>(problem);
  if (!ks) return nullptr;  // the reference
  if (!ks->accepts(p.a.type) || !ks->accepts(p.b.type)) return "refused: operand dtype not supported";
  if (p.group > 0 && p.group % ks->k_align != 0) return "refused: scale group not a multiple of k_align";
  if (p.k_chain && !ks->k_order_chain) return "refused: the problem asks for one fp32 chain per output in k order";
  return nullptr;
}

// The packed kernel set for p, or nullptr (reference).
const cpu::GemmKernelSet* choose_packed(const GemmProblem& p) {
  return static_cast<const cpu::GemmKernelSet*>(
      cpu::choose_kernel(cpu::Slot::kGemmPacked, p.fn, packed_refusal, &p).table);
}

// Decode rows on AMX tiles (gemv_amx.cc, gemv_amx_e4m3.cc) where they beat the vector GEMV with the
// weights streamed from DRAM, as a decode step streams them: bf16 from M = 5, and from M = 4 where rows
// are at most 512 bytes (K <= 256: the tiles' 48 rows are then one sequential 24 KiB run; the absorbed
// MLA einsum's 128-value rows at M = 4, one thread, weights from L3 / DRAM: 27 / 32 us vector, 18 / 18
// us tiles; K = 256 1.3-1.6x; M = 2 a tie or a loss). With longer rows at M <= 4 the vector GEMV's
// sequential row streams beat the tiles' 48 rows read side by side. M = 1 never (one weight row per
// output row, nothing for a tile to share). e4m3 from M = 4: its kernel stages each row's 512-value
// pieces in turn and prefetches them. e4m3 M = 2 and 3 read two rows at a time on the vector GEMV at
// about the tiles' speed or faster. Depends only on the problem, so the bits do not depend on the
// thread count. TESSERA_GEMV_NO_AMX=1 keeps every row on the vector GEMV.
constexpr int64_t kAmxShortRowK = 256;

bool gemv_no_amx() {
  static const bool off = env::flag("TESSERA_GEMV_NO_AMX");
  return off;
}

// FP4-weight decode rows on AMX tiles (gemv_amx_fp4.cc) from M = 4, where the tiles (activations
// loaded by register transposes) match or beat the vector kernel with weights from DRAM; below it they
// lose. The tile kernel's time moves with the host's tile rate; the vector kernel's grows with
// M (its vdpbf16ps count does), the tiles' does not; M = 1 stays on the vector kernel by 2x
// (conversion, which both do, is most of the work there). TESSERA_GEMV_NO_AMX=1 keeps every FP4 row
// on the vector kernel.
constexpr int64_t kFp4TileMinM = 4;

// The registry's refusal of a decode GEMV (slots kGemvBf16, kGemvFp8) for a GemmProblem; the table-less
// last entry is the packed driver, which takes every problem.
const char* gemv_problem_refusal(const cpu::KernelImpl& impl, const void* table, const void* problem) {
  const auto& p = *static_cast<const GemmProblem*>(problem);
  if (!table) return nullptr;
  if (const char* why = gemv_refusal(p)) return why;
  if (impl.need == Isa::kAmx) {
    if (gemv_no_amx()) return "refused: TESSERA_GEMV_NO_AMX";
    const int64_t bf16_min_m = p.k <= kAmxShortRowK ? 4 : 5;
    if (p.m < (p.b.type == cpu::GemmSrcType::kBF16 ? bf16_min_m : 4))
      return "refused: the vector GEMV is as fast or faster at this M and weight type";
  }
  return nullptr;
}

// An FP4 problem, and the implementation that already failed on its scale exponents (nullptr: none).
struct Fp4Problem {
  const GemmProblem* p;
  const cpu::KernelImpl* failed;
};

const char* gemv_fp4_problem_refusal(const cpu::KernelImpl& impl, const void* table, const void* problem) {
  const auto& f = *static_cast<const Fp4Problem*>(problem);
  if (!table) return nullptr;
  if (const char* why = gemv_fp4_refusal(*f.p)) return why;
  // The slot lists implementations from the narrowest exponent range (tiles) to the widest.
  if (f.failed && &impl <= f.failed) return "refused: scale exponents outside its range";
  if (impl.need == Isa::kAmx) {
    if (gemv_no_amx()) return "refused: TESSERA_GEMV_NO_AMX";
    if (f.p->m < kFp4TileMinM) return "refused: the vector FP4 GEMV is as fast or faster at this M";
  }
  return nullptr;
}

// Problems that share one kernel, run as one batch.
template <class Fn>
struct KernelBatch {
  const cpu::KernelImpl* impl;
  Fn fn;
  std::vector<GemmProblem> problems;
};

// Adds p to the batch of c's kernel among batches [first, end), or to a new one at the end.
template <class Fn>
void add_to_batch(std::vector<KernelBatch<Fn>>& batches, const cpu::KernelChoice& c, const GemmProblem& p,
                  size_t first = 0) {
  for (size_t i = first; i < batches.size(); ++i)
    if (batches[i].impl == c.impl) return batches[i].problems.push_back(p);
  batches.push_back({c.impl, reinterpret_cast<Fn>(c.table), {p}});
}

// A call whose D (all problems of the batch: an MoE GEMM's groups share one output) is at least this
// large writes it with non-temporal stores: it would not stay cached for its consumer anyway, and each
// line's read for ownership slowed its GEMM (bf16, 2 threads, cached -> non-temporal, GFLOP/s: M=1024
// N=32768 K=512 829 -> 888, M=1024 N=7168 K=2048 911 -> 978, M=128 N=32768 K=512 838 -> 920, N=24576
// K=1536 909 -> 936). Smaller D (the next layer's input, in L2/L3) keeps cached stores.
// TESSERA_GEMM_STREAM_BYTES overrides the size (0 = never).
int64_t stream_d_bytes() {
  static const int64_t bytes = [] {
    const int64_t n = env::integer("TESSERA_GEMM_STREAM_BYTES", int64_t(4) << 20, 0);
    return n > 0 ? n : INT64_MAX;
  }();
  return bytes;
}

bool stream_d(const GemmProblem* problems, int64_t count) {
  int64_t bytes = 0;
  for (int64_t i = 0; i < count; ++i) bytes += problems[i].m * problems[i].n * dtype_storage_bytes(problems[i].d_type);
  return bytes >= stream_d_bytes();
}

}  // namespace

void run_gemm(const GemmProblem& p) {
  run_gemm_batch(&p, 1);
}

void run_gemm_batch(const GemmProblem* problems, int64_t count) {
  // Decode-shaped problems go to a streaming GEMV, the rest to the packed driver, each as one batch per
  // kernel (problems of one call share dtypes, so this is almost always one batch each).
  std::vector<KernelBatch<cpu::GemvFn>> gemv;
  std::vector<KernelBatch<cpu::GemvFp4Fn>> gemv_fp4;
  std::vector<GemmProblem> packed, reference;
  std::vector<std::vector<uint8_t>> widened;  // e4m3 copies of FP4 operands, alive until the end
  const cpu::GemmKernelSet* packed_set = nullptr;
  auto to_packed = [&](const GemmProblem& given) {
    GemmProblem p = given;
    const cpu::GemmKernelSet* ks = choose_packed(p);
    if (!ks && (p.a.type == cpu::GemmSrcType::kE2M1 || p.b.type == cpu::GemmSrcType::kE2M1)) {
      // No packed set takes FP4 here (AVX2): its exact e4m3 copy keeps the problem off the reference.
      GemmProblem w = widen_fp4_operands(p, &widened);
      if ((ks = choose_packed(w))) p = w;
    }
    if (!ks) {
      reference.push_back(p);
    } else if (!packed_set || ks == packed_set) {
      packed_set = ks;
      packed.push_back(p);
    } else {
      run_packed(p, *ks);
    }
  };
  const bool stream = stream_d(problems, count);
  for (int64_t i = 0; i < count; ++i) {
    GemmProblem p = problems[i];
    p.stream_d = stream;
    if (p.m == 0 || p.n == 0) continue;
    if (p.k_chain) {  // the GEMVs sum along K in lanes
      to_packed(p);
      continue;
    }
    if (p.b.type == cpu::GemmSrcType::kE2M1) {
      const Fp4Problem f{&p, nullptr};
      const cpu::KernelChoice c = cpu::choose_kernel(cpu::Slot::kGemvFp4, p.fn, gemv_fp4_problem_refusal, &f);
      if (c.table) {
        add_to_batch(gemv_fp4, c, p);
        continue;
      }
    } else {
      const cpu::Slot slot = p.b.type == cpu::GemmSrcType::kBF16 ? cpu::Slot::kGemvBf16 : cpu::Slot::kGemvFp8;
      const cpu::KernelChoice c = cpu::choose_kernel(slot, p.fn, gemv_problem_refusal, &p);
      if (c.table) {
        add_to_batch(gemv, c, p);
        continue;
      }
    }
    to_packed(p);
  }
  for (const KernelBatch<cpu::GemvFn>& b : gemv) run_gemv_batch(b.problems.data(), int64_t(b.problems.size()), b.fn);
  // FP4 problems whose weight-scale exponents are outside a kernel's range go to the next one that takes
  // them (tiles 64..190, vector GEMVs 1..254), else to the packed driver.
  for (size_t i = 0; i < gemv_fp4.size(); ++i) {
    const KernelBatch<cpu::GemvFp4Fn> b = gemv_fp4[i];  // a copy: the loop may append batches
    for (const GemmProblem& p : run_gemv_fp4_batch(b.problems.data(), int64_t(b.problems.size()), b.fn)) {
      const Fp4Problem f{&p, b.impl};
      const cpu::KernelChoice c = cpu::choose_kernel(cpu::Slot::kGemvFp4, p.fn, gemv_fp4_problem_refusal, &f);
      if (c.table) {
        add_to_batch(gemv_fp4, c, p, i + 1);  // batches up to i have run
      } else {
        to_packed(p);
      }
    }
  }
  if (!packed.empty()) run_packed_batch(packed.data(), int64_t(packed.size()), *packed_set);
  for (const GemmProblem& p : reference) run_gemm_reference(p);
}

}  // namespace tessera::gemm
