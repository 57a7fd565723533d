// `tessera bench gemm`: our dense GEMMs against oneDNN (bf16), dequantise+oneDNN (fp8) and OpenBLAS
// sgemm, on DeepGEMM's shapes. Per (op, shape) the weights B are made once; per M the activations.
// Every result (ours and the peers') is verified before it is timed.
#include "gemm/gemm_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "gemm/gemm_cases.h"
#include "gemm/gemm_check.h"
#include "gemm/gemm_operands.h"
#include "gemm/kernel_ceiling_row.h"
#include "limit_pct.h"
#include "peers/fp8_dequant.h"
#include "peers/onednn_matmul.h"
#include "peers/openblas_sgemm.h"
#include "tessera/gemm.h"
#include "timing.h"

namespace tessera::bench {
namespace {

// Check tolerances in bf16 half-ulps of the output (see GemmCheck::error). Peers that round their
// inputs to bf16 first (dequantise+oneDNN) get twice the room.
constexpr double kTolOurs = 8, kTolBf16Inputs = 16;
constexpr uint16_t kBf16NaN = 0x7FC0;

bool is_fp8(const std::string& op) {
  return op == "fp8_gemm_nt";
}

// Copies of B to rotate through so decode rows read B from DRAM: together more than 4x L3. (2x L3
// was not enough here: AMD's L3 is a victim cache that keeps part of a re-read set, so one 59 MB
// bf16 B re-read every call streamed at 126% of the measured DRAM read bandwidth.)
constexpr int64_t kRotationOverL3 = 4;
int rotation_count(int64_t bytes, int64_t l3_bytes) {
  return bytes <= kRotationOverL3 * l3_bytes ? int(kRotationOverL3 * l3_bytes / bytes) + 1 : 1;
}

struct Weights {
  std::vector<GemmOperand> copies;     // copies[0] is the original
  std::vector<AlignedPtr<float>> f32;  // fp32 effective values for OpenBLAS (same rotation rule)
};

class GemmBench {
 public:
  GemmBench(const Options& options, const MachineLimits& limits) : opt_(options), lim_(limits) {
    OnednnMatmul::set_threads(options.threads);
    openblas_set_threads(options.threads);
  }

  std::vector<Row> run() {
    int per_op = 0;
    for (const GemmShapeNK& s : gemm_nk_shapes())
      for (int64_t m : gemm_ms()) per_op += gemm_case_selected(m, s.n, s.k, opt_.full, opt_.quick_scale);
    const int total = per_op * int(gemm_ops().size());
    int index = 0;
    for (const std::string& op : gemm_ops())
      for (const GemmShapeNK& s : gemm_nk_shapes()) run_shape(op, s, total, &index);
    add_kernel_ceiling_row(lim_, &rows_);
    return std::move(rows_);
  }

 private:
  void run_shape(const std::string& op, const GemmShapeNK& s, int total, int* index) {
    std::vector<int64_t> ms;
    for (int64_t m : gemm_ms())
      if (gemm_case_selected(m, s.n, s.k, opt_.full, opt_.quick_scale)) ms.push_back(m);
    if (ms.empty()) return;
    const uint64_t seed = uint64_t(s.n) * 1000003u + uint64_t(s.k) + (is_fp8(op) ? 77 : 0);

    Weights w;
    w.copies.push_back(is_fp8(op) ? random_fp8_operand(s.n, s.k, 128, seed) : random_bf16_operand(s.n, s.k, seed));
    const GemmCheck check(w.copies[0], seed ^ 0xC0FFEE);
    const bool decode = ms.front() <= kGemmDecodeMaxM;
    const int copies = decode ? rotation_count(w.copies[0].bytes(), lim_.l3_bytes) : 1;
    for (int c = 1; c < copies; ++c) w.copies.push_back(clone_operand(w.copies[0]));
    if (openblas_available()) {
      w.f32.push_back(operand_to_f32(w.copies[0]));
      const int f32_copies = decode ? rotation_count(s.n * s.k * 4, lim_.l3_bytes) : 1;
      for (int c = 1; c < f32_copies; ++c) {
        w.f32.push_back(aligned_array<float>(size_t(s.n * s.k)));
        std::copy_n(w.f32[0].get(), s.n * s.k, w.f32.back().get());
      }
    }

    for (int64_t m : ms) {
      ++*index;
      std::fprintf(stderr, "[bench gemm %d/%d] %s m=%lld n=%lld k=%lld\n", *index, total, op.c_str(), (long long)m,
                   (long long)s.n, (long long)s.k);
      Row row;
      row.component = "gemm";
      row.op = op;
      row.m = m;
      row.n = s.n;
      row.k = s.k;
      try {
        run_case(w, check, m <= kGemmDecodeMaxM, seed + uint64_t(m), &row);
      } catch (const std::exception& e) {
        row.status = std::string("error: ") + e.what();
        std::fprintf(stderr, "[bench gemm] %s m=%lld n=%lld k=%lld FAILED: %s\n", op.c_str(), (long long)m,
                     (long long)s.n, (long long)s.k, row.status.c_str());
      }
      rows_.push_back(row);
    }
  }

  // Verifies one implementation's output; returns false (and says so on stderr) when it is wrong.
  static bool verified(const char* who, const Row& row, double error) {
    if (error <= 1.0) return true;
    std::fprintf(stderr, "[bench gemm] WRONG RESULT from %s: %s m=%lld n=%lld k=%lld, check error %.3g x tolerance\n",
                 who, row.op.c_str(), (long long)row.m, (long long)row.n, (long long)row.k, error);
    return false;
  }

