// The random problems of the MLA harness: dense paged decode, FP8 sparse decode, sparse prefill.
// Unused cache slots, unused block_table entries and unreferenced kv rows hold NaN (or garbage block
// ids), outputs start poisoned, and references are float64 over the exact bf16/dequantised inputs.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>

#include "attention/mla_harness.h"

namespace tessera::test {
namespace {

using flash_mla::KvCacheLayout;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void poison(Buffer* b) {
  const DType t = b->view.dtype;
  fill_poison(&b->bytes, t == DType::kF16 ? DType::kBF16 : t);  // 0x7FA5 is a NaN in fp16 too
}

std::vector<double> row_of(const Buffer& b, const std::vector<int64_t>& idx_without_last, int64_t n) {
  std::vector<double> r(static_cast<size_t>(n));
  std::vector<int64_t> idx = idx_without_last;
  idx.push_back(0);
  const int64_t base = element_offset(b.view, idx);
  const uint16_t* p = reinterpret_cast<const uint16_t*>(b.bytes.data()) + base;
  for (int64_t c = 0; c < n; ++c) r[size_t(c)] = from_bits(p[c * b.view.strides[b.view.ndim - 1]], b.view.dtype);
  return r;
}

// A list of `n` index entries drawn from `pool` (valid slots) with invalid entries mixed in.
std::vector<int32_t> make_list(Rng& rng, const std::vector<int64_t>& pool, int64_t slots, int n, double invalid,
                               bool all_invalid) {
  const int64_t bad[] = {-1, -1, -7, INT32_MIN, slots, slots + 100, INT32_MAX};
  std::vector<int32_t> list(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (all_invalid || pool.empty() || rng.uniform(0, 1) < invalid) {
      list[size_t(i)] = int32_t(bad[rng.index(7)]);
    } else {
      list[size_t(i)] = int32_t(pool[size_t(rng.index(int64_t(pool.size())))]);
    }
  }
  return list;
}

void write_list(Buffer* b, const std::vector<int64_t>& prefix, const std::vector<int32_t>& list) {
  std::vector<int64_t> idx = prefix;
  idx.push_back(0);
  int32_t* p = reinterpret_cast<int32_t*>(b->bytes.data()) + element_offset(b->view, idx);
  for (size_t i = 0; i < list.size(); ++i) p[int64_t(i) * b->view.strides[2]] = list[i];
}

std::vector<int32_t> read_list(const Buffer& b, int64_t i0, int64_t i1, int64_t len) {
  const int32_t* p = reinterpret_cast<const int32_t*>(b.bytes.data()) + element_offset(b.view, {i0, i1, 0});
  std::vector<int32_t> list(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) list[size_t(i)] = p[i * b.view.strides[2]];
  return list;
}

// Quantised FP8 cache with padded blocks; every slot outside `referenced` is then overwritten with 0xFF
// (NaN values, NaN scales, NaN RoPE). rows gets the dequantised K rows (NaN for unreferenced slots).
Buffer make_fp8_cache(Rng& rng, KvCacheLayout layout, int blocks, int block_size, const std::vector<bool>& referenced,
                      std::vector<double>* rows) {
  const int d = int(flash_mla::kv_cache_head_dim(layout)), bpt = int(flash_mla::kv_cache_bytes_per_token(layout));
  Buffer k = make_buffer(DType::kBF16, {blocks, block_size, 1, d});
  fill_normal(&k, rng);
  const int64_t block_stride = int64_t(block_size) * bpt + 128;
  Buffer c;
  c.bytes.assign(size_t(blocks * block_stride), 0);
  c.view = TensorView(c.bytes.data(), DType::kU8, {blocks, block_size, 1, bpt}, {block_stride, bpt, bpt, 1});
  flash_mla::quantize_k_cache(k.view, layout, c.view);
  rows->assign(size_t(blocks) * block_size * d, kNaN);
  for (int64_t slot = 0; slot < int64_t(blocks) * block_size; ++slot) {
    const int64_t blk = slot / block_size, off = slot % block_size;
    uint8_t* base = c.bytes.data() + blk * block_stride;
    uint8_t* tok = base + off * (layout == KvCacheLayout::kV32 ? 656 : 576);
    uint8_t* scales = base + int64_t(block_size) * 576 + off * 8;  // MODEL1 only
    if (!referenced[size_t(slot)]) {
      std::memset(tok, 0xFF, layout == KvCacheLayout::kV32 ? 656 : 576);
      if (layout == KvCacheLayout::kModel1) std::memset(scales, 0xFF, 8);
      continue;
    }
    double* r = rows->data() + slot * d;
    const int nope = layout == KvCacheLayout::kV32 ? 512 : 448, tile = layout == KvCacheLayout::kV32 ? 128 : 64;
    for (int i = 0; i < nope; ++i) {
      float s;
      if (layout == KvCacheLayout::kV32) {
        std::memcpy(&s, tok + 512 + 4 * (i / tile), 4);
      } else {
        s = ue8m0_to_f32(scales[i / tile]);
      }
      r[i] = bf16_to_f32(f32_to_bf16(e4m3_to_f32(tok[i]) * s));
    }
    const uint8_t* rope = tok + (layout == KvCacheLayout::kV32 ? 528 : 448);
    for (int i = 0; i < 64; ++i) {
      uint16_t h;
      std::memcpy(&h, rope + 2 * i, 2);
      r[nope + i] = bf16_to_f32(h);
    }
  }
  return c;
}

std::vector<bool> random_referenced(Rng& rng, int64_t slots, std::vector<int64_t>* pool) {
  std::vector<bool> ref(static_cast<size_t>(slots));
  for (int64_t s = 0; s < slots; ++s) {
    ref[size_t(s)] = rng.uniform(0, 1) < 0.7;
    if (ref[size_t(s)]) pool->push_back(s);
  }
  return ref;
}

}  // namespace

// ---------------- dense ----------------

void DenseProblem::build(Rng& rng) {
  if (lens.empty()) lens.assign(size_t(b), 100);
  int max_blocks = 1, total_blocks = 2;
  for (int l : lens) {
    max_blocks = std::max(max_blocks, (l + block_size - 1) / block_size + 1);
    total_blocks += (l + block_size - 1) / block_size;
  }
  q = make_buffer(dtype, {b, s_q, h_q, d}, strided_q ? d + 24 : 0);
  fill_normal(&q, rng);
  k_cache = make_buffer(dtype, {total_blocks, block_size, h_k, d});
  const uint16_t nan_bits = dtype == DType::kBF16 ? 0x7FC0 : 0x7E00;
  std::fill_n(reinterpret_cast<uint16_t*>(k_cache.bytes.data()), k_cache.bytes.size() / 2, nan_bits);
  block_table = make_buffer(DType::kI32, {b, max_blocks});
  seqlens = make_buffer(DType::kI32, {b});
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[size_t(rng.index(int64_t(i)))]);
  int32_t* bt = reinterpret_cast<int32_t*>(block_table.bytes.data());
  const int32_t garbage[] = {-1, INT32_MAX, total_blocks + 17};
  size_t next = 0;
  keys.assign(size_t(b * h_k), {});
  for (int i = 0; i < b; ++i) {
    reinterpret_cast<int32_t*>(seqlens.bytes.data())[i] = lens[size_t(i)];
    const int used = (lens[size_t(i)] + block_size - 1) / block_size;
    for (int j = 0; j < max_blocks; ++j) bt[i * max_blocks + j] = j < used ? ids[next++] : garbage[j % 3];
    for (int kvh = 0; kvh < h_k; ++kvh) {
      std::vector<double>& rows = keys[size_t(i * h_k + kvh)];
      rows.resize(size_t(lens[size_t(i)]) * d);
      for (int t = 0; t < lens[size_t(i)]; ++t) {
        const int64_t blk = bt[i * max_blocks + t / block_size];
        uint16_t* dst = reinterpret_cast<uint16_t*>(k_cache.bytes.data()) +
                        element_offset(k_cache.view, {blk, t % block_size, kvh, 0});
        for (int c = 0; c < d; ++c) {
          dst[c] = to_bits(rng.normal(), dtype);
          rows[size_t(t) * d + c] = from_bits(dst[c], dtype);
        }
      }
    }
  }
  out = make_buffer(dtype, {b, s_q, h_q, d_v});
  lse = make_buffer(DType::kF32, {b, h_q, s_q});
  poison(&out);
  poison(&lse);
}

