// Chooses the implementation of a GemmProblem: an ordered list from most specialised to the reference;
// each refuses with a reason (printed with TESSERA_VERBOSE_DISPATCH=1). The reference never refuses.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

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


// The packed kernel set for p, or nullptr (reference).
const cpu::GemmKernelSet* choose_packed(const GemmProblem& p) {
  struct Candidate {
    const char* name;
    const cpu::GemmKernelSet* (*get)();
    Isa need;
  };
  static constexpr Candidate kCandidates[] = {
      {"packed_amx", cpu::gemm_kernels_amx, Isa::kAmx},
      {"packed_avx512bf16", cpu::gemm_kernels_avx512bf16, Isa::kAvx512Bf16},
      {"packed_avx512", cpu::gemm_kernels_avx512, Isa::kAvx512},
      {"packed_avx2", cpu::gemm_kernels_avx2, Isa::kAvx2},
  };
  for (const Candidate& c : kCandidates) {
    const cpu::GemmKernelSet* ks = nullptr;
    const char* why = packed_refusal(p, c.get, c.need, &ks);
    note(p, c.name, why);
    if (!why) return ks;
  }
  note(p, "reference", nullptr);
  return nullptr;
}

bool gemv_applies(const GemmProblem& p) {
  if (int(active_isa()) < int(Isa::kAvx512Bf16)) return false;
  const char* why = gemv_refusal(p);
  note(p, "gemv_avx512bf16", why);
  return why == nullptr;
}

bool gemv_fp4_applies(const GemmProblem& p) {
  if (int(active_isa()) < int(Isa::kAvx512Bf16)) return false;
  const char* why = gemv_fp4_refusal(p);
  note(p, "gemv_fp4_avx512bf16", why);
  return why == nullptr;
}

// Decode rows on AMX tiles (gemv_amx.cc, gemv_amx_e4m3.cc) where they beat the vector GEMV with the
// weights streamed from DRAM, as a decode step streams them, measured on an AMX Xeon (2 threads, GB/s of
// weights, medians of 30 calls alternating in one process over 1.5 GB of rotated weight copies,
// 2026-12-01, tiles vs vector): bf16 from M = 5 (M=5 N=4096 K=7168 13.1 vs 11.9, M=6 12.4 vs 7.8 and
// N=7168 K=2048 11.3 vs 10.7, M=8 15.0 vs 12.4). At M <= 4 the vector GEMV's sequential row streams
// beat the tiles' 48 rows read side by side: M=4 N=4096 K=7168 12.4 vs 16.8, N=32768 K=512 7.2 vs 9.5,
// N=24576 K=1536 10.1 vs 14.7, N=7168 K=2048 13.6 vs 17.4; M=3 N=24576 K=1536 10.3 vs 18.8; M=2
// N=4096 K=7168 12.4 vs 17.8 (with L3-resident weights the tiles had won from M = 2: M=4 1.20 vs
// 1.44 ms). M = 1 never (one weight row per output row, nothing for a tile to share). e4m3 from M = 4
// (N=4096 K=7168 1.30-1.42 vs 1.61-1.83 ms, N=7168 K=2048 0.82-0.86 vs 0.91-1.19): its kernel stages
// each row's 512-value pieces in turn and prefetches them. e4m3 M = 2 and 3 read two rows at a time on
// the vector GEMV at about the tiles' speed (N=4096 K=7168 M=3 1.57-1.62 vs 1.32-1.63) or faster
// (N=7168 K=2048 M=3 0.85-0.86 vs 0.93-0.97). Depends only on the problem, so the bits do not depend
// on the thread count. TESSERA_GEMV_NO_AMX=1 keeps every row on the vector GEMV.
bool gemv_no_amx() {
  static const bool off = [] {
    const char* v = std::getenv("TESSERA_GEMV_NO_AMX");
    return v && *v && *v != '0';
  }();
  return off;
}

bool gemv_on_tiles(const GemmProblem& p) {
  if (gemv_no_amx() || int(active_isa()) < int(Isa::kAmx)) return false;
  const bool tiles = p.m >= (p.b.type == cpu::GemmSrcType::kBF16 ? 5 : 4);
  note(p, "gemv_amx", tiles ? nullptr : "refused: the vector GEMV is as fast or faster at this M and weight type");
  return tiles;
}

// FP4-weight decode rows on AMX tiles (gemv_amx_fp4.cc) from M = 4. Measured on the AMX Xeon in a slow
// phase of the host (tile rate 1.0 TFLOP/s per core), 2 threads, weights from DRAM (1.5 GB of rotated
// copies), the two kernels alternating call by call, medians of 20-30, ms, tiles vs vector, N=4096
// K=2048: M=3 0.73-0.96 vs 0.62-0.69, M=5 0.97-1.09 vs 1.05, M=6 0.58-0.98 vs 1.10-1.23, M=8 0.91-0.97
// vs 1.51-1.62; K=7168 M=5 3.67 vs 3.93, M=8 3.37 vs 5.76. M=4 took 0.89-1.02 vs 0.78-0.80 until the
// activations went into the tiles by register transposes instead of scatters, then 0.53-0.87 vs
// 0.75-0.87 at K=2048 (5 pairs, tiles/vector 0.71-1.00) and 2.45-3.20 vs 2.77-2.93 at K=7168 (0.88,
// 1.10, 0.89). The tile kernel's time moves with the host's tile rate; the vector kernel's grows with
// M (its vdpbf16ps count does), the tiles' does not; M = 1 stays on the vector kernel by 2x
// (conversion, which both do, is most of the work there). TESSERA_GEMV_NO_AMX=1 keeps every FP4 row
// on the vector kernel.
constexpr int64_t kFp4TileMinM = 4;

