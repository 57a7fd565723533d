// The `fmha_bwd` rows of `tessera bench attention`: flash_attn_varlen_bwd (FlashMLA's dense MHA prefill
// backward) on one request with FlashMLA's FMHA head dims (d_qk 192, d_v 128), causal and not. Gradients
// are checked against float64 on sampled query rows (dq) and keys (dk, dv) first; then timed against a
// naive backward on oneDNN matmuls that materialises S, P, dP and dS per head.
#include "attention/fmha_bwd_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "attention/gemm_ceilings.h"
#include "limit_pct.h"
#include "peers/onednn_matmul.h"
#include "quick_scale.h"
#include "random_fill.h"
#include "tessera/core/dtype.h"
#include "tessera/flash_mla.h"
#include "timing.h"

namespace tessera::bench {
namespace {

struct FmhaCase {
  int seq, heads;
  bool causal;
};
const FmhaCase kCases[] = {{1024, 8, false}, {1024, 8, true}};
constexpr int kDqk = 192, kDv = 128;

struct FmhaProblem {
  int s, h;
  bool causal;
  double scale = 1.0 / std::sqrt(double(kDqk));
  std::vector<uint16_t> q, k, v, out, dout, dq, dk, dv;  // bf16 [s][h][d]
  std::vector<float> lse;
  std::vector<int32_t> cu;

  FmhaProblem(int seq, int heads, bool c) : s(seq), h(heads), causal(c) {
    auto fill = [&](std::vector<uint16_t>& x, int d, uint64_t seed) {
      x.resize(size_t(s) * h * d);
      for_random_normal_blocks(int64_t(s) * h, d, 64, seed, [&](int64_t r0, int64_t rows, const float* vals) {
        for (int64_t i = 0; i < rows * d; ++i) x[size_t(r0 * d + i)] = f32_to_bf16(vals[i]);
      });
    };
    fill(q, kDqk, 1);
    fill(k, kDqk, 2);
    fill(v, kDv, 3);
    fill(dout, kDv, 4);
    out.resize(dout.size());
    dq.resize(q.size());
    dk.resize(k.size());
    dv.resize(v.size());
    lse.resize(size_t(s) * h);
    cu = {0, s};
    flash_mla::flash_attn_varlen_fwd(inputs(), view(out, kDv), TensorView(lse.data(), DType::kF32, {s, h}));
  }
  TensorView view(std::vector<uint16_t>& x, int d) { return TensorView(x.data(), DType::kBF16, {s, h, d}); }
  flash_mla::VarlenInputs inputs() {
    flash_mla::VarlenInputs in;
    in.q = view(q, kDqk);
    in.k = view(k, kDqk);
    in.v = view(v, kDv);
    in.cu_seqlens_qo = TensorView(cu.data(), DType::kI32, {2});
    in.cu_seqlens_kv = in.cu_seqlens_qo;
    in.max_seqlen_qo = in.max_seqlen_kv = s;
    in.causal = causal;
    return in;
  }
  void run_ours() {
    flash_mla::flash_attn_varlen_bwd(inputs(), view(out, kDv), TensorView(lse.data(), DType::kF32, {s, h}),
                                     view(dout, kDv), view(dq, kDqk), view(dk, kDqk), view(dv, kDv));
  }
  // The usual FlashAttention-2 convention: the backward counts 2.5x the forward's flops.
  double flops() const {
    const double pairs = causal ? double(s) * (s + 1) / 2 : double(s) * s;
    return 2.5 * 2.0 * pairs * h * (kDqk + kDv);
  }