flash_mla::KvcacheInputs DenseProblem::inputs() const {
  flash_mla::KvcacheInputs in;
  in.q = q.view;
  in.k_cache = k_cache.view;
  in.block_table = &block_table.view;
  in.cache_seqlens = &seqlens.view;
  in.head_dim_v = d_v;
  in.causal = causal;
  return in;
}

::testing::AssertionResult DenseProblem::check() const {
  std::vector<double> ref_out, slack, ref_lse(size_t(b) * h_q * s_q);
  const double scale = 1.0 / std::sqrt(double(d));
  for (int i = 0; i < b; ++i)
    for (int s = 0; s < s_q; ++s)
      for (int h = 0; h < h_q; ++h) {
        const int kvh = h / (h_q / h_k), L = lens[size_t(i)];
        const int limit = causal ? std::clamp(L - s_q + s + 1, 0, L) : L;
        std::vector<const double*> ks;
        for (int t = 0; t < limit; ++t) ks.push_back(keys[size_t(i * h_k + kvh)].data() + size_t(t) * d);
        RefRow r = reference_row(row_of(q, {i, s, h}, d), ks, d_v, scale);
        ref_out.insert(ref_out.end(), r.out.begin(), r.out.end());
        slack.insert(slack.end(), r.slack.begin(), r.slack.end());
        ref_lse[size_t((i * h_q + h) * s_q + s)] = r.lse;
      }
  auto a = check_close("out", to_doubles(out), ref_out, kDenseOutTol, &slack);
  if (!a) return a;
  return check_close("lse", to_doubles(lse), ref_lse, kDenseLseTol);
}

