// One decode step of DeepSeek sparse attention (V3.2) with tessera's C++ API, checked against float64:
//
//   indexer q/k (FP8, paged)  -- attention::fp8_fp4_paged_mqa_logits -->  logits [b, max_len]
//   logits                    -- select::topk(2048, end = len) -->         positions (-1 past short contexts)
//   positions                 -- block table -->                           flat slots of the paged caches
//   slots + FP8 MLA cache     -- flash_mla::flash_mla_with_kvcache -->     attention output [b, 1, h, 512]
//
// Checks: logits against float64 over the dequantised FP8 operands; the top-k selection exactly (distinct
// positions below the context length, min(selected) >= max(unselected) on the computed logits); the slot
// mapping exactly; the attention against float64 over the selected tokens (spec tolerances); the whole
// chain against a float64 chain. Exit status 0 when everything passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"
#include "tessera/flash_mla.h"
#include "tessera/mqa_logits.h"
#include "tessera/select.h"

using namespace tessera;

namespace {

constexpr int kBlock = 64, kTopk = 2048, kIndexHeads = 64, kIndexDim = 128, kMlaHeads = 64, kDqk = 576, kDv = 512;

struct Step {
  std::vector<int32_t> lens, block_table;
  int64_t max_blocks = 0, num_blocks = 0, max_len = 0;
  std::vector<uint8_t> index_cache, index_q, mla_cache;  // index_cache: per page 64*128 e4m3, then 64 fp32
  std::vector<float> weights;
  std::vector<uint16_t> mla_q;
  int b() const { return int(lens.size()); }
};

Step make_inputs(std::mt19937_64& gen, std::vector<int32_t> lens) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform(0, 1);
  Step s;
  s.lens = std::move(lens);
  for (int32_t n : s.lens) {
    s.num_blocks += (n + kBlock - 1) / kBlock;
    s.max_blocks = std::max<int64_t>(s.max_blocks, (n + kBlock - 1) / kBlock + 1);
    s.max_len = std::max<int64_t>(s.max_len, n);
  }
  s.num_blocks += 3;
  std::vector<int32_t> ids(size_t(s.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), gen);
  s.block_table.assign(size_t(s.b() * s.max_blocks), -1);  // unused entries are never read
  for (int i = 0, next = 0; i < s.b(); ++i)
    for (int j = 0; j < (s.lens[size_t(i)] + kBlock - 1) / kBlock; ++j)
      s.block_table[size_t(i * s.max_blocks + j)] = ids[size_t(next++)];
  // Indexer keys: e4m3 with one fp32 scale (amax / 448) per token.
  const int64_t page = kBlock * (kIndexDim + 4);
  s.index_cache.assign(size_t(s.num_blocks * page), 0);
  std::vector<float> key(kIndexDim);
  for (int64_t blk = 0; blk < s.num_blocks; ++blk)
    for (int t = 0; t < kBlock; ++t) {
      float amax = 0;
      for (float& x : key) amax = std::max(amax, std::fabs(x = normal(gen)));
      const float scale = amax / 448;
      uint8_t* values = s.index_cache.data() + blk * page + t * kIndexDim;
      for (int d = 0; d < kIndexDim; ++d) values[d] = f32_to_e4m3_sat(key[size_t(d)] / scale);
      std::memcpy(s.index_cache.data() + blk * page + kBlock * kIndexDim + t * 4, &scale, 4);
    }
  for (int i = 0; i < s.b() * kIndexHeads * kIndexDim; ++i) s.index_q.push_back(f32_to_e4m3_sat(normal(gen)));
  for (int i = 0; i < s.b() * kIndexHeads; ++i) s.weights.push_back(uniform(gen));
  // The MLA latent cache in the V32 FP8 layout, and the absorbed MLA queries.
  std::vector<uint16_t> latent(size_t(s.num_blocks * kBlock * kDqk));
  for (uint16_t& x : latent) x = f32_to_bf16(normal(gen));
  s.mla_cache.assign(size_t(s.num_blocks * kBlock * 656), 0);
  flash_mla::quantize_k_cache(TensorView(latent.data(), DType::kBF16, {s.num_blocks, kBlock, 1, kDqk}),
                              flash_mla::KvCacheLayout::kV32,
                              TensorView(s.mla_cache.data(), DType::kU8, {s.num_blocks, kBlock, 1, 656}));
  for (int i = 0; i < s.b() * kMlaHeads * kDqk; ++i) s.mla_q.push_back(f32_to_bf16(normal(gen)));
  return s;
}

int32_t slot_of(const Step& s, int i, int32_t pos) {
  return pos < 0 ? -1 : s.block_table[size_t(i * s.max_blocks + pos / kBlock)] * kBlock + pos % kBlock;
}

struct Results {
  std::vector<float> logits, out_lse;
  std::vector<int32_t> positions, slots;
  std::vector<uint16_t> out;
};

