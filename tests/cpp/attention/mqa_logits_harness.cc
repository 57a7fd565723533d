#include "attention/mqa_logits_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

namespace tessera::test {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double poison_or_value(const uint8_t* bits, bool bf16, bool* poisoned) {
  if (bf16) {
    uint16_t h;
    std::memcpy(&h, bits, 2);
    *poisoned = h == kPoisonBf16;
    return bf16_to_f32(h);
  }
  uint32_t u;
  std::memcpy(&u, bits, 4);
  *poisoned = u == kPoisonF32;
  return f32_from_bits(u);
}

// Reference logit of one query (q rows [row0, row0 + H)) against one dequantised key row.
double reference_logit(const QuantRows& q, int64_t row0, const double* key, const std::vector<float>& w, int64_t w_row,
                       int64_t heads, bool bf16_weights) {
  double sum = 0;
  for (int64_t h = 0; h < heads; ++h) {
    double dot = 0;
    for (int64_t d = 0; d < q.dim; ++d) dot += q.deq[size_t((row0 + h) * q.dim + d)] * key[d];
    double weight = w[size_t(w_row * heads + h)];
    if (bf16_weights) weight = bf16_to_f32(f32_to_bf16(float(weight)));
    sum += weight * std::max(dot, 0.0);
  }
  return sum;
}

// LogitsResult from a poisoned buffer of rows x ld entries (first `cols` of each row).
LogitsResult read_logits(const std::vector<uint8_t>& buf, bool bf16, int64_t rows, int64_t cols, int64_t ld) {
  LogitsResult r;
  r.bits = buf;
  r.cols = cols;
  const int es = bf16 ? 2 : 4;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      bool poisoned;
      const double v = poison_or_value(buf.data() + (i * ld + j) * es, bf16, &poisoned);
      r.values.push_back(poisoned ? std::nan("poison") : v);
    }
  return r;
}

bool is_poison(const LogitsResult& r, bool bf16, int64_t ld, int64_t i, int64_t j) {
  bool poisoned;
  poison_or_value(r.bits.data() + (i * ld + j) * (bf16 ? 2 : 4), bf16, &poisoned);
  return poisoned;
}

// Compares written positions against the reference; `expect(i, j)` says what position (i, j) should
// hold: 0 = unwritten (poison), 1 = exactly -inf, 2 = a logit compared by calc_diff.
::testing::AssertionResult compare(const std::string& what, const std::vector<double>& ref, const LogitsResult& r,
                                   bool bf16, int64_t rows, int64_t ld,
                                   const std::function<int(int64_t, int64_t)>& expect) {
  std::vector<double> got(ref.size(), 0), want(ref.size(), 0);
  std::vector<char> mask(ref.size(), 0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < r.cols; ++j) {
      const size_t at = size_t(i * r.cols + j);
      const int e = expect(i, j);
      const bool poisoned = is_poison(r, bf16, ld, i, j);
      if (e == 0 && !poisoned)
        return ::testing::AssertionFailure() << what << ": (" << i << ", " << j << ") was written, must stay untouched";
      if (e != 0 && poisoned)
        return ::testing::AssertionFailure() << what << ": (" << i << ", " << j << ") was not written";
      if (e == 1 && r.values[at] != kNegInf)
        return ::testing::AssertionFailure()
               << what << ": (" << i << ", " << j << ") = " << r.values[at] << ", must be exactly -inf";
      if (e == 2) {
        if (!std::isfinite(r.values[at]))
          return ::testing::AssertionFailure()
                 << what << ": (" << i << ", " << j << ") = " << r.values[at] << " (reference " << ref[at] << ")";
        got[at] = r.values[at];
        want[at] = ref[at];
        mask[at] = 1;
      }
    }
  const double diff = masked_calc_diff(want, got, mask), bound = bf16 ? 5e-6 : 1e-9;
  if (diff > bound) return ::testing::AssertionFailure() << what << ": calc_diff " << diff << " > " << bound;
  return ::testing::AssertionSuccess() << what << ": calc_diff " << diff;
}

}  // namespace

const char* format_name(QkFormat f) {
  switch (f) {
    case QkFormat::kFp8:
      return "fp8";
    case QkFormat::kMxFp8:
      return "mxfp8";
    case QkFormat::kMxFp4:
      return "mxfp4";
  }
  return "?";
}

