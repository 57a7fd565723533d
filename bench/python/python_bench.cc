#include "python/python_bench.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "python/python_module.h"

namespace tessera::bench {
namespace {

Row python_row(const std::string& op, int64_t m = 0, int64_t n = 0, int64_t k = 0) {
  Row r;
  r.component = "python";
  r.op = op;
  r.m = m, r.n = n, r.k = k;
  return r;
}

}  // namespace

const char* const kPythonHelp = R"(usage: tessera bench python [--threads N]

The Python path against the native entry, in one Python process (python -m tessera.bench_python):
each case runs the public call with torch tensors (tessera.deep_gemm, tessera.flash_mla) and the
tessera._C entry that call reaches with its array references made once (what a C++ caller pays, plus
one binding call), interleaved round by round; medians.
  bf16_gemm_nt          M in {4, 128}, N 4096, K 7168
  fp8_gemm_nt           M 128, N 4096, K 7168, (1, 128, 128) scales
  flash_mla_sparse_fwd  64 queries x 64 heads, topk 2048 of 8192 tokens, d_qk 576
Columns: time_ms = the Python path; peer = the native entry; xpeer = native time / Python time
(target >= 0.83, i.e. the Python path within 1.2x). Needs torch in the interpreter next to this
program (or $TESSERA_PYTHON); without it the suite is skipped.
Expert-parallel dispatch and combine (DeepEP's shape, 4096 tokens of 7168 per rank, top-8 of 256)
need ranks: mpirun -np 2 <that python> -m tessera.bench_python --human
)";

std::vector<Row> run_python_bench(const Options& options, const MachineLimits&) {
  std::vector<Row> rows;
  const PythonModuleRun run =
      run_python_module("[bench python]", "tessera.bench_python", options, [&](const char* line) {
        char op[128];
        long long m = 0, n = 0, k = 0;
        double py_ms = NAN, cpp_ms = NAN;
        if (std::sscanf(line, "%127s %lld %lld %lld %lf %lf", op, &m, &n, &k, &py_ms, &cpp_ms) != 6) return;
        Row r = python_row(op, m, n, k);
        r.time_ms = py_ms;
        r.peer = "native entry (tessera._C)";
        r.peer_time_ms = cpp_ms;
        r.peer_ratio = cpp_ms / py_ms;
        rows.push_back(r);
      });
  if (!run.started) {
    Row r = python_row("bench_python");
    r.status = "error: cannot start " + run.command;
    return {r};
  }
  if (run.status != 0) {
    if (rows.empty()) {  // no interpreter with the tessera package here (e.g. a build-tree CLI): skip
      std::fprintf(stderr,
                   "[bench python] skipped: %s exited with status %d (set TESSERA_PYTHON to an interpreter "
                   "that has tessera and torch)\n",
                   run.command.c_str(), run.status);
      return rows;
    }
    Row r = python_row("bench_python");
    r.status = "error: " + run.command + " exited with status " + std::to_string(run.status);
    rows.push_back(r);
  }
  return rows;
}

void print_python_summary(std::FILE* out, const std::vector<Row>& rows) {
  double worst = INFINITY;
  int n = 0;
  for (const Row& r : rows)
    if (r.ok() && std::isfinite(r.peer_ratio)) worst = std::fmin(worst, r.peer_ratio), ++n;
  std::fprintf(out, "\nPython path (torch tensors) against the native entry:\n");
  if (!n) {
    std::fprintf(out, "  no rows (torch missing, or the interpreter failed) [n/a]\n");
    return;
  }
  std::fprintf(out, "  %d cases, the slowest Python path at %.2fx the native time (target <= 1.2x) %s\n", n,
               1.0 / worst, 1.0 / worst <= 1.2 ? "[met]" : "[not met]");
}

}  // namespace tessera::bench