  double at(const std::vector<uint16_t>& x, int tok, int head, int d, int c) const {
    return bf16_to_f32(x[(size_t(tok) * h + size_t(head)) * size_t(d) + size_t(c)]);
  }
  int visible(int row) const { return causal ? row + 1 : s; }
  // Worst error over sampled gradients, in units of 2% of the largest reference value of each sample set
  // (dq rows: float64 softmax; dk/dv keys: the forward's lse and delta = dO . out, as the kernel's inputs).
  double check(const std::vector<uint16_t>& gq, const std::vector<uint16_t>& gk,
               const std::vector<uint16_t>& gv) const {
    double worst = 0;
    auto score = [&](const std::vector<double>& got, const std::vector<double>& ref) {
      double top = 1e-30, err = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        top = std::max(top, std::abs(ref[i]));
        err = std::max(err, std::abs(got[i] - ref[i]));
        if (!std::isfinite(got[i])) err = INFINITY;
      }
      worst = std::max(worst, err / (0.02 * top));
    };
    auto dot = [&](const std::vector<uint16_t>& a, int ta, int ha, const std::vector<uint16_t>& b, int tb, int hb,
                   int d) {
      double acc = 0;
      for (int c = 0; c < d; ++c) acc += at(a, ta, ha, d, c) * at(b, tb, hb, d, c);
      return acc;
    };
    for (int sample = 0; sample < 4; ++sample) {
      const int row = (sample * 389 + 7) % s, head = (sample * 5) % h, n = visible(row);
      std::vector<double> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n)), ref(kDqk, 0.0), got(kDqk);
      double mx = -INFINITY, sum = 0, delta = 0;
      for (int t = 0; t < n; ++t) {
        p[size_t(t)] = dot(q, row, head, k, t, head, kDqk) * scale;
        dp[size_t(t)] = dot(dout, row, head, v, t, head, kDv);
        mx = std::max(mx, p[size_t(t)]);
      }
      for (int t = 0; t < n; ++t) sum += std::exp(p[size_t(t)] - mx);
      for (int t = 0; t < n; ++t) delta += (p[size_t(t)] = std::exp(p[size_t(t)] - mx) / sum) * dp[size_t(t)];
      for (int t = 0; t < n; ++t)
        for (int c = 0; c < kDqk; ++c)
          ref[size_t(c)] += scale * p[size_t(t)] * (dp[size_t(t)] - delta) * at(k, t, head, kDqk, c);
      for (int c = 0; c < kDqk; ++c) got[size_t(c)] = at(gq, row, head, kDqk, c);
      score(got, ref);
    }
    for (int sample = 0; sample < 3; ++sample) {
      const int key = (sample * 617 + 3) % s, head = (sample * 3 + 1) % h;
      std::vector<double> rk(kDqk, 0.0), rv(kDv, 0.0), gotk(kDqk), gotv(kDv);
      for (int row = 0; row < s; ++row) {
        if (key >= visible(row)) continue;
        const double p = std::exp(dot(q, row, head, k, key, head, kDqk) * scale - lse[size_t(row) * h + size_t(head)]);
        const double ds = p * (dot(dout, row, head, v, key, head, kDv) - dot(dout, row, head, out, row, head, kDv));
        for (int c = 0; c < kDqk; ++c) rk[size_t(c)] += scale * ds * at(q, row, head, kDqk, c);
        for (int c = 0; c < kDv; ++c) rv[size_t(c)] += p * at(dout, row, head, kDv, c);
      }
      for (int c = 0; c < kDqk; ++c) gotk[size_t(c)] = at(gk, key, head, kDqk, c);
      for (int c = 0; c < kDv; ++c) gotv[size_t(c)] = at(gv, key, head, kDv, c);
      score(gotk, rk);
      score(gotv, rv);
    }
    return worst;
  }
};