QuantRows quantize_rows(const std::vector<float>& x, int64_t rows, int64_t dim, QkFormat f, bool with_scale,
                        int64_t pad_bytes) {
  QuantRows q;
  q.rows = rows;
  q.dim = dim;
  q.format = f;
  q.stride = q.row_bytes() + pad_bytes;
  q.data.assign(size_t(rows * q.stride), 0x5A);
  q.deq.resize(size_t(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * dim;
    uint8_t* out = q.data.data() + r * q.stride;
    if (f == QkFormat::kFp8) {
      float sf = 1.0f;
      if (with_scale) {
        float amax = 1e-4f;
        for (int64_t d = 0; d < dim; ++d) amax = std::max(amax, std::fabs(row[d]));
        sf = amax / 448.0f;
        q.sf_f32.push_back(sf);
      }
      const float inv = 1.0f / sf;
      for (int64_t d = 0; d < dim; ++d) {
        out[d] = f32_to_e4m3_sat(with_scale ? row[d] * inv : row[d]);
        q.deq[size_t(r * dim + d)] = double(e4m3_to_f32(out[d])) * sf;
      }
      continue;
    }
    uint32_t word = 0;
    if (f == QkFormat::kMxFp4) std::memset(out, 0, size_t(dim / 2));
    for (int64_t b = 0; b < dim / 32; ++b) {
      float amax = 1e-4f;
      for (int64_t d = 32 * b; d < 32 * b + 32; ++d) amax = std::max(amax, std::fabs(row[d]));
      const uint8_t e = f32_to_ue8m0_ceil(amax / (f == QkFormat::kMxFp4 ? 6.0f : 448.0f));
      word |= uint32_t(e) << (8 * b);
      const float scale = ue8m0_to_f32(e);
      for (int64_t d = 32 * b; d < 32 * b + 32; ++d) {
        double v;
        if (f == QkFormat::kMxFp8) {
          out[d] = f32_to_e4m3_sat(row[d] / scale);
          v = e4m3_to_f32(out[d]);
        } else {
          const uint8_t code = f32_to_e2m1_deepgemm(row[d] / scale);
          out[d / 2] |= uint8_t(code << (4 * (d % 2)));
          v = e2m1_to_f32(code);
        }
        q.deq[size_t(r * dim + d)] = v * scale;
      }
    }
    q.sf_words.push_back(int32_t(word));
  }
  return q;
}

double masked_calc_diff(const std::vector<double>& ref, const std::vector<double>& got, const std::vector<char>& mask) {
  std::vector<double> x, y;
  for (size_t i = 0; i < ref.size(); ++i)
    if (mask[i]) {
      x.push_back(ref[i]);
      y.push_back(got[i]);
    }
  return calc_diff(x, y);
}

std::string PrefillCase::str() const {
  std::ostringstream os;
  os << "S=" << s << " S_kv=" << s_kv << " H=" << heads << " D=" << dim << " " << format_name(format)
     << (bf16_logits ? " bf16_logits" : "") << (bf16_weights ? " bf16_weights" : "") << (clean ? " clean" : "")
     << " max_seqlen_k=" << max_seqlen_k << (transposed_q ? " transposed_q" : "") << " kv_pad=" << kv_pad
     << " ranges=" << int(ranges);
  return os.str();
}

PrefillProblem make_prefill(const PrefillCase& c, Rng& rng) {
  PrefillProblem p;
  p.c = c;
  std::vector<float> qx(size_t(c.s * c.heads * c.dim)), kx(size_t(c.s_kv * c.dim));
  for (auto& v : qx) v = float(rng.normal());
  for (auto& v : kx) v = float(rng.normal());
  p.q = quantize_rows(qx, c.s * c.heads, c.dim, c.format, false);
  p.kv = quantize_rows(kx, c.s_kv, c.dim, c.format, true, c.kv_pad);
  p.weights.resize(size_t(c.s * c.heads));
  for (auto& w : p.weights) w = float(rng.normal());
  for (int64_t i = 0; i < c.s; ++i) {
    int64_t b = 0, e = c.s_kv;
    if (c.ranges == PrefillCase::kCausal) {
      e = std::max<int64_t>(0, c.s_kv - c.s + i + 1);
    } else if (c.ranges == PrefillCase::kRandom) {
      b = rng.index(c.s_kv + 1);
      e = b + rng.index(c.s_kv - b + 1);
      if (c.max_seqlen_k > 0) e = std::min(e, b + c.max_seqlen_k);
    } else {
      b = rng.uniform_int(-5, int(c.s_kv));
      e = rng.uniform_int(-5, int(c.s_kv) + 5);
    }
    p.ks.push_back(int32_t(b));
    p.ke.push_back(int32_t(e));
  }
  p.ref.assign(size_t(c.s * c.s_kv), kNegInf);
  for (int64_t i = 0; i < c.s; ++i)
    for (int64_t j = std::max<int64_t>(0, p.ks[size_t(i)]); j < std::min<int64_t>(c.s_kv, p.ke[size_t(i)]); ++j)
      p.ref[size_t(i * c.s_kv + j)] =
          reference_logit(p.q, i * c.heads, p.kv.deq.data() + j * c.dim, p.weights, i, c.heads, c.bf16_weights);
  return p;
}

LogitsResult run_prefill(const PrefillProblem& p) {
  const PrefillCase& c = p.c;
  const bool fp4 = c.format == QkFormat::kMxFp4, mx = c.format != QkFormat::kFp8;
  const DType qt = fp4 ? DType::kI8 : DType::kF8E4M3;
  const int64_t qb = p.q.row_bytes();
  // q as [S, H, D]: contiguous, or stored [H, S, D] and viewed with swapped strides.
  std::vector<uint8_t> qbuf(p.q.data.size());
  std::vector<int32_t> qsf(size_t(c.s * c.heads));
  for (int64_t i = 0; i < c.s; ++i)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t dst = c.transposed_q ? h * c.s + i : i * c.heads + h;
      std::memcpy(qbuf.data() + dst * qb, p.q.data.data() + (i * c.heads + h) * qb, size_t(qb));
      if (mx) qsf[size_t(dst)] = p.q.sf_words[size_t(i * c.heads + h)];
    }
  const int64_t s_stride = c.transposed_q ? 1 : c.heads, h_stride = c.transposed_q ? c.s : 1;  // in rows
  const TensorView q(qbuf.data(), qt, {c.s, c.heads, qb}, {s_stride * qb, h_stride * qb, 1});
  const TensorView q_sf(qsf.data(), DType::kI32, {c.s, c.heads}, {s_stride, h_stride});
  const TensorView kv(const_cast<uint8_t*>(p.kv.data.data()), qt, {c.s_kv, qb}, {p.kv.stride, 1});
  const TensorView kv_sf = mx ? TensorView(const_cast<int32_t*>(p.kv.sf_words.data()), DType::kI32, {c.s_kv})
                              : TensorView(const_cast<float*>(p.kv.sf_f32.data()), DType::kF32, {c.s_kv});
  std::vector<uint16_t> wb;
  for (float w : p.weights) wb.push_back(f32_to_bf16(w));
  const TensorView weights = c.bf16_weights
                                 ? TensorView(wb.data(), DType::kBF16, {c.s, c.heads})
                                 : TensorView(const_cast<float*>(p.weights.data()), DType::kF32, {c.s, c.heads});
  const TensorView ks(const_cast<int32_t*>(p.ks.data()), DType::kI32, {c.s});
  const TensorView ke(const_cast<int32_t*>(p.ke.data()), DType::kI32, {c.s});
  const int64_t cols = c.max_seqlen_k > 0 ? c.max_seqlen_k : c.s_kv, ld = cols + c.logits_pad;
  const DType lt = c.bf16_logits ? DType::kBF16 : DType::kF32;
  std::vector<uint8_t> out(size_t(c.s * ld * dtype_storage_bytes(lt)));
  fill_poison(&out, lt);
  const TensorView logits(out.data(), lt, {c.s, cols}, {ld, 1});
  attention::fp8_fp4_mqa_logits(q, mx ? &q_sf : nullptr, kv, kv_sf, weights, ks, ke, logits, c.clean, c.max_seqlen_k);
  return read_logits(out, c.bf16_logits, c.s, cols, ld);
}

