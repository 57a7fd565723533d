// The components `tessera bench` knows; a new component adds one entry here.
#include "attention/attention_bench.h"
#include "bench.h"
#include "ep/ep_bench.h"
#include "gemm/gemm_bench.h"
#include "gemm/grouped_bench.h"
#include "kernels/kernels_bench.h"
#include "model/model_bench.h"
#include "moe/moe_bench.h"
#include "python/python_bench.h"
#include "select/select_bench.h"
#include "tl/tl_bench.h"

namespace tessera::bench {
namespace {

constexpr const char* kGemmHelp = R"(usage: tessera bench gemm [--json] [--full] [--threads N]

Dense GEMMs D[M,N] = A[M,K] . B[N,K]^T with bf16 output:
  bf16_gemm_nt  bf16 A and B
  fp8_gemm_nt   e4m3 A with per-token (1,128) fp32 scales, e4m3 B with per-block (128,128) fp32 scales
Shapes: DeepGEMM's (N,K) list (2112,7168) (576,7168) (24576,1536) (32768,512) (7168,16384)
(4096,7168) (7168,2048) with M in {1, 4, 64, 128, 1024}. The quick default skips M=64 and cases whose
single call would take over 0.05 s at 800 GFLOP/s times the quick scale (tessera bench --help; at scale 1:
M=1024 with the three largest shapes); --full runs all.

Method: every result (ours and the peers') is verified first with a float64 random-vector check
(D.t against A.(B^T.t)); then a warm-up call and timed calls (at least 5, about 0.3 s); the median is
reported. Decode rows (M <= 4) rotate between copies of B that together exceed 4x L3 (unless one copy
already does), so they measure DRAM. Data is random normal (fp8: quantised like DeepGEMM's casts).

Columns:
  GFLOP/s = 2MNK / time;  GB/s = bytes of A, B (+ scales) and D / time
  %limit  = M <= 4: weight bytes (B and its scales) per second / DRAM read GB/s measured right after
            the row (tessera info's loop; the figure drifts on a shared machine)
            M >= 64: GFLOP/s / bf16_peak_gflops (all threads, the loop of `tessera info`) measured
            right after the row: on a shared host the AMX tile rate moved 2x-3.5x within minutes.
            The target lines also give the geometric mean over the limits measured at the start.
  peer    = oneDNN bf16 matmul (bf16_gemm_nt), or dequantise A and B to bf16 with their scales and
            then oneDNN bf16 matmul, both steps timed (fp8_gemm_nt)
  xpeer   = peer time / our time (> 1: we are faster); xOpenBLAS the same for cblas_sgemm on fp32
            copies of the operands
Peers are n/a when the build has no oneDNN / OpenBLAS (TESSERA_WITH_PEERS).

After the dense rows, bf16_ukr_<set> (set = amx or avx512bf16, the kernels the bf16 GEMM runs here):
the GEMM's micro-kernel alone over packed random panels held in each thread's L2 (M = a-block rows,
N = b-block columns, K = the set's K block, per thread), called in the driver's order with its fp32
workspace accumulating; checked against float64 first, then %limit as above. The summary's "kernel
alone" line divides the M >= 128 rows by it: what packing, conversions, writing D and the threads'
shares leave of the kernel's own rate.

Grouped (MoE) rows, after the dense ones (bench/gemm/grouped_cases.cc; DeepGEMM's MoE shapes scaled
down): op says dtype and layout - m_grouped_{bf16,fp8}_contiguous (per-row group ids), ..._psum (psum
ends, uneven groups of 0.7-1.3x, alignment 128, zero padding), m_grouped_{bf16,fp8}_masked (groups of
about 20 rows), m_grouped_fp8_fp4_masked (FP8 x FP4 weights, 1 and 4 rows per group: decode).
  quick: 4 x 256 and 8 x 128 rows (N,K 4096x2048 / 4096x4096), 8 groups masked, 8 groups decode;
  --full adds 4 x 1024 (7168x3072), 8 x 512 psum (6144x2048), 6 x 192 masked, 8 x 64 FP8 x FP4.
  M       = rows multiplied (sum over groups); GFLOP/s = 2MNK / time
  %limit  = decode: FP4 weight bytes (packed) per second / DRAM read GB/s measured right after the
            row; else GFLOP/s / bf16 peak measured right after the row
  peer    = tessera's dense GEMM doing the same work in the same run: one GEMM over all M rows
            (contiguous layouts; timed call i uses group i % G's weights, so they come from DRAM as
            the grouped call's do) or one GEMM per group (masked: each group has its own weights);
            xpeer = dense time / grouped time (target >= 0.90)
Both outputs are verified first (float64 random-vector check per group; padding rows must be zero).
)";

constexpr const char* kTlHelp = R"(usage: tessera bench tl [--json] [--full] [--threads N]

Tile-language kernels, written with the C++ builder API (bench/tl/tl_kernels.cc; the same kernels as
examples/tl/*.py) and compiled by the tl JIT for this machine:
  compile_cold / compile_hit  the GEMM kernel compiled into an empty cache, then loaded from the cache
  gemm_bf16_nt      C = A . B^T, bf16, M = N = K in {512, 1024, 2048} (+4096 with --full), 512x128 tiles, K steps of 512
  add_relu_bf16     C = relu(A + B), bf16 8192 x 8192
  gemv_fp8          y = (W * scale) . x, fp8 e4m3 weights 16384 x 8192 with per-128 scales, bf16 x (T.gemm, 1 row)
  gemv_fp8_tiled    the same GEMV over weights stored tile by tile [N/64, K/128, 64, 128] (one contiguous 8 KiB tile per T.gemm)
  flash_fwd         FlashAttention forward, seq 2048, 8 heads, dim 128, bf16, 256x128 tiles (+causal with --full)
Every result is checked first (GEMM: against tessera's library GEMM within one bf16 ulp; the others
against float64 on samples); then a warm-up and timed calls; the median is reported.

Columns: GFLOP/s (GEMM, attention) or GB/s (add: bytes of A, B and C; GEMV: weight bytes);
%limit = of bf16_peak_gflops, or of the DRAM copy (add) or read (GEMV) bandwidth, each measured right
after the row;
peer = tessera's library bf16_gemm_nt on the same operands (xpeer = library time / tl time); for add
and GEMV the peer is the memory itself, measured in this run: a parallel memcpy (add) or a parallel
read-only sum (GEMV weights), xpeer = our GB/s / its GB/s (so a shared machine shows in both); for
flash_fwd at the amx level the peer is the same program compiled and run at the avx512bf16 level
(xpeer = its time / ours; target 3x); at the vector levels its target is a share of the level's peak.
)";

const std::vector<Component> kComponents = {
    {"gemm", "dense bf16 and fp8 GEMMs vs oneDNN and OpenBLAS; grouped (MoE) GEMMs vs dense", kGemmHelp,
     run_gemm_and_grouped_bench, print_gemm_and_grouped_summary},
    {"select", "DeepSelect top-k (sampler, indexer) vs nth_element+sort", kSelectHelp, run_select_bench,
     print_select_summary},
    {"attention", "FlashMLA decode and prefill vs dequant+oneDNN; FMHA backward (2.5x fwd flops)", kAttentionHelp,
     run_attention_bench, print_attention_summary},
    {"ep", "expert-parallel dispatch/combine between mpirun ranks vs MPI_Alltoallv", kEpHelp, run_ep_bench,
     print_ep_summary},
    {"moe", "DeepGEMM's Mega MoE (fused, one rank) vs the unfused grouped-GEMM sequence", kMoeHelp, run_moe_bench,
     print_moe_summary},
    {"tl", "tile-language kernels (GEMM, elementwise, dequant GEMV, FlashAttention) and compile times", kTlHelp,
     run_tl_bench, print_tl_summary},
    {"model", "a DeepSeek-V3.2 slice's decode steps vs their roofline (61 layers extrapolated); tiny model vs torch",
     kModelHelp, run_model_bench, print_model_summary},
    {"kernels", "tessera.tile_kernels memory-bound kernels vs numpy and torch; SIMT vs tile-style tl softmax",
     kKernelsHelp, run_kernels_bench, print_kernels_summary},
    {"python", "the Python modules with torch tensors vs the same calls at the native entry", kPythonHelp,
     run_python_bench, print_python_summary},
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
