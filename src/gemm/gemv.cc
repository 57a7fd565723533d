// Decode path (M <= 8, K-contiguous weights): the weights are streamed once at memory speed by the
// kernel set's GEMV. Work items are 16-column chunks of every problem of a batch; threads take equal,
// contiguous ranges of them (one parallel region for all MoE groups), and each thread converts the few
// activation rows of a problem for itself.
#include "gemm/gemv.h"

#include <algorithm>
#include <vector>

#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {
namespace {

constexpr int64_t kChunk = 16;
// Weights above this size cannot stay in the L2 caches between calls (2 x 1 MiB on the reference
// machine; decode weights normally stream from DRAM): the GEMV reads them in whole rows (GemvArgs).
constexpr int64_t kGemvStreamedBytes = int64_t(2) << 20;

// Scales of one problem in the layout the GEMV kernel reads: the activations' expanded to
// [groups][kGemvMaxM]; the weights' used in place when their K granularity is the common group, else
// re-indexed to one entry per common group.
struct GemvScales {
  std::vector<float> a, w;
  const float* w_data = nullptr;
  int64_t w_stride = 0;
};

GemvScales gemv_scales(const GemmProblem& p) {
  GemvScales s;
  if (p.group <= 0) return s;
  const int64_t groups = scale_groups(p);
  s.a.resize(size_t(groups * kGemvMaxM));
  expand_scales(p.sa, 0, groups, 0, p.m, s.a.data(), kGemvMaxM);
  if (p.sb.data && p.sb.g_div == 1) {
    s.w_data = p.sb.data;
    s.w_stride = p.sb.stride_g;
    return s;
  }
  // Packed UE8M0 or a coarser K granularity: one fp32 entry per common group and scale row.
  const int64_t rows = (p.n + p.sb.r_div - 1) / p.sb.r_div;
  s.w.resize(size_t(groups * rows));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < rows; ++r) s.w[size_t(g * rows + r)] = p.sb.at(g, r * p.sb.r_div);
  s.w_data = s.w.data();
  s.w_stride = rows;
  return s;
}

void run_chunks(const GemmProblem& p, const GemvScales& sc, cpu::GemvFn gemv, int64_t c0, int64_t c1) {
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  const int64_t n0 = c0 * kChunk, n1 = std::min(p.n, c1 * kChunk);
  // The kernel writes out[m * ldo + n] for absolute n; give it a buffer that starts at column n0.
  float* buf = static_cast<float*>(thread_scratch(6, size_t(p.m) * (n1 - n0) * sizeof(float)));
  cpu::GemvArgs g{};
  g.a = p.a.data;
  g.a_stride = p.m > 1 ? p.a.stride_r : 0;
  g.m = int(p.m);
  g.w = static_cast<const char*>(p.b.data) + n0 * p.b.stride_r * src_bytes(p.b);
  g.w_type = p.b.type;
  g.ldw = p.b.stride_r;
  g.k = p.k;
  g.group = p.group > 0 ? p.group : int(k_pad);
  g.a_scale = p.group > 0 ? sc.a.data() : nullptr;
  g.a_scale_stride = kGemvMaxM;
  // Weight rows passed start at n0; the kernel adds w_row0 before dividing by w_scale_rows.
  g.w_scale = sc.w_data;
  g.w_scale_stride = sc.w_stride;
  g.w_scale_rows = p.sb.r_div;
  g.w_row0 = n0;
  g.out = buf;
  g.ldo = n1 - n0;
  g.n0 = 0;
  g.n1 = n1 - n0;
  g.scratch = thread_scratch(5, size_t(kGemvMaxM) * k_pad * 4);  // GemvArgs: fp32 activations
  g.streamed = p.n * p.k * src_bytes(p.b) > kGemvStreamedBytes;
  gemv(g);
  finalize_tile(p, buf, n1 - n0, false, 0, p.m, n0, n1 - n0);
}

int64_t activation_group(const GemmProblem& p) {
  return int64_t(p.group) * p.sa.g_div;
}

// The FP4 kernels convert and scale 128 K-values per step. Activation scale groups narrower than that
// (per-32 UE8M0, as Mega MoE re-quantises) are folded into bf16 activations when every scale folds
// exactly: a power of two 2^e whose exponent keeps every e4m3 value times it a normal bf16
// (2^-9 * 2^e >= 2^-126 and 448 * 2^e < 2^128: -117 <= e <= 119); the kernel then runs unscaled.
bool folds_activation_scales(const GemmProblem& p) {
  return p.a.type == cpu::GemmSrcType::kE4M3 && scales_are_powers_of_two(p.sa, p.m, scale_groups(p), -117, 119);
}

