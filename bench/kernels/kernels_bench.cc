#include "kernels/kernels_bench.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "python/python_module.h"

namespace tessera::bench {

const char* const kKernelsHelp = R"(usage: tessera bench kernels [--full] [--threads N] [--json]

tessera.tile_kernels' memory-bound kernels (tile-language kernels called through the Python package, as
DeepSeek's code calls TileKernels), in one Python process (python -m tessera.bench_kernels), on
DeepSeek-V3-like shapes (hidden 7168, top-8 of 256 experts; quick / --full):
  per_token_cast     bf16 [T, 7168] -> e4m3 codes + fp32 factors per 1 x 128        T = 1024 / 8192
  per_block_cast     the same with one factor per 128 x 128 block
  cast_back          e4m3 codes + per-token factors -> bf16
  expand_to_fused    bf16 [T, 7168] rows copied to the expert-major slots of get_fused_mapping (K = slots;
                     T = 256 / 2048 tokens, alignment 16 / 64)
  reduce_fused       the weighted sum of each token's 8 expert rows back to bf16 [T, 7168]
  transpose          bf16 [T, 7168] -> [7168, T]
  batched_transpose  e4m3 [8, T, 7168] -> [8, 7168, T] (T = 256 / 2048)
  engram_hash        the Engram embedding indices of 2 layers x 8 tables for 2- and 3-grams (int64
                     products, xor, modulo), 65536 / 1M tokens (M = tokens, N = layers, K = columns);
                     the engram package has no gather kernel of its own, the indices feed the lookup
  softmax_simt       float32 row softmax [512 / 4096, 8192] written per thread (T.get_thread_binding,
                     warp reductions, shared-memory partials); its peer is the same softmax in tile style
                     (T.reduce_max / T.reduce_sum over a row fragment): target within 1.5x
Method: every row's operands are copied until the copies together exceed 4x L3 (tessera info) and call i
uses copy i % copies, so each call reads DRAM. Our result and each peer's are checked first against a
float64 reference (casts: factors = block max / 448 within 2^-22, decoded codes within half an e4m3 step;
cast back, reduce: half a bf16 ulp plus accumulation; copies, transposes, hash: exact) on sampled rows.
Then ours (3 calls a round) and the peers (1 each) run round by round after a warm-up call, medians
reported; right after the row the DRAM copy bandwidth is measured in the same process. Every call
allocates its outputs, as the public functions (and numpy and torch) do; the Python process runs with
glibc's mmap off (MALLOC_MMAP_MAX_=0), so freed outputs are reused as under a caching allocator
(python -m tessera.bench_kernels --fresh-outputs: outputs past 32 MiB are fresh pages each call,
zero-filled on first touch, 1.5-3x the time of write-heavy rows here).
Columns:
  GB/s   = bytes read + written / time: casts 3 T H + factor bytes; cast_back the same; expand
           2 T H + 2 slots H + maps; reduce 2 T 8 H + 2 T H + weights + maps; transposes 2 x size;
           engram ids + indices written; softmax 2 x 4 M N
  %limit = GB/s / the DRAM copy GB/s (read + written) measured right after the row (target >= 70%)
  peer   = the same computation in plain numpy (xpeer = numpy time / ours, target >= 3x); for
           softmax_simt the tile-style kernel (xpeer = tile time / SIMT time, target >= 1/1.5)
  xtorch = the same in torch on the CPU with torch.set_num_threads(tessera's threads) (target >= 3x;
           n/a without torch)
Needs the interpreter next to this program with tessera (or $TESSERA_PYTHON); without it the suite is skipped.
)";