// ---------------- FP8 sparse decode ----------------

void SparseProblem::build(Rng& rng) {
  const int dq = d();
  // Enough slots for mostly distinct indices (2 slots per entry, 70% of them referenced).
  num_blocks = std::max(num_blocks, (2 * topk + block_size - 1) / block_size);
  extra_blocks = std::max(extra_blocks, (2 * extra_topk + extra_block_size - 1) / extra_block_size);
  q = make_buffer(DType::kBF16, {b, s_q, h_q, dq}, strided_q ? dq + 40 : 0);
  fill_normal(&q, rng);
  std::vector<int64_t> pool, extra_pool;
  const int64_t slots = int64_t(num_blocks) * block_size;
  cache = make_fp8_cache(rng, layout, num_blocks, block_size, random_referenced(rng, slots, &pool), &main_rows);
  indices = make_buffer(DType::kI32, {b, s_q, topk}, strided_indices ? topk + 5 : 0);
  for (int i = 0; i < b; ++i)
    for (int s = 0; s < s_q; ++s) {
      const bool none =
          std::find(all_invalid_rows.begin(), all_invalid_rows.end(), i * s_q + s) != all_invalid_rows.end();
      write_list(&indices, {i, s}, make_list(rng, pool, slots, topk, invalid_fraction, none));
    }
  if (with_topk_length) {
    topk_length = make_buffer(DType::kI32, {b});
    for (int i = 0; i < b; ++i)
      reinterpret_cast<int32_t*>(topk_length.bytes.data())[i] =
          i == 0 && b > 1 && (short_lists || !with_extra) ? 0 : rng.uniform_int(short_lists ? 0 : topk / 2, topk);
  }
  if (with_extra) {
    const int64_t eslots = int64_t(extra_blocks) * extra_block_size;
    extra_cache = make_fp8_cache(rng, layout, extra_blocks, extra_block_size,
                                 random_referenced(rng, eslots, &extra_pool), &extra_rows);
    extra_indices = make_buffer(DType::kI32, {b, s_q, extra_topk});
    for (int i = 0; i < b; ++i)
      for (int s = 0; s < s_q; ++s) {
        const bool none =
            std::find(all_invalid_rows.begin(), all_invalid_rows.end(), i * s_q + s) != all_invalid_rows.end();
        write_list(&extra_indices, {i, s}, make_list(rng, extra_pool, eslots, extra_topk, invalid_fraction, none));
      }
    if (with_topk_length) {
      extra_topk_length = make_buffer(DType::kI32, {b});
      for (int i = 0; i < b; ++i)
        reinterpret_cast<int32_t*>(extra_topk_length.bytes.data())[i] =
            rng.uniform_int(short_lists ? 0 : extra_topk / 2, extra_topk);
    }
  }
  if (with_sink) {
    sink = make_buffer(DType::kF32, {h_q});
    float* sv = reinterpret_cast<float*>(sink.bytes.data());
    for (int h = 0; h < h_q; ++h) sv[h] = float(rng.uniform(-1, 3));
    sv[0] = std::numeric_limits<float>::infinity();
    if (h_q > 1) sv[1] = -std::numeric_limits<float>::infinity();
  }
  out = make_buffer(DType::kBF16, {b, s_q, h_q, 512});
  lse = make_buffer(DType::kF32, {b, h_q, s_q});
  poison(&out);
  poison(&lse);
}