::testing::AssertionResult check_prefill(const PrefillProblem& p, const LogitsResult& r) {
  const PrefillCase& c = p.c;
  const int64_t ld = r.cols + c.logits_pad;
  if (c.max_seqlen_k > 0) {
    // Compressed: entry (i, t) holds logit (i, ks + t) for t < ke - ks; the rest is unwritten.
    std::vector<double> ref(size_t(c.s * r.cols), 0);
    for (int64_t i = 0; i < c.s; ++i)
      for (int64_t t = 0; t < p.ke[size_t(i)] - p.ks[size_t(i)]; ++t)
        ref[size_t(i * r.cols + t)] = p.ref[size_t(i * c.s_kv + p.ks[size_t(i)] + t)];
    return compare(c.str(), ref, r, c.bf16_logits, c.s, ld,
                   [&](int64_t i, int64_t t) { return t < p.ke[size_t(i)] - p.ks[size_t(i)] ? 2 : 0; });
  }
  return compare(c.str(), p.ref, r, c.bf16_logits, c.s, ld, [&](int64_t i, int64_t j) {
    const bool inside = j >= p.ks[size_t(i)] && j < p.ke[size_t(i)];
    return inside ? 2 : c.clean ? 1 : 0;
  });
}

std::string PagedCase::str() const {
  std::ostringstream os;
  os << "B=" << batch << " next_n=" << next_n << " H=" << heads << " D=" << dim << " block_kv=" << block_kv << " "
     << format_name(format) << (lens_2d ? " lens2d" : " lens1d") << (clean ? " clean" : "")
     << (bf16_logits ? " bf16_logits" : "") << (transposed_q ? " transposed_q" : "");
  return os.str();
}

