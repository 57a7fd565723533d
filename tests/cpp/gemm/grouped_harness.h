// Test helpers for the MoE GEMMs of tessera/gemm_grouped.h: owned buffers with row-major views, random
// bf16 / FP8-quantised operands with their float64 values, grouped layouts (per-row ids, psum ends)
// and the float64 references the grouped tests compare against.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/gemm_grouped.h"
#include "test_util.h"

namespace tessera::test {

// An owned buffer with a row-major view (moving keeps the view valid; copying is not allowed).
struct Buffer {
  std::vector<uint8_t> bytes;
  TensorView view;

  Buffer() = default;
  Buffer(DType dtype, std::vector<int64_t> shape);
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&&) = default;
  Buffer& operator=(Buffer&&) = default;

  template <class T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  int64_t numel() const { return view.numel(); }
};

// A bf16 output filled with a value no GEMM here produces (not NaN, so "untouched" is exact).
constexpr uint16_t kPoisonBf16Value = 0xC0E8;  // -7.25
Buffer poisoned_bf16(std::vector<int64_t> shape);
Buffer poisoned_f32(std::vector<int64_t> shape);
Buffer int32_buffer(const std::vector<int32_t>& values);

// bf16 operand of any shape with random normal values; values = its float64 contents (row-major).
struct Bf16Operand {
  Buffer buf;
  std::vector<double> values;
};
Bf16Operand random_bf16(std::vector<int64_t> shape, Rng& rng);

// `groups` matrices [rows, k] of e4m3 quantised like DeepGEMM's casts: one fp32 scale per gran_rows x
// 128 block (amax floor 1e-4, scale amax / 448, q = e4m3(x * (1 / scale))). data [groups, rows, k]
// (or [rows, k] when groups == 0), scale [groups, ceil(rows/gran_rows), ceil(k/128)], deq the float64
// q * scale values [groups][rows][k]. Rows listed in zero_rows are all-zero inputs.
struct Fp8Operand {
  Buffer data, scale;
  std::vector<double> deq;
};
Fp8Operand quantised_fp8(int64_t groups, int64_t rows, int64_t k, int64_t gran_rows, Rng& rng,
                         const std::vector<int32_t>& row_group = {});

// A contiguous M-grouped layout: groups of `sizes` rows each starting at a multiple of `alignment`.
// layout = per-row ids ([M_sum], -1 elsewhere) or psum ends ([G]); row_group[r] = r's group or -1.
struct GroupedRows {
  std::vector<int32_t> layout, row_group;
  int64_t m_sum = 0;
};
GroupedRows grouped_rows(const std::vector<int64_t>& sizes, int64_t alignment, bool psum);

// D[r, n] = sum_k a[r, k] * b[g, n, k] for rows with group g >= 0 (0 elsewhere); a is [M, K] row-major
// float64 values, b [G, N, K].
std::vector<double> grouped_reference(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<int32_t>& row_group, int64_t n, int64_t k);

// calc_diff over the rows with row_group >= 0 of a bf16 [M, N] output and a float64 reference.
double grouped_calc_diff(const Buffer& d, const std::vector<double>& ref, const std::vector<int32_t>& row_group);
// Rows with row_group < 0: all +0 (want_zero) or all still kPoisonBf16Value. Reports the first offender.
::testing::AssertionResult other_rows_are(const Buffer& d, const std::vector<int32_t>& row_group, bool want_zero);

// [G, K, N] copy of a [G, N, K] buffer (the 'nn' form of b); elem_bytes 1 or 2.
Buffer transposed_groups(const Buffer& b);

}  // namespace tessera::test