flash_mla::KvcacheInputs SparseProblem::inputs() const {
  flash_mla::KvcacheInputs in;
  in.q = q.view;
  in.k_cache = cache.view;
  in.head_dim_v = 512;
  in.is_fp8_kvcache = true;
  in.indices = &indices.view;
  if (with_topk_length) in.topk_length = &topk_length.view;
  if (with_sink) in.attn_sink = &sink.view;
  if (with_extra) {
    in.extra_k_cache = &extra_cache.view;
    in.extra_indices_in_kvcache = &extra_indices.view;
    if (with_topk_length) in.extra_topk_length = &extra_topk_length.view;
  }
  return in;
}

::testing::AssertionResult SparseProblem::check() const {
  const int dq = d();
  const double scale = 1.0 / std::sqrt(double(dq));
  const int64_t slots = int64_t(num_blocks) * block_size, eslots = int64_t(extra_blocks) * extra_block_size;
  std::vector<double> ref_out, slack, ref_lse(size_t(b) * h_q * s_q);
  for (int i = 0; i < b; ++i)
    for (int s = 0; s < s_q; ++s) {
      std::vector<const double*> ks;
      const int len = with_topk_length ? reinterpret_cast<const int32_t*>(topk_length.bytes.data())[i] : topk;
      for (int32_t v : read_list(indices, i, s, len))
        if (v >= 0 && v < slots) ks.push_back(main_rows.data() + int64_t(v) * dq);
      if (with_extra) {
        const int elen =
            with_topk_length ? reinterpret_cast<const int32_t*>(extra_topk_length.bytes.data())[i] : extra_topk;
        for (int32_t v : read_list(extra_indices, i, s, elen))
          if (v >= 0 && v < eslots) ks.push_back(extra_rows.data() + int64_t(v) * dq);
      }
      for (int h = 0; h < h_q; ++h) {
        std::optional<double> sk;
        if (with_sink) sk = reinterpret_cast<const float*>(sink.bytes.data())[h];
        RefRow r = reference_row(row_of(q, {i, s, h}, dq), ks, 512, scale, sk);
        ref_out.insert(ref_out.end(), r.out.begin(), r.out.end());
        slack.insert(slack.end(), r.slack.begin(), r.slack.end());
        ref_lse[size_t((i * h_q + h) * s_q + s)] = r.lse;
      }
    }
  auto a = check_close("out", to_doubles(out), ref_out, kSparseOutTol, &slack);
  if (!a) return a;
  return check_close("lse", to_doubles(lse), ref_lse, kDenseLseTol);
}

// ---------------- sparse prefill ----------------