// The peer: per head, gather Q, K, V, dO (and their transposes) with plain loops, then oneDNN bf16
// matmuls S = Q K^T and dP = dO V^T (bf16 out), P and dS = P (dP - rowsum(dO * out)) in fp32 loops
// (causal mask applied), and dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K as matmuls over the
// materialised (transposed) P and dS.
class FmhaPeer {
 public:
  explicit FmhaPeer(FmhaProblem& p)
      : p_(p),
        s_mm_(p.s, p.s, kDqk),
        dp_mm_(p.s, p.s, kDv),
        dv_mm_(p.s, kDv, p.s),
        dk_mm_(p.s, kDqk, p.s),
        dq_mm_(p.s, kDqk, p.s) {
    const size_t n = size_t(p.s);
    for (auto* b : {&q_, &k_, &qt_, &kt_}) b->resize(n * kDqk);
    for (auto* b : {&v_, &o_, &ot_}) b->resize(n * kDv);
    for (auto* b : {&sc_, &dps_, &pb_, &pt_, &ds_, &dst_}) b->resize(n * n);
    for (auto* b : {&gq_, &gk_}) b->resize(n * kDqk);
    gv_.resize(n * kDv);
    delta_.resize(n);
  }

  void run() {
    const int s = p_.s, h = p_.h;
    for (int head = 0; head < h; ++head) {
      OnednnMatmul::parallel_for(s, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          for (int c = 0; c < kDqk; ++c) {
            q_[size_t(t * kDqk + c)] = qt_[size_t(c * s + t)] = p_.q[(size_t(t) * h + size_t(head)) * kDqk + size_t(c)];
            k_[size_t(t * kDqk + c)] = kt_[size_t(c * s + t)] = p_.k[(size_t(t) * h + size_t(head)) * kDqk + size_t(c)];
          }
          double d = 0;
          for (int c = 0; c < kDv; ++c) {
            const size_t src = (size_t(t) * h + size_t(head)) * kDv + size_t(c);
            v_[size_t(t * kDv + c)] = p_.v[src];
            o_[size_t(t * kDv + c)] = ot_[size_t(c * s + t)] = p_.dout[src];
            d += double(bf16_to_f32(p_.dout[src])) * bf16_to_f32(p_.out[src]);
          }
          delta_[size_t(t)] = float(d);
        }
      });
      s_mm_.run(q_.data(), k_.data(), sc_.data());
      dp_mm_.run(o_.data(), v_.data(), dps_.data());
      const float scale = float(p_.scale);
      OnednnMatmul::parallel_for(s, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const float lse = p_.lse[size_t(r) * h + size_t(head)];
          const int64_t vis = p_.visible(int(r));
          for (int64_t t = 0; t < s; ++t) {
            const size_t i = size_t(r * s + t);
            const float pr = t < vis ? std::exp(bf16_to_f32(sc_[i]) * scale - lse) : 0.0f;
            const float ds = pr * (bf16_to_f32(dps_[i]) - delta_[size_t(r)]) * scale;
            pb_[i] = pt_[size_t(t * s + r)] = f32_to_bf16(pr);
            ds_[i] = dst_[size_t(t * s + r)] = f32_to_bf16(ds);
          }
        }
      });
      dv_mm_.run(pt_.data(), ot_.data(), gv_.data());
      dk_mm_.run(dst_.data(), qt_.data(), gk_.data());
      dq_mm_.run(ds_.data(), kt_.data(), gq_.data());
      OnednnMatmul::parallel_for(s, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          std::copy_n(&gq_[size_t(t * kDqk)], kDqk, &p_.dq[(size_t(t) * h + size_t(head)) * kDqk]);
          std::copy_n(&gk_[size_t(t * kDqk)], kDqk, &p_.dk[(size_t(t) * h + size_t(head)) * kDqk]);
          std::copy_n(&gv_[size_t(t * kDv)], kDv, &p_.dv[(size_t(t) * h + size_t(head)) * kDv]);
        }
      });
    }
  }

 private:
  FmhaProblem& p_;
  OnednnMatmul s_mm_, dp_mm_, dv_mm_, dk_mm_, dq_mm_;
  std::vector<uint16_t> q_, k_, v_, o_, qt_, kt_, ot_, sc_, dps_, pb_, pt_, ds_, dst_, gq_, gk_, gv_;
  std::vector<float> delta_;
};

