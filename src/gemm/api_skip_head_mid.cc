// fp8_gemm_nt_skip_head_mid (DeepGEMM's API, docs/gemm.md): the dense FP8 GEMM, then each head's L and R
// columns placed around a gap of M columns.
#include <cstring>
#include <vector>

#include "gemm/operands.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm_grouped.h"

namespace tessera::gemm {

void fp8_gemm_nt_skip_head_mid(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                               std::array<int64_t, 3> head_splits, const Recipe& recipe) {
  const char* fn = "fp8_gemm_nt_skip_head_mid";
  const auto [L, Mid, R] = head_splits;
  TESSERA_CHECK(L >= 0 && Mid >= 0 && R >= 0 && L + R > 0, fn,
                ": argument 'head_splits' (L, M, R) must be >= 0 with L + R > 0, got (", L, ", ", Mid, ", ", R, ")");
  check_ndim(fn, "b", b.data, {2});
  const int64_t n = b.data.shape[0], heads = n / (L + R);
  TESSERA_CHECK(n % (L + R) == 0, fn, ": N = ", n, " (rows of 'b') must be a multiple of L + R = ", L + R);
  check_ndim(fn, "d", d, {2});
  check_dtype(fn, "d", d, {DType::kBF16, DType::kF32});
  const int64_t width = n + heads * Mid;
  TESSERA_CHECK(d.shape[1] == width, fn, ": argument 'd' must have N + (N / (L + R)) * M = ", width,
                " columns, got shape ", d.shape_str());
  check_row_major(fn, "d", d);
  check_ndim(fn, "a", a.data, {2});
  TESSERA_CHECK(d.shape[0] == a.data.shape[0], fn, ": argument 'd' must have M = ", a.data.shape[0],
                " rows (the rows of 'a'), got shape ", d.shape_str());
  // The dense product goes to a temporary [M, N] (same dtype, so the one rounding is the GEMM's), then
  // each head's L and R columns are copied around the gap.
  const int64_t m = d.shape[0], es = dtype_storage_bytes(d.dtype);
  auto tmp = aligned_array<char>(size_t(std::max<int64_t>(m * n * es, 1)));
  const TensorView t(tmp.get(), d.dtype, {m, n});
  fp8_fp4_gemm_nt(a, b, t, nullptr, recipe);
  check_no_overlap(fn, "d", d, "a", a.data);
  check_no_overlap(fn, "d", d, "b", b.data);
  for (int64_t r = 0; r < m; ++r) {
    const char* srow = tmp.get() + r * n * es;
    char* drow = static_cast<char*>(d.data) + r * d.strides[0] * es;
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(drow + h * (L + Mid + R) * es, srow + h * (L + R) * es, L * es);
      std::memcpy(drow + (h * (L + Mid + R) + L + Mid) * es, srow + (h * (L + R) + L) * es, R * es);
    }
  }
}

}  // namespace tessera::gemm