bool gemv_fp4_on_tiles(const GemmProblem& p) {
  if (gemv_no_amx() || int(active_isa()) < int(Isa::kAmx)) return false;
  const bool tiles = p.m >= kFp4TileMinM;
  note(p, "gemv_fp4_amx", tiles ? nullptr : "refused: the vector FP4 GEMV is as fast or faster at this M");
  return tiles;
}

// A call whose D (all problems of the batch: an MoE GEMM's groups share one output) is at least this
// large writes it with non-temporal stores: it would not stay cached for its consumer anyway, and each
// line's read for ownership slowed its GEMM (bf16, 2 threads, cached -> non-temporal, GFLOP/s: M=1024
// N=32768 K=512 829 -> 888, M=1024 N=7168 K=2048 911 -> 978, M=128 N=32768 K=512 838 -> 920, N=24576
// K=1536 909 -> 936). Smaller D (the next layer's input, in L2/L3) keeps cached stores.
// TESSERA_GEMM_STREAM_BYTES overrides the size (0 = never).
int64_t stream_d_bytes() {
  static const int64_t bytes = [] {
    const char* v = std::getenv("TESSERA_GEMM_STREAM_BYTES");
    if (!v || !*v) return int64_t(4) << 20;
    const int64_t n = std::atoll(v);
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

void run_gemm(const GemmProblem& p) { run_gemm_batch(&p, 1); }

void run_gemm_batch(const GemmProblem* problems, int64_t count) {
  // Decode-shaped problems go to the streaming GEMV, the rest to the packed driver, each as one batch
  // per kernel set (problems of one call share dtypes, so this is almost always one batch each).
  std::vector<GemmProblem> gemv, gemv_fp4, packed, reference;
  const cpu::GemmKernelSet* packed_set = nullptr;
  const bool stream = stream_d(problems, count);
  for (int64_t i = 0; i < count; ++i) {
    GemmProblem p = problems[i];
    p.stream_d = stream;
    if (p.m == 0 || p.n == 0) continue;
    if (gemv_applies(p)) {
      gemv.push_back(p);
      continue;
    }
    if (gemv_fp4_applies(p)) {
      gemv_fp4.push_back(p);
      continue;
    }
    const cpu::GemmKernelSet* ks = choose_packed(p);
    if (!ks) {
      reference.push_back(p);
    } else if (!packed_set || ks == packed_set) {
      packed_set = ks;
      packed.push_back(p);
    } else {
      run_packed(p, *ks);
    }
  }
  if (!gemv.empty()) {
    std::vector<GemmProblem> vector_rows, tile_rows;
    for (const GemmProblem& p : gemv) (gemv_on_tiles(p) ? tile_rows : vector_rows).push_back(p);
    if (!vector_rows.empty())
      run_gemv_batch(vector_rows.data(), int64_t(vector_rows.size()), cpu::gemv_kernel_avx512bf16());
    if (!tile_rows.empty()) run_gemv_batch(tile_rows.data(), int64_t(tile_rows.size()), cpu::gemv_kernel_amx());
  }
  if (!gemv_fp4.empty()) {
    // Problems whose weight-scale exponents are outside a kernel's range go to the next one: tiles
    // (64..190), the vector FP4 GEMV (1..254), the packed driver.
    std::vector<GemmProblem> vector_rows, tile_rows;
    for (const GemmProblem& p : gemv_fp4) (gemv_fp4_on_tiles(p) ? tile_rows : vector_rows).push_back(p);
    if (!tile_rows.empty())
      for (const GemmProblem& p :
           run_gemv_fp4_batch(tile_rows.data(), int64_t(tile_rows.size()), cpu::gemv_fp4_kernel_amx())) {
        note(p, "gemv_fp4_avx512bf16", "chosen (scale exponents outside the FP4 tile GEMV's range 64..190)");
        vector_rows.push_back(p);
      }
    for (const GemmProblem& p : run_gemv_fp4_batch(vector_rows.data(), int64_t(vector_rows.size()),
                                                   cpu::gemv_fp4_kernel_avx512bf16())) {
      note(p, "packed_avx512bf16", "chosen (scale exponents outside the FP4 GEMV's range 1..254)");
      run_packed(p, *cpu::gemm_kernels_avx512bf16());
    }
  }
  if (!packed.empty()) run_packed_batch(packed.data(), int64_t(packed.size()), *packed_set);
  for (const GemmProblem& p : reference) run_gemm_reference(p);
}

}  // namespace tessera::gemm