Results decode_step(const Step& s) {
  const int b = s.b();
  Results r;
  const TensorView lens(const_cast<int32_t*>(s.lens.data()), DType::kI32, {b});
  const TensorView block_table(const_cast<int32_t*>(s.block_table.data()), DType::kI32, {b, s.max_blocks});
  const int sms = num_threads();
  std::vector<int32_t> schedule(size_t(2 * (sms + 1)));
  const TensorView sched(schedule.data(), DType::kI32, {sms + 1, 2});
  attention::get_paged_mqa_logits_metadata(lens, kBlock, sms, sched);
  r.logits.assign(size_t(b * s.max_len), 0);
  attention::fp8_fp4_paged_mqa_logits(
      TensorView(const_cast<uint8_t*>(s.index_q.data()), DType::kF8E4M3, {b, 1, kIndexHeads, kIndexDim}), nullptr,
      TensorView(const_cast<uint8_t*>(s.index_cache.data()), DType::kU8, {s.num_blocks, kBlock, 1, kIndexDim + 4}),
      TensorView(const_cast<float*>(s.weights.data()), DType::kF32, {b, kIndexHeads}), lens, block_table, sched,
      TensorView(r.logits.data(), DType::kF32, {b, s.max_len}), s.max_len, true);
  r.positions.assign(size_t(b * kTopk), 0);
  select::TopkOptions opt;
  opt.idx_oob_fill_value = -1;
  const TensorView positions(r.positions.data(), DType::kI32, {b, kTopk});
  select::topk(TensorView(r.logits.data(), DType::kF32, {b, s.max_len}), kTopk, nullptr, &lens, nullptr, positions,
               nullptr, opt);
  for (int i = 0; i < b; ++i)
    for (int j = 0; j < kTopk; ++j) r.slots.push_back(slot_of(s, i, r.positions[size_t(i * kTopk + j)]));
  const TensorView indices(r.slots.data(), DType::kI32, {b, 1, kTopk});
  flash_mla::KvcacheInputs in;
  in.q = TensorView(const_cast<uint16_t*>(s.mla_q.data()), DType::kBF16, {b, 1, kMlaHeads, kDqk});
  in.k_cache = TensorView(const_cast<uint8_t*>(s.mla_cache.data()), DType::kU8, {s.num_blocks, kBlock, 1, 656});
  in.is_fp8_kvcache = true;
  in.indices = &indices;
  r.out.assign(size_t(b * kMlaHeads * kDv), 0);
  r.out_lse.assign(size_t(b * kMlaHeads), 0);
  flash_mla::SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(in, meta, TensorView(r.out.data(), DType::kBF16, {b, 1, kMlaHeads, kDv}),
                                    TensorView(r.out_lse.data(), DType::kF32, {b, kMlaHeads, 1}));
  return r;
}

// ---- float64 references ----

double reference_logit(const Step& s, int i, int32_t pos) {
  const int64_t page = kBlock * (kIndexDim + 4), blk = s.block_table[size_t(i * s.max_blocks + pos / kBlock)];
  const uint8_t* values = s.index_cache.data() + blk * page + (pos % kBlock) * kIndexDim;
  float scale;
  std::memcpy(&scale, s.index_cache.data() + blk * page + kBlock * kIndexDim + (pos % kBlock) * 4, 4);
  double logit = 0;
  for (int h = 0; h < kIndexHeads; ++h) {
    double dot = 0;
    for (int d = 0; d < kIndexDim; ++d)
      dot += double(e4m3_to_f32(s.index_q[size_t((i * kIndexHeads + h) * kIndexDim + d)])) * e4m3_to_f32(values[d]);
    logit += double(s.weights[size_t(i * kIndexHeads + h)]) * std::max(dot * scale, 0.0);
  }
  return logit;
}

// Dequantised V32 row of a slot: e4m3 -> fp32 * tile scale -> bf16; RoPE copied.
std::vector<double> mla_row(const Step& s, int32_t slot) {
  const uint8_t* tok = s.mla_cache.data() + int64_t(slot) * 656;
  float scales[4];
  std::memcpy(scales, tok + 512, 16);
  std::vector<double> row(kDqk);
  for (int c = 0; c < 512; ++c) row[size_t(c)] = bf16_to_f32(f32_to_bf16(e4m3_to_f32(tok[c]) * scales[c / 128]));
  for (int c = 0; c < 64; ++c) {
    uint16_t h;
    std::memcpy(&h, tok + 528 + 2 * c, 2);
    row[size_t(512 + c)] = bf16_to_f32(h);
  }
  return row;
}

