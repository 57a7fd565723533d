#include "gemm/plan.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace tessera::gemm {
namespace {

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Which operand becomes the b-side (packed into interleaved column panels, the costlier packing when
// the source is K-contiguous). Rules, in order:
//  1. An MN-contiguous operand packs cheaply as a b-side (rows k and k+1 interleave); a K-contiguous
//     operand is read in place (bf16) or converted row by row as an a-side.
//  2. Both alike: the smaller operand is the b-side (it is packed once and reused across the other).
bool choose_swap(const GemmProblem& p) {
  const bool a_kcontig = p.a.stride_k == 1, b_kcontig = p.b.stride_k == 1;
  if (a_kcontig != b_kcontig) return a_kcontig ? false : true;
  return p.m < p.n;
}

}  // namespace

PackedPlan make_packed_plan(const GemmProblem& p, const cpu::GemmKernelSet& ks, int threads) {
  PackedPlan plan;
  plan.swap = choose_swap(p);
  plan.x = plan.swap ? p.n : p.m;
  plan.y = plan.swap ? p.m : p.n;
  plan.k_pad = round_up(p.k, ks.k_align);
  plan.threads = threads;

  // KC: the b-panel chunk (kc x nr) stays in L1; scale groups never straddle a chunk.
  int kc = env_int("TESSERA_GEMM_KC", ks.kc);
  if (p.group > 0) kc = int(std::max<int64_t>(p.group, kc / p.group * p.group));
  kc = int(round_up(kc, ks.k_align));
  plan.kc = int(std::min<int64_t>(kc, round_up(plan.k_pad, ks.k_align)));

  // NC: the b-side block packed for the whole K (reused by all a-side blocks of a thread): ~2 MiB.
  const int64_t b_budget = 2 << 20;
  int64_t nc = b_budget / (plan.k_pad * ks.elem_bytes) / ks.nr * ks.nr;
  nc = std::clamp<int64_t>(nc, ks.nr, round_up(plan.y, ks.nr));
  nc = env_int("TESSERA_GEMM_NC", int(nc));
  plan.nc = int(round_up(nc, ks.nr));

  // MC: the a-side chunk (mc x kc) stays in L2 while every b-panel of the block passes over it.
  int64_t mc = std::min<int64_t>(512, round_up(plan.x, ks.mr));
  plan.tiles_y = (plan.y + plan.nc - 1) / plan.nc;
  // Enough tiles for every thread: shrink MC until each thread has >= 4 tiles or MC is small.
  while (mc > 4 * ks.mr && plan.tiles_y * ((plan.x + mc - 1) / mc) < 4 * threads) mc = round_up(mc / 2, ks.mr);
  mc = env_int("TESSERA_GEMM_MC", int(mc));
  plan.mc = int(round_up(mc, ks.mr));
  plan.tiles_x = (plan.x + plan.mc - 1) / plan.mc;
  return plan;
}

std::string PackedPlan::describe() const {
  std::ostringstream os;
  os << "packed plan: " << (swap ? "swap (a-side=B, b-side=A)" : "direct (a-side=A, b-side=B)") << " x=" << x
     << " y=" << y << " k_pad=" << k_pad << " mc=" << mc << " nc=" << nc << " kc=" << kc << " tiles=" << tiles_x
     << "x" << tiles_y << " threads=" << threads;
  return os.str();
}

}  // namespace tessera::gemm
