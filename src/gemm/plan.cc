// Packed GEMM planning: block sizes, split side and loop order from a cost model.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include "gemm/plan.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "core/env.h"

namespace tessera::gemm {
namespace {

int64_t round_up(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}

int env_int(const char* name, int fallback) {
  return int(env::integer(name, fallback, INT32_MIN, INT32_MAX));
}

// Costs in units of one lane multiply-add of the micro-kernel (~65 per cycle per core on Zen 5), so
// padding waste, packing and conversions compare on one scale. Measured per element, cache-resident
// (bench: /tmp pack microbenchmarks, avx512bf16 set): b-side pair-transpose from a K-contiguous source
// 0.34 cycle (~22 units), row interleave from an MN-contiguous source 0.24 (~16); a-side fp8 -> bf16
// conversion ~0.1 (~7); bf16 K-contiguous a-side is read in place (0); MN-contiguous a-side (zip and
// transpose) ~0.4 (~26).
constexpr double kConvertUnits = 7.0;  // one pass that reads an a-side value and writes it in another form
double b_pack_units(const cpu::GemmSrc& s) {
  return s.stride_k == 1 ? 22.0 : 16.0;
}
double a_prep_units(const cpu::GemmSrc& s) {
  if (s.stride_k != 1) return 26.0;
  return s.type == cpu::GemmSrcType::kBF16 ? 0.0 : kConvertUnits;
}

struct Choice {
  double cost;
  bool swap;
  int tile;
};

// Reading one byte costs ~4 units from L3 and ~12 from DRAM (per-core bandwidths against the lane-FMA
// rate on Zen 5); an operand larger than half the L3, or one of a
// batch whose operands together are (MoE groups: the other groups' weights evict it), is assumed to
// come from DRAM every time it is read.
double read_units(double bytes, bool cold) {
  return cold || bytes > double(16 << 20) ? 12.0 : 4.0;
}

// How many tail columns the kernel set's dot-product path takes with b_side as the packed side (0: it
// does not apply: a b-side that is not bf16 or e4m3 rows along K).
int tail_dot_cols(const cpu::GemmSrc& b_side, const cpu::GemmKernelSet& ks) {
  const bool applies = ks.tail_dot && b_side.stride_k == 1 &&
                       (b_side.type == cpu::GemmSrcType::kBF16 || b_side.type == cpu::GemmSrcType::kE4M3);
  return applies ? ks.tail_dot_cols : 0;
}

double choice_cost(const cpu::GemmSrc& xs, const cpu::GemmSrc& ys, bool x_cold, bool y_cold, int64_t x, int64_t y,
                   int64_t k, const cpu::GemmTile& t, int n_step, int dot_cols, int64_t nc) {
  // An a-side read in place streams t.mr source rows at once: 14 rows ran below 8, which the tile's
  // rate alone (taken on packed panels) does not show.
  const bool a_converted = a_prep_units(xs) > 0.0;
  const double in_place = !a_converted && t.mr > 8 ? 0.9 : 1.0;
  const double rate = (t.rate > 0 ? double(t.rate) : 1.0) * in_place;
  const double padded =
      double(round_up(x, t.mr)) * computed_cols(y, t, n_step, dot_cols, a_converted) * double(k) / rate;
  const double y_elems = double(y) * double(k), x_elems = double(x) * double(k);
  const double y_bytes = y_elems * src_bytes(ys), x_bytes = x_elems * src_bytes(xs);
  // The b-side is read and packed once, before its block's compute starts: from DRAM nothing hides
  // the reads (2x). The a-side is read (and prepared) once per b-block; read in place it streams under
  // the micro-kernel (prefetched a chunk ahead), so even from DRAM it costs what an L3 read does.
  // Measured: MoE groups of 97-199 rows (N=4096, K=2048, bf16 and fp8 weights) ran 5-18% slower with
  // the weights packed as the b-side than read or converted in place as the a-side, which the model
  // without these two terms had rated equal or cheaper.
  const double y_read = read_units(y_bytes, y_cold);
  const double b_side = y_elems * b_pack_units(ys) + y_bytes * (y_read > 4.0 ? 2.0 * y_read : y_read);
  const double a_read = a_prep_units(xs) == 0.0 ? 4.0 : read_units(x_bytes, x_cold);
  const double a_side = (x_elems * a_prep_units(xs) + x_bytes * a_read) * double((y + nc - 1) / nc);
  return padded + b_side + a_side;
}

// Whether the plan can fold p's scales into its operands (PackedPlan::fold_scales): a set that folds,
// fp8 / fp4 sources on both sides (every value times 2^+-kFoldExponentMax stays a normal bf16), whole
// scale groups per K step (64 values in lane order), no thin-tail dot products (they take scales as
// arguments) or fused conversions, and every scale a power of two in range (a scan of both tables).
bool folds_scales(const GemmProblem& p, const cpu::GemmKernelSet& ks, const PackedPlan& plan) {
  auto narrow = [](const cpu::GemmSrc& s) {
    return s.type == cpu::GemmSrcType::kE4M3 || s.type == cpu::GemmSrcType::kE5M2 || s.type == cpu::GemmSrcType::kE2M1;
  };
  if (p.group <= 0 || !ks.prepare_a_folded || !ks.fold_b_scales || !narrow(p.a) || !narrow(p.b)) return false;
  if (p.group % (plan.lane_order ? 64 : 32) != 0 || plan.dot_cols > 0 || plan.fused_convert) return false;
  const int64_t groups = scale_groups(p);
  const int e = cpu::kFoldExponentMax;
  return scales_are_powers_of_two(p.sa, p.m, groups, -e, e) && scales_are_powers_of_two(p.sb, p.n, groups, -e, e);
}

}  // namespace

// Column-equivalents a tile spends on y b-side columns: whole panels, except that a set whose kernels
// skip a tail panel's empty vectors computes the tail in n_step units. A tail panel has fewer
// accumulators and runs below full rate, by how much depends on where its a-panel comes from:
// - read in place (streamed from memory under the kernel), about accumulators / 24 of full rate:
//   cost cols * clamp(24 / accumulators, 1, 2);
// - converted (a-panel in L1, panel-outer order), fitted to fp8: cols * clamp(16 / accumulators, 1, 2).
// A tail costs at most a whole panel. A tail of at most dot_cols columns goes to the kernel set's
// dot-product path instead, ~2 column-equivalents per column.
double computed_cols(int64_t y, const cpu::GemmTile& t, int n_step, int dot_cols, bool a_converted) {
  const int64_t whole = y / t.nr * t.nr, tail = y - whole;
  if (tail == 0) return double(whole);
  if (tail <= dot_cols) return double(whole) + 2.0 * double(tail);
  if (n_step <= 0) return double(whole + t.nr);
  const int64_t cols = round_up(tail, n_step);
  const double accumulators = double(t.mr) * double(cols / n_step);
  const double full_rate_accumulators = a_converted ? 16.0 : 24.0;
  return double(whole) +
         std::min(double(t.nr), double(cols) * std::clamp(full_rate_accumulators / accumulators, 1.0, 2.0));
}

int64_t batch_b_bytes(const GemmProblem* problems, int64_t count) {
  if (count <= 1) return 0;
  int64_t bytes = 0;
  for (int64_t i = 0; i < count; ++i) {
    const GemmProblem& p = problems[i];
    const int64_t values = p.n * p.k;
    bytes += p.b.type == cpu::GemmSrcType::kE2M1 ? values / 2 : values * src_bytes(p.b);  // fp4: two per byte
  }
  return bytes;
}

PackedPlan make_packed_plan(const GemmProblem& p, const cpu::GemmKernelSet& ks, int threads, int64_t batch_bytes) {
  const bool b_cold = double(batch_bytes) > double(16 << 20);
  PackedPlan plan;
  // fp8 x fp8 packs in "lane order" (cheaper conversion, see GemmSrc::lane_order) when scale groups are
  // whole 64-blocks; K is then padded to 64 so every chunk is whole blocks.
  plan.lane_order =
      p.a.type == cpu::GemmSrcType::kE4M3 && p.b.type == cpu::GemmSrcType::kE4M3 && (p.group == 0 || p.group % 64 == 0);
  plan.k_pad = round_up(p.k, plan.lane_order ? 64 : ks.k_align);
  plan.threads = threads;

  // NC: the b-side block packed for the whole K and reused by every a-side block: ~2 MiB (L3-resident).
  const int64_t nc_budget = (2 << 20) / (plan.k_pad * ks.elem_bytes);
  // A b-side small enough to pack whole (<= 6 MiB, well inside the shared L3) is one block: every extra
  // block re-reads (and re-converts) the whole a-side.
  // A set that copies every a-panel (amx) repeats that copy per b-block: up to 32 MiB is packed whole.
  const int64_t whole_budget = (int64_t(ks.copies_a ? 32 : 6) << 20) / (plan.k_pad * ks.elem_bytes);
  auto block_cols = [&](int64_t y, int nr) {
    const int64_t whole = round_up(y, nr);
    if (whole <= whole_budget) return whole;
    return std::max<int64_t>(nr, nc_budget / nr * nr);
  };

  Choice best{-1.0, false, 0};
  for (int swap = 0; swap < 2; ++swap)
    for (int t = 0; t < ks.num_tiles; ++t) {
      const cpu::GemmTile& tile = ks.tiles[t];
      const int64_t nc = block_cols(swap ? p.m : p.n, tile.nr);
      const cpu::GemmSrc& b_side = swap ? p.a : p.b;
      const double cost =
          swap ? choice_cost(p.b, p.a, b_cold, false, p.n, p.m, p.k, tile, ks.n_step, tail_dot_cols(b_side, ks), nc)
               : choice_cost(p.a, p.b, false, b_cold, p.m, p.n, p.k, tile, ks.n_step, tail_dot_cols(b_side, ks), nc);
      if (best.cost < 0 || cost < best.cost) best = {cost, swap != 0, t};
    }
  plan.swap = env_int("TESSERA_GEMM_SWAP", best.swap ? 1 : 0) != 0;
  plan.tile = ks.tiles[std::clamp(env_int("TESSERA_GEMM_TILE", best.tile), 0, ks.num_tiles - 1)];
  plan.x = plan.swap ? p.n : p.m;
  plan.y = plan.swap ? p.m : p.n;
  const cpu::GemmSrc& xs = plan.swap ? p.b : p.a;
  const cpu::GemmSrc& ys = plan.swap ? p.a : p.b;
  const int mr = plan.tile.mr, nr = plan.tile.nr;
  plan.dot_cols = tail_dot_cols(ys, ks);

  // KC: the kernel set's K block (avx512bf16: 1024, see gemm_pack_bf16.cc; amx: 1024, see
  // gemm_ukr_amx.cc); scale groups never straddle a chunk.
  int kc = env_int("TESSERA_GEMM_KC", p.group > 0 && ks.kc_scaled > 0 ? ks.kc_scaled : ks.kc);
  if (p.group > 0) kc = int(std::max<int64_t>(p.group, kc / p.group * p.group));
  kc = int(round_up(kc, plan.lane_order ? 64 : ks.k_align));
  plan.kc = int(std::min<int64_t>(kc, plan.k_pad));
  if (p.k_chain) {  // one chunk: each output's FMA chain runs over the whole K without a restart
    plan.kc = int(plan.k_pad);
    plan.dot_cols = 0;
  }

  // Split the side that gives the shorter per-thread time (per K value): its share of the panels (a
  // thread with one panel more than another sets the pace) plus the duplicated work: splitting y makes
  // every thread prepare (or read) the whole a-side, splitting x makes every thread pack the whole b-side.
  // A side needs >= threads panels.
  // A set that copies every a-panel (amx) pays for that copy like a conversion, bf16 read along K
  // included. Every a-block of a thread reads the thread's packed b-side again; splitting x gives every
  // thread the whole b-side, so `threads` copies of it compete for the shared cache, and past its budget
  // those reads come from DRAM. Measured (amx, bf16, 2 threads, alternating pairs, ms, split y vs x):
  // M=64 N=576 K=7168 1.44-1.56 vs 1.24, M=128 1.22-2.54 vs 1.12-2.39 (now x: the copy); M=1024 N=4096
  // K=7168 68-120 vs 147-152, N=2112 71-75 vs 76-82 (stay y: 29 MiB of b-sides); M=1024 N=7168 K=2048
  // (now x) mixed: y faster in 4 of 7 pairs by 2-27%, x in 3 by 13-45%.
  const int64_t mc = round_up(env_int("TESSERA_GEMM_MC", 256), mr);
  const double a_copy_units = ks.copies_a ? kConvertUnits : 0.0;
  const int64_t x_panels = (plan.x + mr - 1) / mr, y_panels = (plan.y + nr - 1) / nr;
  const int64_t x_share = (x_panels + threads - 1) / threads, y_share = (y_panels + threads - 1) / threads;
  const int64_t nc = block_cols(plan.y, nr);
  const double block_bytes = double(plan.k_pad) * ks.elem_bytes;  // per b-side column
  const double reread_if_split_y = double(y_share * nr) * ks.elem_bytes * double((plan.x + mc - 1) / mc) *
                                   read_units(double(std::min(y_share * nr, nc)) * threads * block_bytes, false);
  const double reread_if_split_x = double(plan.y) * ks.elem_bytes * double((x_share * mr + mc - 1) / mc) *
                                   read_units(double(std::min(plan.y, nc)) * threads * block_bytes, false);
  const double dup_if_split_y = double(plan.x) * std::max({2.0, a_prep_units(xs), a_copy_units});
  const double dup_if_split_x = double(plan.y) * b_pack_units(ys);
  const double time_if_split_y = double(plan.x) * nr * double(y_share) + dup_if_split_y + reread_if_split_y;
  const double time_if_split_x = double(plan.y) * mr * double(x_share) + dup_if_split_x + reread_if_split_x;
  if (y_panels < threads) {
    plan.split_y = false;
  } else if (x_panels < threads) {
    plan.split_y = true;
  } else {
    plan.split_y = time_if_split_y <= time_if_split_x;
  }
  if (const char* v = std::getenv("TESSERA_GEMM_SPLIT"); v && (*v == 'x' || *v == 'y')) plan.split_y = *v == 'y';

  plan.nc = int(round_up(env_int("TESSERA_GEMM_NC", int(nc)), nr));
  // Panel-outer (each a-panel meets the whole b-block, the next a-panel prefetched meanwhile; packed.cc)
  // when the a-side is converted, or read in place with K at most two chunks: there BLIS order starts
  // most a-panels from DRAM (longer K gains nothing, so it keeps BLIS order). A set that copies every
  // a-panel (amx) counts as converting: its BLIS order copies a whole a-block from DRAM in one go,
  // panel-outer one panel at a time with the next prefetched through the calls (larger b-blocks stay
  // BLIS order by the size rule).
  plan.a_converted = a_prep_units(xs) > 0;
  plan.panel_outer = (plan.a_converted || ks.copies_a || plan.k_pad <= 2 * int64_t(plan.kc)) &&
                     int64_t(plan.nc) * plan.kc * ks.elem_bytes <= (512 << 10);
  if (const char* v = std::getenv("TESSERA_GEMM_PANEL_OUTER")) plan.panel_outer = *v == '1';
  // MC: the a-side chunk (mc x kc) stays in L2 while the block's b-panels pass over it.
  plan.mc = int(mc);
  // Panel-outer converts into two a-panel buffers in the mc x kc a-buffer, BLIS order into the block
  // itself; TESSERA_GEMM_FUSED_CONVERT=0 turns the fusion off.
  plan.fused_convert = ks.fuses_e4m3_convert && plan.lane_order && xs.type == cpu::GemmSrcType::kE4M3 &&
                       xs.stride_k == 1 && (!plan.panel_outer || plan.mc >= 2 * mr) &&
                       env_int("TESSERA_GEMM_FUSED_CONVERT", 1) != 0;
  plan.fold_scales = env_int("TESSERA_GEMM_FOLD_SCALES", 1) != 0 && folds_scales(p, ks, plan);
  return plan;
}

std::string PackedPlan::describe() const {
  std::ostringstream os;
  os << "packed plan: " << (swap ? "swap (a-side=B, b-side=A)" : "direct (a-side=A, b-side=B)") << " x=" << x
     << " y=" << y << " k_pad=" << k_pad << " tile=" << tile.mr << "x" << tile.nr << " mc=" << mc << " nc=" << nc
     << " kc=" << kc << " split=" << (split_y ? "y" : "x") << (panel_outer ? " panel-outer" : "")
     << (lane_order ? " lane-order" : "") << (fused_convert ? " fused-convert" : "")
     << (fold_scales ? " folded-scales" : "") << " threads=" << threads;
  return os.str();
}

}  // namespace tessera::gemm
