// measure_gemm_kernel_ceiling(): the bf16 GEMM's micro-kernel alone over packed panels held in each
// thread's L2, the GEMM's driver (packing, conversions, writing D, threads' shares) taken away.
//
// Per thread: a 256-row a-block and a 128-column b-block of random bf16 (rounded down to whole panels
// of the set's main tile), kc = the set's K block, prepared and packed once by the set's own routines,
// and an fp32 workspace; a sweep calls the tile's kernel once per (a-panel, b-panel) pair in the
// driver's order (b-panels outer), accumulating. Bytes per thread for the amx set (32 x 32, kc = 1024):
// 512 KiB + 256 KiB + 128 KiB, inside a 2 MiB L2.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/registry.h"
#include "machine_limits/timed_rate.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"
#include "tessera/info.h"

namespace tessera {
namespace {

constexpr int kBlockRows = 256, kBlockCols = 128;  // before rounding to whole panels
constexpr double kSweepSeconds = 0.02;             // one timed repetition, like the peak loops

// The kernel set the packed bf16 GEMM would take here, or nullptr for sets this does not measure (the
// fp32-FMA sets, which pack 4-byte elements; and the reference).
const cpu::GemmKernelSet* bf16_packed_set() {
  const auto* ks =
      static_cast<const cpu::GemmKernelSet*>(cpu::choose_kernel(cpu::Slot::kGemmPacked, "kernel ceiling").table);
  return ks && ks->elem_bytes == 2 && ks->accepts(cpu::GemmSrcType::kBF16) ? ks : nullptr;
}

// Random bf16 in [-1, 1), from a per-thread seed.
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = f32_to_bf16(float(int64_t(seed >> 40) - (1ll << 23)) / float(1ll << 23));
  }
  return v;
}

// The blocks' sizes for one tile: whole panels.
struct Shape {
  int rows, cols, kc;
  double flops() const { return 2.0 * rows * cols * kc; }
};

Shape shape_for(const cpu::GemmTile& tile, int kc) {
  return {kBlockRows / tile.mr * tile.mr, kBlockCols / tile.nr * tile.nr, kc};
}

struct ThreadBlocks {
  std::vector<uint16_t> a_src, b_src;  // row-major along K, kept for the check
  AlignedPtr<uint16_t> a_buf, b_panels;
  AlignedPtr<float> c;
  const void* a = nullptr;
  int64_t lda = 0;
};

void prepare(const cpu::GemmKernelSet& ks, const cpu::GemmTile& tile, const Shape& s, uint64_t seed, ThreadBlocks* t) {
  t->a_src = random_bf16(size_t(s.rows) * s.kc, seed);
  t->b_src = random_bf16(size_t(s.cols) * s.kc, seed ^ 0x9E3779B97F4A7C15ull);
  t->a_buf = aligned_array<uint16_t>(size_t(s.rows) * s.kc);
  t->b_panels = aligned_array<uint16_t>(size_t(s.cols) * s.kc);
  t->c = aligned_array<float>(size_t(s.rows) * s.cols);
  const cpu::GemmSrc a{t->a_src.data(), cpu::GemmSrcType::kBF16, s.kc, 1};
  const cpu::GemmSrc b{t->b_src.data(), cpu::GemmSrcType::kBF16, s.kc, 1};
  t->a = ks.prepare_a(a, 0, s.rows, 0, s.kc, s.kc, t->a_buf.get(), &t->lda);
  ks.pack_b(b, 0, s.cols, s.cols, 0, s.kc, s.kc, tile.nr, t->b_panels.get());
}

// One sweep: every (a-panel, b-panel) pair once, c accumulating.
void sweep(const cpu::GemmTile& tile, const Shape& s, const ThreadBlocks& t) {
  cpu::UkrArgs args;
  std::memset(&args, 0, sizeof(args));
  args.lda = t.lda;
  args.kc = args.group = s.kc;
  args.ldc = s.cols;
  args.accumulate = 1;
  args.m_valid = tile.mr;
  for (int j = 0; j < s.cols; j += tile.nr) {
    args.b = t.b_panels.get() + int64_t(j) * s.kc;
    for (int i = 0; i < s.rows; i += tile.mr) {
      args.a = static_cast<const uint16_t*>(t.a) + i * t.lda;
      args.c = t.c.get() + int64_t(i) * s.cols + j;
      tile.ukr(args);
    }
  }
}

// One sweep from c = 0 against a float64 reference: the largest error over the largest |reference|.
double check(const cpu::GemmTile& tile, const Shape& s, const ThreadBlocks& t) {
  std::fill(t.c.get(), t.c.get() + size_t(s.rows) * s.cols, 0.0f);
  sweep(tile, s, t);
  double max_err = 0, max_ref = 0;
  for (int r = 0; r < s.rows; ++r)
    for (int n = 0; n < s.cols; ++n) {
      double ref = 0;
      for (int k = 0; k < s.kc; ++k)
        ref += double(bf16_to_f32(t.a_src[size_t(r) * s.kc + k])) * double(bf16_to_f32(t.b_src[size_t(n) * s.kc + k]));
      max_err = std::max(max_err, std::fabs(double(t.c[size_t(r) * s.cols + n]) - ref));
      max_ref = std::max(max_ref, std::fabs(ref));
    }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

}  // namespace

GemmKernelCeiling measure_gemm_kernel_ceiling(int rounds) {
  TESSERA_CHECK(!in_parallel_region(), "measure_gemm_kernel_ceiling: must not be called inside a parallel region");
  GemmKernelCeiling out;
  const cpu::GemmKernelSet* ks = bf16_packed_set();
  if (!ks) return out;
  const cpu::GemmTile& tile = ks->tiles[0];
  const Shape shape = shape_for(tile, ks->kc);
  const int threads = num_threads();
  std::vector<ThreadBlocks> blocks(static_cast<size_t>(threads));
  // Each thread prepares its own blocks, so they are in its cache and its memory.
  parallel_run([&](int t, int) { prepare(*ks, tile, shape, 0x1234567ull + uint64_t(t), &blocks[size_t(t)]); }, threads);
  out.max_rel_err = check(tile, shape, blocks[0]);
  const int64_t t0 = now_ns();
  sweep(tile, shape, blocks[0]);
  const double one = std::max(double(now_ns() - t0) * 1e-9, 1e-6);
  const int sweeps = std::max(1, int(kSweepSeconds / one));
  std::vector<double> kernel, peak, pct;
  for (int r = 0; r < std::max(1, rounds); ++r) {
    kernel.push_back(info::median_rate(threads,
                                       [&](int t, int) {
                                         for (int s = 0; s < sweeps; ++s) sweep(tile, shape, blocks[size_t(t)]);
                                         return sweeps * shape.flops();
                                       }) *
                     1e-9);
    peak.push_back(measure_bf16_peak_gflops());
    pct.push_back(100.0 * kernel.back() / peak.back());
  }
  out.kernel = ks->name;
  out.rows = shape.rows;
  out.cols = shape.cols;
  out.kc = shape.kc;
  out.gflops = median(kernel);
  out.peak_gflops = median(peak);
  out.pct_of_peak = median(pct);
  return out;
}

}  // namespace tessera