PagedProblem make_paged(const PagedCase& c, Rng& rng) {
  PagedProblem p;
  p.c = c;
  const int64_t nq = c.batch * c.next_n;
  // Lengths: given, or random with 0, 1 and odd values mixed in.
  const int64_t len_count = c.lens_2d ? nq : c.batch;
  for (int64_t i = 0; i < len_count; ++i) {
    const int64_t v =
        !c.lens.empty() ? c.lens[size_t(i % int64_t(c.lens.size()))] : (i % 5 == 0 ? i % 2 : 2 * rng.index(200) + 1);
    p.lens.push_back(int32_t(v));
  }
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j < c.next_n; ++j)
      p.query_len.push_back(c.lens_2d ? p.lens[size_t(b * c.next_n + j)]
                                      : std::max<int64_t>(0, p.lens[size_t(b)] - c.next_n + j + 1));
  std::vector<int64_t> need(size_t(c.batch), 0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j < c.next_n; ++j)
      need[size_t(b)] = std::max(need[size_t(b)], p.query_len[size_t(b * c.next_n + j)]);
  int64_t total_pages = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    p.max_blocks = std::max(p.max_blocks, (need[size_t(b)] + c.block_kv - 1) / c.block_kv);
    total_pages += (need[size_t(b)] + c.block_kv - 1) / c.block_kv;
  }
  p.max_blocks += 2;
  p.num_blocks = total_pages + 3;  // three pages nobody references
  // A few columns past the longest query (they must come out -inf), within what a table row addresses.
  p.max_context_len =
      std::min(*std::max_element(p.query_len.begin(), p.query_len.end()) + 5, p.max_blocks * c.block_kv);

  // The cache starts as NaN everywhere: values 0x7F (e4m3 NaN; FP4 bytes 0x7F are finite but their
  // scales are NaN), scales NaN; only referenced slots are written.
  std::vector<float> qx(size_t(nq * c.heads * c.dim)), kx(size_t(c.dim));
  for (auto& v : qx) v = float(rng.normal());
  p.q = quantize_rows(qx, nq * c.heads, c.dim, c.format, false);
  p.weights.resize(size_t(nq * c.heads));
  for (auto& w : p.weights) w = float(rng.normal());
  const int64_t rb = p.q.row_bytes(), page_bytes = c.block_kv * (rb + 4);
  p.cache.assign(size_t(p.num_blocks * page_bytes), 0x7F);
  for (int64_t n = 0; n < p.num_blocks; ++n)
    for (int64_t s = 0; s < c.block_kv; ++s) {
      const uint32_t nan_word = c.format == QkFormat::kFp8 ? 0x7FC00000u : 0xFFFFFFFFu;
      std::memcpy(p.cache.data() + n * page_bytes + c.block_kv * rb + s * 4, &nan_word, 4);
    }
  std::vector<int32_t> order(size_t(p.num_blocks));
  for (int64_t n = 0; n < p.num_blocks; ++n) order[size_t(n)] = int32_t(n);
  for (int64_t n = p.num_blocks - 1; n > 0; --n) std::swap(order[size_t(n)], order[size_t(rng.index(n + 1))]);
  // Unused table entries hold values that would crash a reader: -1 and INT_MAX.
  p.block_table.assign(size_t(c.batch * p.max_blocks), 0);
  for (size_t i = 0; i < p.block_table.size(); ++i) p.block_table[i] = i % 2 ? -1 : INT32_MAX;
  std::vector<double> keys(size_t(c.dim));
  p.ref.assign(size_t(nq * p.max_context_len), kNegInf);
  int64_t next_page = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t pages = (need[size_t(b)] + c.block_kv - 1) / c.block_kv;
    for (int64_t pg = 0; pg < pages; ++pg) p.block_table[size_t(b * p.max_blocks + pg)] = order[size_t(next_page++)];
    for (int64_t t = 0; t < need[size_t(b)]; ++t) {
      for (auto& v : kx) v = float(rng.normal());
      const QuantRows k = quantize_rows(kx, 1, c.dim, c.format, true);
      uint8_t* page = p.cache.data() + int64_t(p.block_table[size_t(b * p.max_blocks + t / c.block_kv)]) * page_bytes;
      std::memcpy(page + (t % c.block_kv) * rb, k.data.data(), size_t(rb));
      if (c.format == QkFormat::kFp8) {
        std::memcpy(page + c.block_kv * rb + (t % c.block_kv) * 4, &k.sf_f32[0], 4);
      } else {
        std::memcpy(page + c.block_kv * rb + (t % c.block_kv) * 4, &k.sf_words[0], 4);
      }
      for (int64_t j = 0; j < c.next_n; ++j) {
        const int64_t qi = b * c.next_n + j;
        if (t < p.query_len[size_t(qi)])
          p.ref[size_t(qi * p.max_context_len + t)] =
              reference_logit(p.q, qi * c.heads, k.deq.data(), p.weights, qi, c.heads, false);
      }
    }
  }
  return p;
}