void PrefillProblem::build(Rng& rng) {
  q = make_buffer(DType::kBF16, {s_q, h_q, d}, strided_q ? d + 8 : 0);
  fill_normal(&q, rng);
  kv = make_buffer(DType::kBF16, {s_kv, h_kv, d});
  fill_normal(&kv, rng);
  std::vector<int64_t> pool;
  const std::vector<bool> referenced = random_referenced(rng, s_kv, &pool);
  uint16_t* kvp = reinterpret_cast<uint16_t*>(kv.bytes.data());
  for (int t = 0; t < s_kv; ++t)
    if (!referenced[size_t(t)]) std::fill_n(kvp + int64_t(t) * h_kv * d, h_kv * d, uint16_t(0x7FC0));
  indices = make_buffer(DType::kI32, {s_q, h_kv, topk});
  for (int s = 0; s < s_q; ++s)
    for (int g = 0; g < h_kv; ++g) {
      const bool none =
          std::find(all_invalid_queries.begin(), all_invalid_queries.end(), s) != all_invalid_queries.end();
      write_list(&indices, {s, g}, make_list(rng, pool, s_kv, topk, invalid_fraction, none));
    }
  if (with_topk_length) {
    topk_length = make_buffer(DType::kI32, {s_q});
    for (int s = 0; s < s_q; ++s)
      reinterpret_cast<int32_t*>(topk_length.bytes.data())[s] = rng.uniform_int(short_lists ? 0 : topk / 2, topk);
  }
  if (with_sink) {
    sink = make_buffer(DType::kF32, {h_q});
    float* sv = reinterpret_cast<float*>(sink.bytes.data());
    for (int h = 0; h < h_q; ++h) sv[h] = float(rng.uniform(-1, 3));
    sv[0] = std::numeric_limits<float>::infinity();
  }
  sm_scale = 1.0 / std::sqrt(double(d));
  out = make_buffer(DType::kBF16, {s_q, h_q, d_v});
  max_logits = make_buffer(DType::kF32, {s_q, h_q});
  lse = make_buffer(DType::kF32, {s_q, h_q});
  poison(&out);
  poison(&max_logits);
  poison(&lse);
}

flash_mla::SparsePrefillInputs PrefillProblem::inputs() const {
  flash_mla::SparsePrefillInputs in;
  in.q = q.view;
  in.kv = kv.view;
  in.indices = indices.view;
  in.sm_scale = sm_scale;
  in.d_v = d_v;
  if (with_sink) in.attn_sink = &sink.view;
  if (with_topk_length) in.topk_length = &topk_length.view;
  return in;
}

::testing::AssertionResult PrefillProblem::check() const {
  std::vector<double> kvd = to_doubles(kv), ref_out, slack, ref_max(size_t(s_q) * h_q), ref_lse(size_t(s_q) * h_q);
  for (int s = 0; s < s_q; ++s)
    for (int h = 0; h < h_q; ++h) {
      const int g = h / (h_q / h_kv);
      const int len = with_topk_length ? reinterpret_cast<const int32_t*>(topk_length.bytes.data())[s] : topk;
      std::vector<const double*> ks;
      for (int32_t v : read_list(indices, s, g, len))
        if (v >= 0 && v < s_kv) ks.push_back(kvd.data() + (int64_t(v) * h_kv + g) * d);
      std::optional<double> sk;
      if (with_sink) sk = reinterpret_cast<const float*>(sink.bytes.data())[h];
      RefRow r = reference_row(row_of(q, {s, h}, d), ks, d_v, sm_scale, sk);
      ref_out.insert(ref_out.end(), r.out.begin(), r.out.end());
      slack.insert(slack.end(), r.slack.begin(), r.slack.end());
      ref_max[size_t(s * h_q + h)] = r.max_logit;
      ref_lse[size_t(s * h_q + h)] = r.lse;
    }
  auto a = check_close("out", to_doubles(out), ref_out, kPrefillOutTol, &slack);
  if (!a) return a;
  a = check_close("max_logits", to_doubles(max_logits), ref_max, kPrefillStatTol);
  if (!a) return a;
  return check_close("lse", to_doubles(lse), ref_lse, kPrefillStatTol);
}

}  // namespace tessera::test