namespace {

constexpr double kCopyTarget = 70, kPeerTarget = 3, kSimtTarget = 1.5;

Row kernels_row(const std::string& op, long long m, long long n, long long k) {
  Row r;
  r.component = "kernels";
  r.op = op;
  r.m = m, r.n = n, r.k = k;
  r.peer2 = "torch";
  return r;
}

// "name=ms" tokens after the fixed fields: the first is the peer, the second the torch slot.
void read_peers(const char* rest, Row* r) {
  char name[64];
  double ms = NAN;
  int used = 0, index = 0;
  while (std::sscanf(rest, " %63[^=]=%lf%n", name, &ms, &used) == 2) {
    rest += used;
    if (index == 0) {
      r->peer = name;
      r->peer_time_ms = ms;
      r->peer_ratio = ms / r->time_ms;
    } else if (index == 1) {
      r->peer2 = name;
      r->openblas_time_ms = ms;
      r->openblas_ratio = ms / r->time_ms;
    }
    ++index;
  }
}

bool parse_line(const char* line, const MachineLimits& limits, Row* out) {
  char op[64];
  long long m = 0, n = 0, k = 0, moved = 0;
  double ms = NAN, copy_gbps = NAN, check = NAN;
  int used = 0;
  if (std::sscanf(line, "%63s %lld %lld %lld %lf %lld %lf %lf%n", op, &m, &n, &k, &ms, &moved, &copy_gbps, &check,
                  &used) != 8)
    return false;
  Row r = kernels_row(op, m, n, k);
  r.check_error = check;
  if (!(check <= 1) || !std::isfinite(ms)) {
    r.status = "wrong result: worst error " + std::to_string(check) + "x its tolerance";
    *out = r;
    return true;
  }
  r.time_ms = ms;
  r.gbps = double(moved) / ms * 1e-6;
  r.limit_name = "dram_copy_gbps";
  r.limit_value = copy_gbps;
  r.pct_of_limit = 100 * r.gbps / copy_gbps;
  r.pct_of_start_limit = limits.dram_copy_gbps > 0 ? 100 * r.gbps / limits.dram_copy_gbps : kNotAvailable;
  read_peers(line + used, &r);
  *out = r;
  return true;
}

bool is_simt(const Row& r) {
  return r.op == "softmax_simt";
}

const char* met(bool ok) {
  return ok ? "[met]" : "[not met]";
}

}  // namespace

std::vector<Row> run_kernels_bench(const Options& options, const MachineLimits& limits) {
  std::vector<Row> rows;
  const std::string module = std::string("tessera.bench_kernels") + (options.full ? " --full" : "");
  const PythonModuleRun run = run_python_module("[bench kernels]", module, options, [&](const char* line) {
    Row r;
    if (parse_line(line, limits, &r)) rows.push_back(r);
  });
  if (!run.started || (run.status != 0 && rows.empty())) {
    std::fprintf(stderr, "[bench kernels] skipped: %s %s (set TESSERA_PYTHON to an interpreter that has tessera)\n",
                 run.command.c_str(), run.started ? "failed" : "could not start");
    return rows;
  }
  if (run.status != 0) {
    Row r = kernels_row("bench_kernels", 0, 0, 0);
    r.status = "error: " + run.command + " exited with status " + std::to_string(run.status);
    rows.push_back(r);
  }
  return rows;
}

void print_kernels_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out,
               "\ntessera.tile_kernels memory-bound kernels (targets: >= %.0f%% of the DRAM copy, >= %.0fx "
               "numpy and torch):\n",
               kCopyTarget, kPeerTarget);
  int n = 0, copy_met = 0, numpy_met = 0, torch_met = 0, torch_rows = 0;
  for (const Row& r : rows) {
    if (is_simt(r) || !r.ok()) continue;
    ++n;
    const bool c = r.pct_of_limit >= kCopyTarget, np = r.peer_ratio >= kPeerTarget;
    const bool has_torch = std::isfinite(r.openblas_ratio), t = r.openblas_ratio >= kPeerTarget;
    copy_met += c, numpy_met += np, torch_met += t, torch_rows += has_torch;
    std::fprintf(out, "  %-18s %6s of copy %-9s  numpy %7s %-9s  torch %7s %s\n", r.op.c_str(),
                 format_pct(r.pct_of_limit).c_str(), met(c), format_ratio(r.peer_ratio).c_str(), met(np),
                 format_ratio(r.openblas_ratio).c_str(), has_torch ? met(t) : "[n/a]");
  }
  for (const Row& r : rows)
    if (!r.ok()) std::fprintf(out, "  %-18s %s [not met]\n", r.op.c_str(), r.status.c_str());
  if (n)
    std::fprintf(out, "  %d rows: %d at >= %.0f%% of the copy, %d at >= %.0fx numpy, %d of %d at >= %.0fx torch\n", n,
                 copy_met, kCopyTarget, numpy_met, kPeerTarget, torch_met, torch_rows, kPeerTarget);
  else
    std::fprintf(out, "  no rows (the Python module did not run) [n/a]\n");
  for (const Row& r : rows) {
    if (!is_simt(r) || !r.ok()) continue;
    const double slowdown = 1.0 / r.peer_ratio;  // SIMT time / tile time
    std::fprintf(out,
                 "SIMT softmax (per-thread, warp reductions) against tile style: %.2fx the tile time "
                 "(target <= %.1fx) %s\n",
                 slowdown, kSimtTarget, met(slowdown <= kSimtTarget));
  }
}

}  // namespace tessera::bench