LogitsResult run_paged(const PagedProblem& p) {
  const PagedCase& c = p.c;
  const bool fp4 = c.format == QkFormat::kMxFp4, mx = c.format != QkFormat::kFp8;
  const int64_t nq = c.batch * c.next_n, rb = p.q.row_bytes();
  std::vector<uint8_t> qbuf(p.q.data.size());
  std::vector<int32_t> qsf(size_t(nq * c.heads));
  // Contiguous [B, next_n, H, D], or stored [H, B, next_n, D].
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t dst = c.transposed_q ? h * nq + i : i * c.heads + h;
      std::memcpy(qbuf.data() + dst * rb, p.q.data.data() + (i * c.heads + h) * rb, size_t(rb));
      if (mx) qsf[size_t(dst)] = p.q.sf_words[size_t(i * c.heads + h)];
    }
  const int64_t sb = c.transposed_q ? c.next_n * rb : c.next_n * c.heads * rb, sj = c.transposed_q ? rb : c.heads * rb,
                sh = c.transposed_q ? nq * rb : rb;
  const TensorView q(qbuf.data(), fp4 ? DType::kI8 : DType::kF8E4M3, {c.batch, c.next_n, c.heads, rb}, {sb, sj, sh, 1});
  const TensorView q_sf(qsf.data(), DType::kI32, {c.batch, c.next_n, c.heads}, {sb / rb, sj / rb, sh / rb});
  const TensorView cache(const_cast<uint8_t*>(p.cache.data()), DType::kU8, {p.num_blocks, c.block_kv, 1, rb + 4},
                         {c.block_kv * (rb + 4), rb + 4, rb + 4, 1});
  const TensorView weights(const_cast<float*>(p.weights.data()), DType::kF32, {nq, c.heads});
  const TensorView lens = c.lens_2d ? TensorView(const_cast<int32_t*>(p.lens.data()), DType::kI32, {c.batch, c.next_n})
                                    : TensorView(const_cast<int32_t*>(p.lens.data()), DType::kI32, {c.batch});
  const TensorView table(const_cast<int32_t*>(p.block_table.data()), DType::kI32, {c.batch, p.max_blocks});
  std::vector<int32_t> meta(size_t(2 * (num_threads() + 1)));
  const TensorView meta_view(meta.data(), DType::kI32, {num_threads() + 1, 2});
  attention::get_paged_mqa_logits_metadata(lens, int(c.block_kv), num_threads(), meta_view);
  const DType lt = c.bf16_logits ? DType::kBF16 : DType::kF32;
  std::vector<uint8_t> out(size_t(nq * p.max_context_len * dtype_storage_bytes(lt)));
  fill_poison(&out, lt);
  const TensorView logits(out.data(), lt, {nq, p.max_context_len});
  attention::fp8_fp4_paged_mqa_logits(q, mx ? &q_sf : nullptr, cache, weights, lens, table, meta_view, logits,
                                      p.max_context_len, c.clean);
  return read_logits(out, c.bf16_logits, nq, p.max_context_len, p.max_context_len);
}

::testing::AssertionResult check_paged(const PagedProblem& p, const LogitsResult& r) {
  return compare(p.c.str(), p.ref, r, p.c.bf16_logits, p.c.batch * p.c.next_n, p.max_context_len,
                 [&](int64_t i, int64_t j) { return j < p.query_len[size_t(i)] ? 2
                                                    : p.c.clean                ? 1
                                                                               : 0; });
}

}  // namespace tessera::test
