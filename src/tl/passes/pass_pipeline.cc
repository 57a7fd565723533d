// The lowering pipeline (see pass_pipeline.h).
#include "tl/passes/pass_pipeline.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "core/env.h"
#include "tessera/tl/printer.h"
#include "tl/passes/elide_gemm_copies.h"
#include "tl/passes/first_gemm_clears.h"
#include "tl/passes/infer_regions.h"
#include "tl/passes/legalize_bounds.h"
#include "tl/passes/lower_tile_ops.h"
#include "tl/passes/plan_pipeline.h"
#include "tl/passes/simplify.h"
#include "tl/passes/vectorize.h"
#include "tl/passes/verify.h"

namespace tessera::tl {
namespace {

bool print_ir() {
  return env::flag("TESSERA_TL_PRINT_IR");
}

}  // namespace

Program lower_program(const Program& p, const Target& target) {
  const bool print = print_ir();
  if (print) std::fprintf(stderr, "[tessera tl] input:\n%s\n", to_string(p).c_str());
  verify_program(p);
  Program out = p;
  auto run = [&](const char* name, const std::function<Stmt(const Stmt&)>& pass) {
    const auto t0 = std::chrono::steady_clock::now();
    Stmt next = pass(out.body);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const bool changed = !next.same_as(out.body);
    out.body = next;
    if (print && changed)
      std::fprintf(stderr, "[tessera tl] after %s (%.2f ms):\n%s\n", name, ms, to_string(out).c_str());
  };
  run("infer_regions", infer_regions);
  run("elide_gemm_copies", elide_gemm_copies);
  run("plan_pipeline", plan_pipeline);
  run("first_gemm_clears", first_gemm_clears);
  run("lower_tile_ops", [&](const Stmt& s) { return lower_tile_ops(s, target); });
  run("legalize_bounds", legalize_bounds);
  run("simplify", [](const Stmt& s) { return simplify(s); });
  run("vectorize", [&](const Stmt& s) { return vectorize(s, target); });
  return out;
}

}  // namespace tessera::tl