// max over heads and columns of min(|err| / 1e-3, |err| / (2.01/128 * (|ref| + 1e-6))): <= 1 passes.
double attention_error(const Step& s, const Results& r, int i, const std::vector<int32_t>& slots) {
  std::vector<std::vector<double>> rows;
  for (int32_t slot : slots)
    if (slot >= 0) rows.push_back(mla_row(s, slot));
  double worst = 0;
  for (int h = 0; h < kMlaHeads; ++h) {
    const uint16_t* q = s.mla_q.data() + (i * kMlaHeads + h) * kDqk;
    std::vector<double> score(rows.size()), out(kDv, 0.0);
    double mx = -INFINITY, sum = 0;
    for (size_t t = 0; t < rows.size(); ++t) {
      double dot = 0;
      for (int c = 0; c < kDqk; ++c) dot += double(bf16_to_f32(q[c])) * rows[t][size_t(c)];
      mx = std::max(mx, score[t] = dot / std::sqrt(double(kDqk)));
    }
    for (size_t t = 0; t < rows.size(); ++t) {
      const double p = std::exp(score[t] - mx);
      sum += p;
      for (int c = 0; c < kDv; ++c) out[size_t(c)] += p * rows[t][size_t(c)];
    }
    for (int c = 0; c < kDv; ++c) {
      const double ref = out[size_t(c)] / sum, got = bf16_to_f32(r.out[size_t((i * kMlaHeads + h) * kDv + c)]);
      const double err = std::fabs(got - ref);
      worst = std::max(worst, std::min(err / 1e-3, err / (2.01 / 128 * (std::fabs(ref) + 1e-6))));
    }
    const double lse_err = std::fabs(r.out_lse[size_t(i * kMlaHeads + h)] - (mx + std::log(sum)));
    worst = std::max(worst, std::min(lse_err / 1e-6, lse_err / (8.01 / 65536 * std::fabs(mx + std::log(sum)))));
  }
  return worst;
}

}  // namespace

int main() {
  std::mt19937_64 gen(2024);
  const Step s = make_inputs(gen, {3000, 1700});  // the second context is shorter than the top-k
  const Results r = decode_step(s);
  bool ok = true;

  double logit_err = 0, logit_max = 0;
  bool cleaned = true;
  std::vector<std::vector<double>> ref_logits(size_t(s.b()));
  for (int i = 0; i < s.b(); ++i) {
    for (int32_t p = 0; p < s.max_len; ++p) {
      const float got = r.logits[size_t(i * s.max_len + p)];
      if (p >= s.lens[size_t(i)]) {
        cleaned &= std::isinf(got) && got < 0;
        continue;
      }
      ref_logits[size_t(i)].push_back(reference_logit(s, i, p));
      logit_err = std::max(logit_err, std::fabs(got - ref_logits[size_t(i)].back()));
      logit_max = std::max(logit_max, std::fabs(ref_logits[size_t(i)].back()));
    }
  }
  const bool logits_ok = cleaned && logit_err <= 1e-5 * logit_max + 1e-5;
  std::printf("indexer logits vs float64: %s (max |err| %.3g, max |logit| %.3g)\n", logits_ok ? "ok" : "FAILED",
              logit_err, logit_max);
  ok &= logits_ok;

  bool topk_ok = true, slots_ok = true, attn_ok = true, chain_ok = true;
  for (int i = 0; i < s.b(); ++i) {
    const int n = s.lens[size_t(i)], want = std::min(n, kTopk);
    const int32_t* pos = r.positions.data() + i * kTopk;
    std::vector<char> chosen(size_t(n), 0);
    float min_sel = INFINITY, max_rest = -INFINITY;
    for (int j = 0; j < kTopk; ++j) {
      const bool real = j < want;
      topk_ok &= real ? (pos[j] >= 0 && pos[j] < n && !chosen[size_t(pos[j])]) : pos[j] == -1;
      if (real && pos[j] >= 0 && pos[j] < n) {
        chosen[size_t(pos[j])] = 1;
        min_sel = std::min(min_sel, r.logits[size_t(i * s.max_len + pos[j])]);
      }
      slots_ok &= r.slots[size_t(i * kTopk + j)] == slot_of(s, i, pos[j]);
    }
    for (int p = 0; p < n; ++p)
      if (!chosen[size_t(p)]) max_rest = std::max(max_rest, r.logits[size_t(i * s.max_len + p)]);
    topk_ok &= min_sel >= max_rest;
    const std::vector<int32_t> slots(r.slots.begin() + i * kTopk, r.slots.begin() + (i + 1) * kTopk);
    attn_ok &= attention_error(s, r, i, slots) <= 1.0;
    // The float64 chain: the float64 logits' own top-k (ties to the lower position).
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return ref_logits[size_t(i)][size_t(a)] > ref_logits[size_t(i)][size_t(b)];
    });
    std::vector<int32_t> ref_slots(kTopk, -1);
    for (int j = 0; j < want; ++j) ref_slots[size_t(j)] = slot_of(s, i, order[size_t(j)]);
    chain_ok &= attention_error(s, r, i, ref_slots) <= 1.0;
  }
  std::printf("top-k %d: %s\nblock-table mapping: %s\n", kTopk, topk_ok ? "ok" : "FAILED", slots_ok ? "ok" : "FAILED");
  std::printf("sparse MLA decode vs float64 over the selected tokens: %s\n", attn_ok ? "ok" : "FAILED");
  std::printf("whole chain vs the float64 chain: %s\n", chain_ok ? "ok" : "FAILED");
  ok &= topk_ok && slots_ok && attn_ok && chain_ok;
  std::printf("decode step: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
