// The components `tessera bench` knows; a new component adds one entry here.
#include "bench.h"
#include "gemm/gemm_bench.h"

namespace tessera::bench {
namespace {

constexpr const char* kGemmHelp = R"(usage: tessera bench gemm [--json] [--full] [--threads N]

Dense GEMMs D[M,N] = A[M,K] . B[N,K]^T with bf16 output:
  bf16_gemm_nt  bf16 A and B
  fp8_gemm_nt   e4m3 A with per-token (1,128) fp32 scales, e4m3 B with per-block (128,128) fp32 scales
Shapes: DeepGEMM's (N,K) list (2112,7168) (576,7168) (24576,1536) (32768,512) (7168,16384)
(4096,7168) (7168,2048) with M in {1, 4, 64, 128, 1024}. The quick default skips cases whose single
call would take over 0.05 s at 800 GFLOP/s (M=1024 with the three largest shapes); --full runs all.

Method: every result (ours and the peers') is verified first with a float64 random-vector check
(D.t against A.(B^T.t)); then a warm-up call and timed calls (at least 5, about 0.3 s); the median is
reported. Decode rows (M <= 4) rotate between copies of B that together exceed 4x L3 (unless one copy
already does), so they measure DRAM. Data is random normal (fp8: quantised like DeepGEMM's casts).

Columns:
  GFLOP/s = 2MNK / time;  GB/s = bytes of A, B (+ scales) and D / time
  %limit  = M <= 4: weight bytes (B and its scales) per second / dram_read_gbps
            M >= 64: GFLOP/s / bf16_peak_gflops (all threads; see `tessera info`)
  peer    = oneDNN bf16 matmul (bf16_gemm_nt), or dequantise A and B to bf16 with their scales and
            then oneDNN bf16 matmul, both steps timed (fp8_gemm_nt)
  xpeer   = peer time / our time (> 1: we are faster); xOpenBLAS the same for cblas_sgemm on fp32
            copies of the operands
Peers are n/a when the build has no oneDNN / OpenBLAS (TESSERA_WITH_PEERS).
)";

const std::vector<Component> kComponents = {
    {"gemm", "dense bf16 and fp8 GEMMs vs oneDNN and OpenBLAS", kGemmHelp, run_gemm_bench, print_gemm_summary},
};

}  // namespace

const std::vector<Component>& components() {
  return kComponents;
}

const Component* find_component(const std::string& name) {
  for (const Component& c : kComponents)
    if (name == c.name) return &c;
  return nullptr;
}

}  // namespace tessera::bench
