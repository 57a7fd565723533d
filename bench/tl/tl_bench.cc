// `tessera bench tl`: tile-language kernels (built with the C++ builder, compiled by the tl JIT) against
// the machine's measured limits and, for GEMM, tessera's own library GEMM on the same shapes. Every
// result is checked before it is timed; compile time is measured cold (empty cache) and on a cache hit.
#include "tl/tl_bench.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <vector>

#include "limit_pct.h"
#include "quick_scale.h"
#include "random_fill.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"
#include "tessera/gemm.h"
#include "tessera/tl/kernel.h"
#include "timing.h"
#include "tl/tl_kernels.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

Row make_row(const char* op, int64_t m, int64_t n, int64_t k) {
  Row r;
  r.component = "tl";
  r.op = op;
  r.m = m, r.n = n, r.k = k;
  return r;
}

AlignedPtr<uint16_t> random_bf16(int64_t rows, int64_t cols, uint64_t seed) {
  auto p = aligned_array<uint16_t>(size_t(rows * cols));
  for_random_normal_blocks(rows, cols, 64, seed, [&](int64_t r0, int64_t nr, const float* v) {
    for (int64_t i = 0; i < nr * cols; ++i) p[size_t(r0 * cols + i)] = f32_to_bf16(v[i]);
  });
  return p;
}

// Worst |x - y| / (one bf16 ulp of max(|x|, |y|) + 2^-8 * typical) over two bf16 GEMM results: both
// round an fp32 sum whose order differs (K blocking), so they may differ by one ulp, and values that
// cancel to near zero by the fp32 rounding of the `typical` magnitude sqrt(K).
double bf16_mismatch(const uint16_t* x, const uint16_t* y, int64_t n, double typical) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = bf16_to_f32(x[i]), b = bf16_to_f32(y[i]);
    worst = std::max(
        worst, std::fabs(a - b) / (std::ldexp(std::max(std::fabs(a), std::fabs(b)), -7) + std::ldexp(typical, -8)));
  }
  return worst;
}

bool checked(Row* row, double error) {
  row->check_error = error;
  if (error <= 1.0) return true;
  char buf[96];
  std::snprintf(buf, sizeof buf, "wrong result: check error %.3g x tolerance", error);
  row->status = buf;
  std::fprintf(stderr, "[bench tl] %s: %s\n", row->op.c_str(), buf);
  return false;
}

// Same-run memory references (the machine may be shared; the cached limits were measured idle):
// memcpy over the pool's threads (counted as bytes read + written), and a parallel read-only sum.
double parallel_memcpy_gbps(const void* src, void* dst, int64_t bytes) {
  auto copy = [&](int64_t) {
    parallel_for(bytes / 4096, [&](int64_t b0, int64_t b1) {
      std::memcpy(static_cast<char*>(dst) + b0 * 4096, static_cast<const char*>(src) + b0 * 4096,
                  size_t(b1 - b0) * 4096);
    });
  };
  return 2.0 * double(bytes) / (time_median(copy).median_ms * 1e-3) * 1e-9;
}

double parallel_read_gbps(const void* data, int64_t bytes) {
  std::atomic<uint64_t> sink{0};
  auto read = [&](int64_t) {
    parallel_for(bytes / 8, [&](int64_t w0, int64_t w1) {
      const uint64_t* p = static_cast<const uint64_t*>(data);
      uint64_t acc = 0;
      for (int64_t i = w0; i < w1; ++i) acc += p[i];
      sink.fetch_add(acc, std::memory_order_relaxed);
    });
  };
  return double(bytes) / (time_median(read).median_ms * 1e-3) * 1e-9;
}

class TlBench {
 public:
  TlBench(const Options& o, const MachineLimits& l) : opt_(o), lim_(l) {}

  std::vector<Row> run() {
    guarded("compile", [&] { compile_rows(); });
    for (int64_t s : opt_.full ? std::vector<int64_t>{512, 1024, 2048, 4096} : std::vector<int64_t>{512, 1024, 2048})
      if (s == 512 || double(s) <= 2048 * std::cbrt(opt_.quick_scale))  // slower levels: the smaller sizes
        guarded("gemm", [&] { gemm_row(s); });
    guarded("gemm_f16", [&] { gemm_narrow_row(tl::DataType::kFloat16); });
    guarded("gemm_e5m2", [&] { gemm_narrow_row(tl::DataType::kFloat8E5M2); });
    guarded("add_relu", [&] { add_row(); });
    guarded("gemv_fp8", [&] { gemv_row(false); });
    guarded("gemv_fp8_tiled", [&] { gemv_row(true); });
    guarded("flash_attention", [&] { flash_row(false); });
    if (opt_.full) guarded("flash_attention", [&] { flash_row(true); });
    return std::move(rows_);
  }