// Every e4m3 code as bf16 bits (exact: 4 significant bits), and 0xFFFF for the codes whose value a
// power-of-two scale may move by its exponent field (not zero, not NaN).
struct E4m3Bf16Table {
  uint16_t bits[256];
  uint16_t scalable[256];
};
const E4m3Bf16Table& e4m3_bf16_table() {
  static const E4m3Bf16Table t = [] {
    E4m3Bf16Table r{};
    for (int b = 0; b < 256; ++b) {
      r.bits[b] = f32_to_bf16(e4m3_to_f32(uint8_t(b)));
      r.scalable[b] = (b & 0x7F) != 0 && (b & 0x7F) != 0x7F ? 0xFFFF : 0;
    }
    return r;
  }();
  return t;
}

// The FP4-weight kernel over chunks [c0, c1) of p; false if an exponent was out of its range. With
// `folded` (fold_activations), the kernel reads those bf16 rows unscaled instead of p's activations.
bool run_fp4_chunks(const GemmProblem& p, const std::vector<float>& a_scale, const std::vector<uint16_t>& folded,
                    cpu::GemvFp4Fn gemv, int64_t c0, int64_t c1) {
  const int64_t k_pad = (p.k + 127) / 128 * 128;
  const int64_t n0 = c0 * kChunk, n1 = std::min(p.n, c1 * kChunk);
  float* buf = static_cast<float*>(thread_scratch(6, size_t(p.m) * (n1 - n0) * sizeof(float)));
  cpu::GemvFp4Args g{};
  g.a = p.a.data;
  g.a_stride = p.m > 1 ? p.a.stride_r : 0;
  g.a_type = p.a.type;
  g.m = int(p.m);
  g.w = static_cast<const uint8_t*>(p.b.data) + n0 * p.b.stride_r;
  g.ldw = p.b.stride_r;
  g.k = p.k;
  g.w_exp = p.sb.ue8m0;
  g.exp_row_bytes = p.sb.row_bytes;
  g.exp_word_bytes = p.sb.word_bytes;
  g.w_row0 = n0;
  g.a_group = int(activation_group(p));
  g.a_scale = a_scale.data();
  g.a_scale_stride = kGemvMaxM;
  if (!folded.empty()) {
    g.a = folded.data();
    g.a_stride = p.m > 1 ? p.k : 0;
    g.a_type = cpu::GemmSrcType::kBF16;
    g.a_scale = nullptr;
  }
  g.out = buf;
  g.ldo = n1 - n0;
  g.n0 = 0;
  g.n1 = n1 - n0;
  g.scratch = thread_scratch(5, size_t(32) * k_pad);  // GemvFp4Args: 8 rows of fp32 activations
  if (!gemv(g)) return false;
  finalize_tile(p, buf, n1 - n0, false, 0, p.m, n0, n1 - n0);
  return true;
}

}  // namespace

// a[m][k] * scale(m, k) as bf16 rows of K values (exact: folds_activation_scales). The scale 2^e adds e
// to the exponent field of each nonzero finite value, which stays a normal bf16 for the exponents
// folds_activation_scales allows: the same bits as rounding e4m3_to_f32(a) * 2^e to bf16.
std::vector<uint16_t> fold_activations(const GemmProblem& p) {
  const E4m3Bf16Table& t = e4m3_bf16_table();
  const int64_t a_group = activation_group(p);
  std::vector<uint16_t> out(size_t(p.m * p.k));
  for (int64_t m = 0; m < p.m; ++m) {
    const uint8_t* row = static_cast<const uint8_t*>(p.a.data) + m * p.a.stride_r;
    for (int64_t k0 = 0; k0 < p.k; k0 += a_group) {
      const int exponent = int((f32_bits(p.sa.at((k0 / a_group) * p.sa.g_div, m)) >> 23) & 0xFF) - 127;
      const uint16_t add = uint16_t(uint32_t(exponent) << 7);  // modulo 2^16: a negative e subtracts
      for (int64_t k = k0; k < std::min(p.k, k0 + a_group); ++k) {
        const uint8_t b = row[k * p.a.stride_k];
        out[size_t(m * p.k + k)] = uint16_t(t.bits[b] + (t.scalable[b] & add));
      }
    }
  }
  return out;
}

