#include "gemm/grouped_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessera::test {

namespace {

TensorView row_major(void* data, DType dtype, const std::vector<int64_t>& shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = int(shape.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[size_t(d)];
    v.strides[d] = stride;
    stride *= std::max<int64_t>(shape[size_t(d)], 1);
  }
  return v;
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

}  // namespace

Buffer::Buffer(DType dtype, std::vector<int64_t> shape)
    : bytes(size_t(std::max<int64_t>(product(shape), 1) * dtype_storage_bytes(dtype))) {
  view = row_major(bytes.data(), dtype, shape);
}

Buffer poisoned_bf16(std::vector<int64_t> shape) {
  Buffer b(DType::kBF16, std::move(shape));
  std::fill_n(b.data<uint16_t>(), b.bytes.size() / 2, kPoisonBf16Value);
  return b;
}

Buffer poisoned_f32(std::vector<int64_t> shape) {
  Buffer b(DType::kF32, std::move(shape));
  std::fill_n(b.data<float>(), b.bytes.size() / 4, -7.25f);
  return b;
}

Buffer int32_buffer(const std::vector<int32_t>& values) {
  Buffer b(DType::kI32, {int64_t(values.size())});
  if (!values.empty()) std::memcpy(b.bytes.data(), values.data(), values.size() * 4);
  return b;
}

Bf16Operand random_bf16(std::vector<int64_t> shape, Rng& rng) {
  Bf16Operand op{Buffer(DType::kBF16, std::move(shape)), {}};
  const int64_t n = op.buf.numel();
  op.values.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_bf16(float(rng.normal()));
    op.buf.data<uint16_t>()[i] = h;
    op.values[size_t(i)] = bf16_to_f32(h);
  }
  return op;
}

Fp8Operand quantised_fp8(int64_t groups, int64_t rows, int64_t k, int64_t gran_rows, Rng& rng,
                         const std::vector<int32_t>& row_group) {
  const int64_t g_count = std::max<int64_t>(groups, 1);
  const int64_t sf_r = (rows + gran_rows - 1) / gran_rows, sf_k = (k + 127) / 128;
  Fp8Operand op;
  op.data = groups ? Buffer(DType::kF8E4M3, {groups, rows, k}) : Buffer(DType::kF8E4M3, {rows, k});
  op.scale = groups ? Buffer(DType::kF32, {groups, sf_r, sf_k}) : Buffer(DType::kF32, {sf_r, sf_k});
  op.deq.resize(size_t(g_count * rows * k));
  std::vector<float> x(size_t(rows * k));
  for (int64_t g = 0; g < g_count; ++g) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const bool zero = !row_group.empty() && row_group[size_t(r)] < 0;
        x[size_t(r * k + c)] = zero ? 0.0f : float(rng.normal());
      }
    for (int64_t br = 0; br < sf_r; ++br)
      for (int64_t bk = 0; bk < sf_k; ++bk) {
        const int64_t r0 = br * gran_rows, r1 = std::min(rows, r0 + gran_rows), c0 = bk * 128,
                      c1 = std::min(k, c0 + 128);
        float amax = 0;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[size_t(r * k + c)]));
        const float sf = std::max(amax, 1e-4f) / 448.0f, inv = 1.0f / sf;
        op.scale.data<float>()[(g * sf_r + br) * sf_k + bk] = sf;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) {
            const uint8_t q = f32_to_e4m3_sat(x[size_t(r * k + c)] * inv);
            const size_t at = size_t((g * rows + r) * k + c);
            op.data.data<uint8_t>()[at] = q;
            op.deq[at] = double(e4m3_to_f32(q)) * double(sf);
          }
      }
  }
  return op;
}

GroupedRows grouped_rows(const std::vector<int64_t>& sizes, int64_t alignment, bool psum) {
  GroupedRows out;
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    starts.push_back(start);
    start = (start + s + alignment - 1) / alignment * alignment;
  }
  out.m_sum = start;
  out.row_group.assign(size_t(out.m_sum), -1);
  for (size_t g = 0; g < sizes.size(); ++g)
    for (int64_t r = starts[g]; r < starts[g] + sizes[g]; ++r) out.row_group[size_t(r)] = int32_t(g);
  if (psum) {
    for (size_t g = 0; g < sizes.size(); ++g) out.layout.push_back(int32_t(starts[g] + sizes[g]));
  } else {
    out.layout = out.row_group;
  }
  return out;
}

std::vector<double> grouped_reference(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<int32_t>& row_group, int64_t n, int64_t k) {
  const int64_t m = int64_t(row_group.size());
  std::vector<double> ref(size_t(m * n), 0.0);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t g = row_group[size_t(r)];
    if (g < 0) continue;
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a[size_t(r * k + kk)] * b[size_t((g * n + c) * k + kk)];
      ref[size_t(r * n + c)] = acc;
    }
  }
  return ref;
}

double grouped_calc_diff(const Buffer& d, const std::vector<double>& ref, const std::vector<int32_t>& row_group) {
  const int64_t m = int64_t(row_group.size()), n = d.view.shape[d.view.ndim - 1];
  std::vector<double> x, y;
  for (int64_t r = 0; r < m; ++r) {
    if (row_group[size_t(r)] < 0) continue;
    for (int64_t c = 0; c < n; ++c) {
      x.push_back(bf16_to_f32(d.data<uint16_t>()[r * n + c]));
      y.push_back(ref[size_t(r * n + c)]);
    }
  }
  return calc_diff(x, y);
}

::testing::AssertionResult other_rows_are(const Buffer& d, const std::vector<int32_t>& row_group, bool want_zero) {
  const int64_t m = int64_t(row_group.size()), n = d.view.shape[d.view.ndim - 1];
  const uint16_t want = want_zero ? 0 : kPoisonBf16Value;
  for (int64_t r = 0; r < m; ++r) {
    if (row_group[size_t(r)] >= 0) continue;
    for (int64_t c = 0; c < n; ++c)
      if (d.data<uint16_t>()[r * n + c] != want)
        return ::testing::AssertionFailure()
               << "row " << r << " column " << c << " holds " << hex(d.data<uint16_t>()[r * n + c]) << ", want "
               << hex(want) << (want_zero ? " (zero padding)" : " (untouched)");
  }
  return ::testing::AssertionSuccess();
}

Buffer transposed_groups(const Buffer& b) {
  const int64_t g = b.view.shape[0], n = b.view.shape[1], k = b.view.shape[2];
  const int64_t es = dtype_storage_bytes(b.view.dtype);
  Buffer t(b.view.dtype, {g, k, n});
  for (int64_t gg = 0; gg < g; ++gg)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c)
        std::memcpy(t.bytes.data() + ((gg * k + c) * n + r) * es, b.bytes.data() + ((gg * n + r) * k + c) * es,
                    size_t(es));
  return t;
}

}  // namespace tessera::test
