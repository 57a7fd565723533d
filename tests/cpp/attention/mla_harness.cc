// Shared pieces of the MLA test harness: comparisons, the float64 reference row, typed buffers.
#include "attention/mla_harness.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace tessera::test {

::testing::AssertionResult check_close(const std::string& what, const std::vector<double>& got,
                                       const std::vector<double>& ref, const Tolerance& tol,
                                       const std::vector<double>* slack) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": sizes differ " << got.size() << " vs " << ref.size();
  std::vector<double> fg, fr;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], r = ref[i];
    bool ok;
    if (std::isnan(r) || std::isinf(r)) {
      ok = std::isnan(r) ? std::isnan(g) : g == r;
    } else {
      const double err = std::fabs(g - r);
      ok =
          std::isfinite(g) && (err < tol.abs || err / (std::fabs(r) + 1e-6) < tol.rel || (slack && err <= (*slack)[i]));
      fg.push_back(g);
      fr.push_back(r);
    }
    if (!ok && bad++ == 0) first = int64_t(i);
  }
  if (bad)
    return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size()
                                         << " elements out of tolerance; first at flat index " << first << ": got "
                                         << got[size_t(first)] << ", reference " << ref[size_t(first)];
  const double diff = calc_diff(fg, fr);
  if (!(diff < tol.cos)) return ::testing::AssertionFailure() << what << ": cosine diff " << diff << " >= " << tol.cos;
  return ::testing::AssertionSuccess() << what << ": " << got.size() << " elements, cosine diff " << diff;
}

RefRow reference_row(const std::vector<double>& q, const std::vector<const double*>& keys, int d_v, double scale,
                     std::optional<double> sink) {
  RefRow r;
  r.out.assign(size_t(d_v), 0.0);
  r.slack.assign(size_t(d_v), 1e-6);
  r.lse = std::numeric_limits<double>::infinity();
  r.max_logit = -std::numeric_limits<double>::infinity();
  if (keys.empty()) return r;
  std::vector<double> s(keys.size());
  for (size_t t = 0; t < keys.size(); ++t) {
    double acc = 0;
    for (size_t c = 0; c < q.size(); ++c) acc += q[c] * keys[t][c];
    s[t] = acc * scale;
    r.max_logit = std::max(r.max_logit, s[t]);
  }
  double sum = 0;
  for (size_t t = 0; t < keys.size(); ++t) {
    const double p = std::exp(s[t] - r.max_logit);
    sum += p;
    for (int c = 0; c < d_v; ++c) {
      r.out[size_t(c)] += p * keys[t][c];
      r.slack[size_t(c)] += p * std::fabs(keys[t][c]);
    }
  }
  r.lse = r.max_logit + std::log(sum);
  double factor = 1.0 / sum;
  if (sink) factor *= 1.0 / (1.0 + std::exp(*sink - r.lse));
  for (int c = 0; c < d_v; ++c) {
    r.out[size_t(c)] *= factor;
    r.slack[size_t(c)] = r.slack[size_t(c)] * factor * 0x1p-8 + std::fabs(r.out[size_t(c)]) * 0x1p-8 + 1e-6;
  }
  return r;
}

Buffer make_buffer(DType dtype, std::vector<int64_t> shape, int64_t padded_last) {
  Buffer b;
  TensorView& v = b.view;
  v.dtype = dtype;
  v.ndim = int(shape.size());
  int64_t step = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[size_t(d)];
    v.strides[d] = step;
    step *= (d == v.ndim - 1 && padded_last) ? padded_last : std::max<int64_t>(shape[size_t(d)], 1);
  }
  b.bytes.assign(size_t(std::max<int64_t>(step, 1) * dtype_storage_bytes(dtype)), 0);
  v.data = b.bytes.data();
  return b;
}

int64_t element_offset(const TensorView& v, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * v.strides[d];
  return off;
}

uint16_t to_bits(double x, DType t) {
  return t == DType::kBF16 ? f32_to_bf16(float(x)) : f32_to_f16(float(x));
}
double from_bits(uint16_t bits, DType t) {
  return t == DType::kBF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

namespace {
// Visits every logical element: fn(offset in elements).
template <class Fn>
void for_each_element(const TensorView& v, Fn fn) {
  const int64_t n = v.numel();
  std::vector<int64_t> idx(size_t(v.ndim), 0);
  for (int64_t i = 0; i < n; ++i) {
    fn(element_offset(v, idx));
    for (int d = v.ndim - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < v.shape[d]) break;
      idx[size_t(d)] = 0;
    }
  }
}
}  // namespace

void fill_normal(Buffer* b, Rng& rng, double stddev) {
  const DType t = b->view.dtype;
  for_each_element(b->view, [&](int64_t off) {
    const double x = rng.normal() * stddev;
    if (t == DType::kF32) {
      reinterpret_cast<float*>(b->bytes.data())[off] = float(x);
    } else {
      reinterpret_cast<uint16_t*>(b->bytes.data())[off] = to_bits(x, t);
    }
  });
}

std::vector<double> to_doubles(const Buffer& b) {
  std::vector<double> out;
  const DType t = b.view.dtype;
  for_each_element(b.view, [&](int64_t off) {
    if (t == DType::kF32) {
      out.push_back(reinterpret_cast<const float*>(b.bytes.data())[off]);
    } else if (t == DType::kI32) {
      out.push_back(reinterpret_cast<const int32_t*>(b.bytes.data())[off]);
    } else {
      out.push_back(from_bits(reinterpret_cast<const uint16_t*>(b.bytes.data())[off], t));
    }
  });
  return out;
}

}  // namespace tessera::test