 private:
  void guarded(const char* what, const std::function<void()>& fn) {
    std::fprintf(stderr, "[bench tl] %s\n", what);
    try {
      fn();
    } catch (const std::exception& e) {
      Row r = make_row(what, 0, 0, 0);
      r.status = std::string("error: ") + e.what();
      std::fprintf(stderr, "[bench tl] %s FAILED: %s\n", what, e.what());
      rows_.push_back(r);
    }
  }

  tl::Kernel compiled(const tl::Program& p) { return tl::compile(p); }

  // Cold: a fresh cache folder (lowering, code generation, the host compiler, loading). Cache hit: the
  // same program again with the in-memory map bypassed (lowering, code generation, hashing, dlopen).
  void compile_rows() {
    tl::CompileOptions o;
    o.cache_dir =
        (std::filesystem::temp_directory_path() / ("tessera-bench-tl-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(o.cache_dir);
    const tl::Program p = tl_gemm_nt_program(128, 128, 64, 3);
    auto t0 = Clock::now();
    const tl::Kernel cold = tl::compile(p, o);
    Row c = make_row("compile_cold", 0, 0, 0);
    c.time_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    rows_.push_back(c);
    o.memory_cache = false;
    std::vector<double> hits;
    for (int i = 0; i < 5; ++i) {
      t0 = Clock::now();
      const tl::Kernel hit = tl::compile(p, o);
      hits.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (!hit.stats().disk_cache_hit) throw std::runtime_error("the second compile missed the disk cache");
    }
    Row h = make_row("compile_hit", 0, 0, 0);
    h.time_ms = median(hits);
    rows_.push_back(h);
    std::filesystem::remove_all(o.cache_dir);
  }

  void gemm_row(int64_t s) {
    Row row = make_row("gemm_bf16_nt", s, s, s);
    // Blocks of 512 x 128, K steps of 512: each T.gemm packs its B tile again, so taller blocks pack B
    // fewer times in all, and longer K steps pass fewer times over the 256 KiB fp32 accumulator tile.
    // Alternating runs (geo-mean of the 3 sizes vs the library GEMM): 256 x 128, K 256: 0.87-0.96x;
    // 512 x 128, K 256: 0.91-0.96x; 512 x 128, K 512: 0.91-0.98x (2048: 0.83-0.88x -> 0.89-0.93x).
    const tl::Kernel k = compiled(tl_gemm_nt_program(512, 128, 512, 3));
    auto a = random_bf16(s, s, 11), b = random_bf16(s, s, 12);
    auto c = aligned_array<uint16_t>(size_t(s * s)), d = aligned_array<uint16_t>(size_t(s * s));
    const TensorView av(a.get(), DType::kBF16, {s, s}), bv(b.get(), DType::kBF16, {s, s});
    const TensorView cv(c.get(), DType::kBF16, {s, s}), dv(d.get(), DType::kBF16, {s, s});
    std::fill_n(c.get(), s * s, uint16_t(0x7FA5));
    k({av, bv, cv});
    gemm::bf16_gemm_nt(av, bv, dv);
    if (!checked(&row, bf16_mismatch(c.get(), d.get(), s * s, std::sqrt(double(s))))) return rows_.push_back(row);
    row.time_ms = time_median([&](int64_t) { k({av, bv, cv}); }).median_ms;
    row.gflops = 2.0 * double(s) * s * s / (row.time_ms * 1e-3) * 1e-9;
    set_bf16_peak_pct(&row, lim_);
    row.peer = "tessera.gemm";
    row.peer_time_ms = time_median([&](int64_t) { gemm::bf16_gemm_nt(av, bv, dv); }).median_ms;
    row.peer_ratio = row.peer_time_ms / row.time_ms;
    rows_.push_back(row);
  }

  // fp16 (fp16 C) or e5m2 (bf16 C) operands, 1024^3, the bf16 rows' program: checked against float64 on
  // a sample, then timed beside the bf16 program on bf16 operands of the same size (the peer).
  void gemm_narrow_row(tl::DataType operands) {
    const int64_t s = 1024;
    const bool f16 = operands == tl::DataType::kFloat16;
    Row row = make_row(f16 ? "gemm_f16_nt" : "gemm_e5m2_nt", s, s, s);
    const tl::DataType out = f16 ? tl::DataType::kFloat16 : tl::DataType::kBFloat16;
    const tl::Kernel k = compiled(tl_gemm_nt_program(512, 128, 512, 3, operands, out));
    const tl::Kernel k_bf16 = compiled(tl_gemm_nt_program(512, 128, 512, 3));
    // Operands as stored and as float; e5m2 values scaled into its normal range.
    std::vector<float> af(size_t(s * s)), bf(size_t(s * s));
    auto a = aligned_array<uint16_t>(size_t(s * s)), b = aligned_array<uint16_t>(size_t(s * s));
    for (auto [v, p, seed] :
         {std::tuple<std::vector<float>*, uint16_t*, uint64_t>{&af, a.get(), 51}, {&bf, b.get(), 52}})
      for_random_normal_blocks(s, s, 64, seed, [&](int64_t r0, int64_t nr, const float* x) {
        for (int64_t i = 0; i < nr * s; ++i) {
          const size_t at = size_t(r0 * s + i);
          if (f16) {
            p[at] = f32_to_f16(x[i]);
            (*v)[at] = f16_to_f32(p[at]);
          } else {
            reinterpret_cast<uint8_t*>(p)[at] = f32_to_e5m2(x[i]);
            (*v)[at] = e5m2_to_f32(reinterpret_cast<uint8_t*>(p)[at]);
          }
        }
      });
    auto c = aligned_array<uint16_t>(size_t(s * s));
    const DType dt = f16 ? DType::kF16 : DType::kF8E5M2;
    const TensorView av(a.get(), dt, {s, s}), bv(b.get(), dt, {s, s});
    const TensorView cv(c.get(), f16 ? DType::kF16 : DType::kBF16, {s, s});
    k({av, bv, cv});
    // Rounding of C (half an fp16 / bf16 ulp) plus fp32 accumulation over the sum of |products|.
    double worst = 0;
    for (int64_t e = 0; e < s * s; e += 97) {
      const int64_t i = e / s, j = e % s;
      double want = 0, mag = 0;
      for (int64_t q = 0; q < s; ++q) {
        const double t = double(af[size_t(i * s + q)]) * bf[size_t(j * s + q)];
        want += t, mag += std::fabs(t);
      }
      const double got = f16 ? f16_to_f32(c[size_t(e)]) : bf16_to_f32(c[size_t(e)]);
      worst = std::max(worst, std::fabs(got - want) / (std::ldexp(std::fabs(want), f16 ? -11 : -8) + 1e-6 * mag));
    }
    if (!checked(&row, worst)) return rows_.push_back(row);
    auto ab = random_bf16(s, s, 11), bb = random_bf16(s, s, 12), cb = aligned_array<uint16_t>(size_t(s * s));
    const TensorView abv(ab.get(), DType::kBF16, {s, s}), bbv(bb.get(), DType::kBF16, {s, s}),
        cbv(cb.get(), DType::kBF16, {s, s});
    row.time_ms = time_median([&](int64_t) { k({av, bv, cv}); }).median_ms;
    row.peer = "tl gemm_bf16_nt (now)";
    row.peer_time_ms = time_median([&](int64_t) { k_bf16({abv, bbv, cbv}); }).median_ms;
    row.peer_ratio = row.peer_time_ms / row.time_ms;
    row.gflops = 2.0 * double(s) * s * s / (row.time_ms * 1e-3) * 1e-9;
    set_bf16_peak_pct(&row, lim_);
    rows_.push_back(row);
  }

  void add_row() {
    const int64_t m = 8192, n = 8192;  // 128 MB per operand: DRAM, not cache
    Row row = make_row("add_relu_bf16", m, n, 0);
    const tl::Kernel k = compiled(tl_add_relu_program(4, 4096));
    auto a = random_bf16(m, n, 21), b = random_bf16(m, n, 22), c = aligned_array<uint16_t>(size_t(m * n));
    prefault(c.get(), size_t(m * n) * 2);
    const TensorView av(a.get(), DType::kBF16, {m, n}), bv(b.get(), DType::kBF16, {m, n}),
        cv(c.get(), DType::kBF16, {m, n});
    k({av, bv, cv});
    double worst = 0;
    for (int64_t i = 0; i < m * n; i += 997) {
      const float want = std::max(bf16_to_f32(a[size_t(i)]) + bf16_to_f32(b[size_t(i)]), 0.0f);
      worst = std::max(worst, c[size_t(i)] == f32_to_bf16(want) ? 0.0 : 2.0);
    }
    if (!checked(&row, worst)) return rows_.push_back(row);
    row.time_ms = time_median([&](int64_t) { k({av, bv, cv}); }).median_ms;
    row.gbps = 3.0 * double(m * n) * 2 / (row.time_ms * 1e-3) * 1e-9;  // A and B read, C written
    set_dram_copy_pct(&row, row.gbps, lim_);
    row.peer = "memcpy (now)";
    row.peer_ratio = row.gbps / parallel_memcpy_gbps(a.get(), c.get(), m * n * 2);
    rows_.push_back(row);
  }

  // Row-major weights W[N, K] (as DeepGEMM stores them), or the same weights stored tile by tile,
  // W[N / 64, K / 128, 64, 128], so each T.gemm reads one contiguous 8 KiB tile.
  void gemv_row(bool tiled) {
    const int64_t n = 16384, kk = 8192, bn = 64, kb = kk / 128;  // 128 MB of fp8 weights
    Row row = make_row(tiled ? "gemv_fp8_tiled" : "gemv_fp8", 1, n, kk);
    const tl::Kernel k =
        compiled(tiled ? tl_gemv_fp8_tiled_program(int(kk), int(bn)) : tl_gemv_fp8_program(int(kk), int(bn)));
    auto w = aligned_array<uint8_t>(size_t(n * kk));
    auto s = aligned_array<float>(size_t(n * kb));
    auto x = random_bf16(1, kk, 31);
    auto y = aligned_array<float>(size_t(n));
    // Offsets of weight (r, q) and of the scale of (r, q / 128) in the layout measured.
    auto w_at = [&](int64_t r, int64_t q) {
      return tiled ? ((r / bn * kb + q / 128) * bn + r % bn) * 128 + q % 128 : r * kk + q;
    };
    auto s_at = [&](int64_t r, int64_t b) { return tiled ? (r / bn * kb + b) * bn + r % bn : r * kb + b; };
    for_random_normal_blocks(n, kk, 64, 32, [&](int64_t r0, int64_t nr, const float* v) {
      for (int64_t i = 0; i < nr * kk; ++i) w[size_t(w_at(r0 + i / kk, i % kk))] = f32_to_e4m3(v[i] * 4);
    });
    for (int64_t r = 0; r < n; ++r)
      for (int64_t b = 0; b < kb; ++b) s[size_t(s_at(r, b))] = 0.5f + float((r * kb + b) % 7) * 0.25f;
    const TensorView wv = tiled ? TensorView(w.get(), DType::kF8E4M3, {n / bn, kb, bn, 128})
                                : TensorView(w.get(), DType::kF8E4M3, {n, kk});
    const TensorView sv =
        tiled ? TensorView(s.get(), DType::kF32, {n / bn, kb, bn}) : TensorView(s.get(), DType::kF32, {n, kb});
    const TensorView xv(x.get(), DType::kBF16, {kk});
    const TensorView yv =
        tiled ? TensorView(y.get(), DType::kF32, {n / bn, bn}) : TensorView(y.get(), DType::kF32, {n});
    k({wv, sv, xv, yv});
    double worst = 0;
    for (int64_t r = 0; r < n; r += 331) {
      double want = 0, mag = 0;
      for (int64_t q = 0; q < kk; ++q) {
        const double t =
            double(e4m3_to_f32(w[size_t(w_at(r, q))])) * s[size_t(s_at(r, q / 128))] * bf16_to_f32(x[size_t(q)]);
        want += t, mag += std::fabs(t);
      }
      worst = std::max(worst, std::fabs(y[size_t(r)] - want) / (1e-5 * mag + 1e-6));
    }
    if (!checked(&row, worst)) return rows_.push_back(row);
    row.time_ms = time_median([&](int64_t) { k({wv, sv, xv, yv}); }).median_ms;
    row.gbps = double(n * kk) / (row.time_ms * 1e-3) * 1e-9;  // weight bytes
    set_dram_read_pct(&row, row.gbps, lim_);
    row.peer = "read sum (now)";
    row.peer_ratio = row.gbps / parallel_read_gbps(w.get(), n * kk);
    rows_.push_back(row);
  }

  void flash_row(bool causal) {
    // Slower levels: a shorter sequence (the work grows with its square), whole 256-row tiles.
    const int batch = 1, heads = 8, dim = 128;
    const int seq = int(scaled_size(2048, std::sqrt(opt_.quick_scale), 256, 256));
    Row row = make_row(causal ? "flash_fwd_causal" : "flash_fwd", seq, heads, dim);
    const tl::Kernel k = compiled(tl_flash_attention_program(batch, heads, seq, dim, 256, 128, causal));
    const int64_t elems = int64_t(batch) * seq * heads * dim;
    auto q = random_bf16(seq, int64_t(heads) * dim, 41), kt = random_bf16(seq, int64_t(heads) * dim, 42);
    auto v = random_bf16(seq, int64_t(heads) * dim, 43), o = aligned_array<uint16_t>(size_t(elems));
    const TensorView qv(q.get(), DType::kBF16, {batch, seq, heads, dim}),
        kv(kt.get(), DType::kBF16, {batch, seq, heads, dim});
    const TensorView vv(v.get(), DType::kBF16, {batch, seq, heads, dim}),
        ov(o.get(), DType::kBF16, {batch, seq, heads, dim});
    k({qv, kv, vv, ov});
    // float64 attention for a sample of rows of head 0 and the last head
    double worst = 0;
    for (int h : {0, heads - 1})
      for (int r = 0; r < seq; r += 257) {
        std::vector<double> p(static_cast<size_t>(seq));
        double mx = -1e300, sum = 0;
        const int keys = causal ? r + 1 : seq;
        for (int j = 0; j < keys; ++j) {
          double dot = 0;
          for (int d = 0; d < dim; ++d)
            dot += double(bf16_to_f32(q[size_t((int64_t(r) * heads + h) * dim + d)])) *
                   bf16_to_f32(kt[size_t((int64_t(j) * heads + h) * dim + d)]);
          p[size_t(j)] = dot / std::sqrt(double(dim));
          mx = std::max(mx, p[size_t(j)]);
        }
        for (int j = 0; j < keys; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
        for (int d = 0; d < dim; ++d) {
          double want = 0;
          for (int j = 0; j < keys; ++j)
            want += p[size_t(j)] / sum * bf16_to_f32(v[size_t((int64_t(j) * heads + h) * dim + d)]);
          const double got = bf16_to_f32(o[size_t((int64_t(r) * heads + h) * dim + d)]);
          worst = std::max(worst, std::fabs(got - want) / (2e-2 + std::ldexp(std::fabs(want), -8)));
        }
      }
    if (!checked(&row, worst)) return rows_.push_back(row);
    row.time_ms = time_median([&](int64_t) { k({qv, kv, vv, ov}); }).median_ms;
    const double flops = 4.0 * batch * heads * double(seq) * seq * dim * (causal ? 0.5 : 1.0);
    row.gflops = flops / (row.time_ms * 1e-3) * 1e-9;
    set_bf16_peak_pct(&row, lim_);
    if (active_isa() == Isa::kAmx) {
      // The same program compiled and run at the vector level below (vdpbf16ps): the AMX target is a
      // ratio to it, since the two differ by the unit, not by the program.
      const IsaCapScope vector_level(Isa::kAvx512Bf16);
      const tl::Kernel kv512 = compiled(tl_flash_attention_program(batch, heads, seq, dim, 256, 128, causal));
      row.peer = "vector version (avx512bf16)";
      row.peer_time_ms = time_median([&](int64_t) { kv512({qv, kv, vv, ov}); }).median_ms;
      row.peer_ratio = row.peer_time_ms / row.time_ms;
    }
    rows_.push_back(row);
  }

  // Caps the ISA level for the scope (the tl cache keys kernels by level, so both versions stay cached).
  struct IsaCapScope {
    explicit IsaCapScope(Isa cap) : saved(active_isa()) { set_isa_cap(cap); }
    ~IsaCapScope() { set_isa_cap(saved); }
    Isa saved;
  };

  const Options& opt_;
  const MachineLimits& lim_;
  std::vector<Row> rows_;
};

const Row* find(const std::vector<Row>& rows, const std::string& op) {
  for (const Row& r : rows)
    if (r.op == op && r.ok()) return &r;
  return nullptr;
}

const char* verdict(bool met) {
  return met ? "[met]" : "[not met]";
}

// FlashAttention's target per level: % of the level's bf16 (or fp32 FMA) peak; 0 at amx, where the
// target is 3x the same program run at the vector level.
double flash_pct_target() {
  switch (active_isa()) {
    case Isa::kAmx:
      return 0;
    case Isa::kAvx512Bf16:
      return 50;
    default:
      return 40;
  }
}

}  // namespace

std::vector<Row> run_tl_bench(const Options& options, const MachineLimits& limits) {
  return TlBench(options, limits).run();
}

void print_tl_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::vector<const Row*> gemms;
  for (const Row& r : rows)
    if (r.op == "gemm_bf16_nt") gemms.push_back(&r);
  const GeoMeans g = geo_means(gemms);
  std::fprintf(out, "\ntile language (tl):\n");
  std::fprintf(
      out, "  GEMM bf16 (M=N=K >= 512), %d rows: %s of bf16 peak, %s of tessera's library GEMM (target >= 0.90x) %s\n",
      g.rows, format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str(),
      std::isfinite(g.peer_ratio) ? verdict(g.peer_ratio >= 0.9) : "[n/a]");
  // fp16 / e5m2 operands: no target of their own, the ratio to the bf16 program in the same run.
  for (const char* op : {"gemm_f16_nt", "gemm_e5m2_nt"})
    if (const Row* r = find(rows, op))
      std::fprintf(out, "  GEMM %s 1024^3: %s of bf16 peak, %s of the bf16 program's speed (same run)\n",
                   op[5] == 'f' ? "fp16" : "e5m2", format_pct(r->pct_of_limit).c_str(),
                   format_ratio(r->peer_ratio).c_str());
  struct Target {
    const char* op;
    const char* what;
    double target;
    const char* compare_op = nullptr;  // a DRAM-read row printed under it for comparison (no target)
    const char* compare_what = nullptr;
  };
  // Bytes moved, counted like the limits and peers: add = 2 reads + 1 write per element (copy limit and
  // memcpy count read + written bytes); GEMV = weight bytes read (read limit and read sum).
  for (const Target& t :
       {Target{"add_relu_bf16", "elementwise add+relu (bytes read + written): of DRAM copy bandwidth", 75},
        Target{"gemv_fp8_tiled", "dequant GEMV (fp8 weights stored tile by tile, bytes read): of DRAM read bandwidth",
               75, "gemv_fp8", "row-major weights (64 rows 8 KiB apart per T.gemm)"},
        Target{"flash_fwd", "FlashAttention fwd (seq 2048, dim 128, bf16): of bf16 peak", flash_pct_target()}}) {
    const Row* r = find(rows, t.op);
    if (t.target == 0) {  // amx: a ratio to the same program at the vector level
      std::fprintf(out, "  %s %s; %s its %s (target >= 3x) %s\n", t.what,
                   r ? format_pct(r->pct_of_limit).c_str() : "n/a", r ? format_ratio(r->peer_ratio).c_str() : "n/a",
                   r ? r->peer.c_str() : "vector version",
                   r && std::isfinite(r->peer_ratio) ? verdict(r->peer_ratio >= 3) : "[n/a]");
      continue;
    }
    std::fprintf(out, "  %s %s (target >= %.0f%%) %s", t.what, r ? format_pct(r->pct_of_limit).c_str() : "n/a",
                 t.target, r ? verdict(r->pct_of_limit >= t.target) : "[n/a]");
    if (r && std::isfinite(r->peer_ratio))  // the same bytes moved by a plain loop in this run
      std::fprintf(out, "; %s of %s", format_pct(100.0 * r->peer_ratio).c_str(), r->peer.c_str());
    std::fprintf(out, "\n");
    if (const Row* c = t.compare_op ? find(rows, t.compare_op) : nullptr)  // measured like the target row
      std::fprintf(out, "    %s: %s of DRAM read; %s of %s\n", t.compare_what, format_pct(c->pct_of_limit).c_str(),
                   format_pct(100.0 * c->peer_ratio).c_str(), c->peer.c_str());
  }
  const Row* cold = find(rows, "compile_cold");
  const Row* hit = find(rows, "compile_hit");
  std::fprintf(out, "  compile: cold %.0f ms, cache hit %.2f ms (target < 20 ms) %s\n", cold ? cold->time_ms : NAN,
               hit ? hit->time_ms : NAN, hit ? verdict(hit->time_ms < 20) : "[n/a]");
}

}  // namespace tessera::bench