  // Runs one peer (its exceptions and wrong results cost only its own columns).
  static void run_peer(const char* who, const Row& row, const std::function<void()>& body) {
    try {
      body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[bench gemm] %s failed on %s m=%lld n=%lld k=%lld: %s\n", who, row.op.c_str(),
                   (long long)row.m, (long long)row.n, (long long)row.k, e.what());
    }
    settle_threads();
  }

  void run_case(const Weights& w, const GemmCheck& check, bool decode, uint64_t seed, Row* row) {
    const int64_t m = row->m, n = row->n, k = row->k;
    const bool fp8 = is_fp8(row->op);
    const GemmOperand a = fp8 ? random_fp8_operand(m, k, 1, seed) : random_bf16_operand(m, k, seed);
    const GemmOperand& b0 = w.copies[0];
    const int copies = decode ? int(w.copies.size()) : 1;
    auto d = aligned_array<uint16_t>(size_t(m * n));
    const TensorView d_view(d.get(), DType::kBF16, {m, n});

    // ---- ours ----
    auto ours = [&](int64_t i) {
      const GemmOperand& b = w.copies[size_t(i % copies)];
      if (fp8) {
        gemm::fp8_fp4_gemm_nt({a.data_view(), a.scale_view()}, {b.data_view(), b.scale_view()}, d_view);
      } else {
        gemm::bf16_gemm_nt(a.data_view(), b.data_view(), d_view);
      }
    };
    std::fill_n(d.get(), m * n, kBf16NaN);  // poisoned: an element left unwritten fails the check
    ours(0);
    row->check_error = check.error(a, d.get(), DType::kBF16, kTolOurs);
    if (!verified("tessera", *row, row->check_error)) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "wrong result: check error %.3g x tolerance", row->check_error);
      row->status = buf;
      return;
    }
    const double ms = time_median(ours).median_ms;
    const double seconds = ms * 1e-3;
    row->time_ms = ms;
    row->gflops = 2.0 * double(m) * double(n) * double(k) / seconds * 1e-9;
    row->gbps = double(a.bytes() + b0.bytes() + 2 * m * n) / seconds * 1e-9;
    if (decode) {
      set_dram_read_pct(row, double(b0.bytes()) / seconds * 1e-9, lim_);
      set_decode_ceiling(row, 2.0 * double(m) * double(n) * double(k) / double(b0.bytes()), lim_);
    } else {
      set_bf16_peak_pct(row, lim_);
    }

    // ---- oneDNN (bf16), or dequantise + oneDNN (fp8) ----
    if (OnednnMatmul::available()) {
      row->peer = fp8 ? "dequant+" + OnednnMatmul::label() : OnednnMatmul::label();
      run_peer(row->peer.c_str(), *row, [&] {
        OnednnMatmul mm(m, n, k);
        AlignedPtr<uint16_t> a_bf16, b_bf16;
        if (fp8) {
          a_bf16 = aligned_array<uint16_t>(size_t(m * k));
          b_bf16 = aligned_array<uint16_t>(size_t(n * k));
        }
        auto peer = [&](int64_t i) {
          const GemmOperand& b = w.copies[size_t(i % copies)];
          if (fp8) {
            OnednnMatmul::parallel_for(
                m, [&](int64_t r0, int64_t r1) { dequantize_fp8_rows_to_bf16(a, r0, r1, a_bf16.get()); });
            OnednnMatmul::parallel_for(
                n, [&](int64_t r0, int64_t r1) { dequantize_fp8_rows_to_bf16(b, r0, r1, b_bf16.get()); });
            mm.run(a_bf16.get(), b_bf16.get(), d.get());
          } else {
            mm.run(a.data.get(), b.data.get(), d.get());
          }
        };
        std::fill_n(d.get(), m * n, kBf16NaN);
        peer(0);
        if (!verified(row->peer.c_str(), *row,
                      check.error(a, d.get(), DType::kBF16, fp8 ? kTolBf16Inputs : kTolOurs))) {
          row->peer += " (wrong result)";
          return;
        }
        row->peer_time_ms = time_median(peer).median_ms;
        row->peer_ratio = row->peer_time_ms / ms;
      });
    }

    // ---- OpenBLAS sgemm on fp32 copies ----
    if (openblas_available()) {
      run_peer("OpenBLAS", *row, [&] {
        const AlignedPtr<float> a_f32 = operand_to_f32(a);
        auto d_f32 = aligned_array<float>(size_t(m * n));
        const int f32_copies = decode ? int(w.f32.size()) : 1;
        auto blas = [&](int64_t i) {
          openblas_sgemm_nt(m, n, k, a_f32.get(), w.f32[size_t(i % f32_copies)].get(), d_f32.get());
        };
        std::fill_n(d_f32.get(), m * n, std::nanf(""));
        blas(0);
        if (!verified("OpenBLAS", *row, check.error(a, d_f32.get(), DType::kF32, kTolOurs))) return;
        row->openblas_time_ms = time_median(blas).median_ms;
        row->openblas_ratio = row->openblas_time_ms / ms;
      });
    }
  }

  const Options& opt_;
  const MachineLimits& lim_;
  std::vector<Row> rows_;
};

}  // namespace

std::vector<Row> run_gemm_bench(const Options& options, const MachineLimits& limits) {
  return GemmBench(options, limits).run();
}

}  // namespace tessera::bench