void run_case(const FmhaCase& c, const MachineLimits& lim, Row* row) {
  FmhaProblem p(c.seq, c.heads, c.causal);
  p.run_ours();
  row->check_error = p.check(p.dq, p.dk, p.dv);
  if (!(row->check_error <= 1.0)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "wrong result: check error %.3g x tolerance", row->check_error);
    row->status = buf;
    return;
  }
  const double ms = time_median([&](int64_t) { p.run_ours(); }).median_ms;
  row->time_ms = ms;
  row->gflops = p.flops() / (ms * 1e-3) * 1e-9;
  set_bf16_peak_pct(row, lim);
  const GemmCeilings ceilings = fmha_bwd_gemm_ceilings(p.s, kDqk, kDv);
  if (row->limit_value > 0) {
    row->pct_ceiling = 100.0 * ceilings.tessera_gflops / row->limit_value;
    row->pct_peer_ceiling = 100.0 * ceilings.onednn_gflops / row->limit_value;
  }
  if (!OnednnMatmul::available()) return;
  row->peer = "naive+" + OnednnMatmul::label();
  try {
    FmhaPeer peer(p);
    peer.run();
    if (!(p.check(p.dq, p.dk, p.dv) <= 4.0)) {
      row->peer += " (wrong result)";
    } else {
      row->peer_time_ms = time_median([&](int64_t) { peer.run(); }).median_ms;
      row->peer_ratio = row->peer_time_ms / ms;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[bench attention] peer failed on fmha_bwd: %s\n", e.what());
  }
  settle_threads();
}

}  // namespace

std::vector<Row> run_fmha_bwd_bench(const Options& options, const MachineLimits& limits) {
  OnednnMatmul::set_threads(options.threads);
  std::vector<Row> rows;
  int index = 0;
  for (FmhaCase c : kCases) {
    c.seq = int(scaled_size(c.seq, options.quick_scale, 64, 128));
    Row row;
    row.component = "attention";
    row.op = c.causal ? "fmha_bwd_causal" : "fmha_bwd";
    row.m = c.seq;
    row.n = c.heads;
    row.k = c.seq;
    std::fprintf(stderr, "[bench attention fmha_bwd %d/%d] seq=%d h=%d causal=%d\n", ++index,
                 int(sizeof(kCases) / sizeof(kCases[0])), c.seq, c.heads, int(c.causal));
    try {
      run_case(c, limits, &row);
    } catch (const std::exception& e) {
      row.status = std::string("error: ") + e.what();
    }
    rows.push_back(row);
  }
  return rows;
}

// Each row against its GEMM ceiling (pct_ceiling: the ceiling's rate over the same limit figure).
void print_fmha_bwd_summary(std::FILE* out, const std::vector<Row>& rows) {
  bool any = false;
  for (const Row& r : rows) {
    if (r.op.rfind("fmha_bwd", 0) != 0 || !r.ok() || !(r.pct_ceiling > 0) || !(r.limit_value > 0)) continue;
    if (!any)
      std::fprintf(out,
                   "\nFMHA backward against the GEMM ceiling (tessera's bf16 GEMM on one head's five products; "
                   "oneDNN's on the same products):\n");
    any = true;
    const double ceiling = r.pct_ceiling * r.limit_value / 100.0;
    std::fprintf(out,
                 "  %-16s %8.1f GFLOP/s  GEMM ceiling %8.1f GFLOP/s (%s of the limit; oneDNN's %s)  %s of the "
                 "ceiling\n",
                 r.op.c_str(), r.gflops, ceiling, format_pct(r.pct_ceiling).c_str(),
                 format_pct(r.pct_peer_ceiling).c_str(), format_pct(100.0 * r.gflops / ceiling).c_str());
  }
}

}  // namespace tessera::bench