const char* gemv_fp4_refusal(const GemmProblem& p) {
  if (p.m > kGemvMaxM) return "M > 8";
  if (p.b.type != cpu::GemmSrcType::kE2M1) return "weights are not FP4";
  if (p.b.stride_k != 1 || p.b.fp4_along_r) return "weights (B) are not packed along K";
  if (p.a.type != cpu::GemmSrcType::kE4M3 && p.a.type != cpu::GemmSrcType::kBF16) return "activations are not fp8/bf16";
  if (p.a.stride_k != 1 && p.m > 1) return "activations (A) are not K-contiguous";
  if (p.group <= 0) return "unscaled";
  if (!p.sb.ue8m0 || p.sb.r_div != 1 || p.group * p.sb.g_div != 32)
    return "weight scales are not packed UE8M0 per row and 32 K-values";
  // The kernel converts and scales 128 K-values per step: an activation scale must cover whole steps,
  // or fold into the activations.
  if (activation_group(p) % 128 != 0 && !folds_activation_scales(p))
    return "activation scale group is not a multiple of 128, and its scales do not fold exactly into bf16 "
           "activations (e4m3 with power-of-two scales do)";
  return nullptr;
}

std::vector<GemmProblem> run_gemv_fp4_batch(const GemmProblem* problems, int64_t count, cpu::GemvFp4Fn gemv) {
  std::vector<std::vector<float>> a_scales(static_cast<size_t>(count));
  std::vector<std::vector<uint16_t>> folded(static_cast<size_t>(count));
  std::vector<int64_t> first_chunk(static_cast<size_t>(count) + 1, 0);
  for (int64_t i = 0; i < count; ++i) {
    const GemmProblem& p = problems[i];
    const int64_t a_group = activation_group(p), groups = (p.k + a_group - 1) / a_group;
    if (a_group % 128 != 0) {
      folded[size_t(i)] = fold_activations(p);  // gemv_fp4_refusal accepted it: the scales fold exactly
    } else {
      a_scales[i].assign(size_t(groups * kGemvMaxM), 0.0f);
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t m = 0; m < p.m; ++m) a_scales[i][size_t(g * kGemvMaxM + m)] = p.sa.at(g * p.sa.g_div, m);
    }
    first_chunk[i + 1] = first_chunk[i] + (p.n + kChunk - 1) / kChunk;
  }
  std::vector<char> failed(static_cast<size_t>(count), 0);
  parallel_for(first_chunk[size_t(count)], [&](int64_t b, int64_t e) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t c0 = std::max(b, first_chunk[i]), c1 = std::min(e, first_chunk[i + 1]);
      if (c0 < c1 &&
          !run_fp4_chunks(problems[i], a_scales[i], folded[size_t(i)], gemv, c0 - first_chunk[i], c1 - first_chunk[i]))
        failed[size_t(i)] = 1;  // distinct threads only ever store 1
    }
  });
  std::vector<GemmProblem> redo;
  for (int64_t i = 0; i < count; ++i)
    if (failed[size_t(i)]) redo.push_back(problems[i]);
  return redo;
}

const char* gemv_refusal(const GemmProblem& p) {
  if (p.m > kGemvMaxM) return "M > 8";
  if (p.b.stride_k != 1) return "weights (B) are not K-contiguous";
  if (p.b.type != cpu::GemmSrcType::kBF16 && p.b.type != cpu::GemmSrcType::kE4M3) return "weights are not bf16/e4m3";
  if (p.a.type != p.b.type) return "activations and weights differ in type";
  if (p.a.stride_k != 1 && p.m > 1) return "activations (A) are not K-contiguous";
  if (p.group > 0 && p.group % 64 != 0) return "scale group is not a multiple of 64";
  return nullptr;
}

void run_gemv_batch(const GemmProblem* problems, int64_t count, cpu::GemvFn gemv) {
  std::vector<GemvScales> scales(static_cast<size_t>(count));
  std::vector<int64_t> first_chunk(static_cast<size_t>(count) + 1, 0);
  for (int64_t i = 0; i < count; ++i) {
    scales[i] = gemv_scales(problems[i]);
    first_chunk[i + 1] = first_chunk[i] + (problems[i].n + kChunk - 1) / kChunk;
  }
  const int64_t chunks = first_chunk[size_t(count)];
  parallel_for(chunks, [&](int64_t b, int64_t e) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t c0 = std::max(b, first_chunk[i]), c1 = std::min(e, first_chunk[i + 1]);
      if (c0 < c1) run_chunks(problems[i], scales[i], gemv, c0 - first_chunk[i], c1 - first_chunk[i]);
    }
  });
}

void run_gemv(const GemmProblem& p, cpu::GemvFn gemv) {
  run_gemv_batch(&p, 1, gemv);
}

}  // namespace tessera::gemm
