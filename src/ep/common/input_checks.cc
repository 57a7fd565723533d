#include "ep/common/input_checks.h"

#include <cstring>

#include "tessera/core/error.h"

namespace tessera::ep::detail {

TokenInput check_tokens(const char* fn, const TensorView& x, const TensorView& sf) {
  TokenInput in;
  check_defined(fn, "x", x);
  check_ndim(fn, "x", x, {2});
  check_dtype(fn, "x", x, {DType::kBF16, DType::kF8E4M3});
  TESSERA_CHECK(x.shape[1] == 0 || x.strides[1] == 1, fn,
                ": argument 'x' must have contiguous rows (stride(-1) == 1), ", "got strides ", x.strides_str());
  in.fp8 = x.dtype == DType::kF8E4M3;
  in.tokens = x.shape[0];
  in.hidden = x.shape[1];
  in.hidden_bytes = in.hidden * dtype_storage_bytes(x.dtype);
  TESSERA_CHECK(in.hidden > 0 && in.hidden_bytes % 16 == 0, fn, ": argument 'x' rows must hold a positive multiple ",
                "of 16 bytes (hidden * element size), got hidden ", in.hidden, " of ", dtype_name(x.dtype));
  if (in.fp8) {
    TESSERA_CHECK(given(sf), fn, ": argument 'x' is float8_e4m3fn, so its scale factors must be given as ",
                  "x = (data, sf)");
    check_ndim(fn, "x.sf", sf, {2});
    check_dtype(fn, "x.sf", sf, {DType::kF32, DType::kI32});
    TESSERA_CHECK(sf.shape[0] == in.tokens && sf.shape[1] >= 1, fn, ": argument 'x.sf' must be [", in.tokens,
                  ", packs >= 1] (4-byte packs per token), got ", sf.shape_str());
    in.packs = sf.shape[1];
  } else {
    TESSERA_CHECK(!given(sf), fn, ": argument 'x' is bfloat16; scale factors are only for FP8 x");
  }
  return in;
}

std::vector<char> contiguous_packs(const TensorView& sf, int64_t tokens, int64_t packs) {
  std::vector<char> out(size_t(tokens * packs * 4));
  const char* base = static_cast<const char*>(sf.data);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t p = 0; p < packs; ++p)
      std::memcpy(&out[size_t((t * packs + p) * 4)], base + (t * sf.strides[0] + p * sf.strides[1]) * 4, 4);
  return out;
}

std::vector<float> contiguous_f32(const char* fn, const char* arg, const TensorView& t, int64_t rows, int64_t cols) {
  check_dtype(fn, arg, t, {DType::kF32});
  check_ndim(fn, arg, t, {2});
  TESSERA_CHECK(t.shape[0] == rows && t.shape[1] == cols, fn, ": argument '", arg, "' must be [", rows, ", ", cols,
                "], got ", t.shape_str());
  std::vector<float> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = t.ptr<float>()[r * t.strides[0] + c * t.strides[1]];
  return out;
}

const char* packs_rows(const TensorView& sf, int64_t tokens, int64_t packs, std::vector<char>* storage) {
  if (tokens == 0 || ((sf.strides[1] == 1 || packs == 1) && (sf.strides[0] == packs || tokens == 1)))
    return static_cast<const char*>(sf.data);
  *storage = contiguous_packs(sf, tokens, packs);
  return storage->data();
}

const float* f32_rows(const char* fn, const char* arg, const TensorView& t, int64_t rows, int64_t cols,
                      std::vector<float>* storage) {
  check_dtype(fn, arg, t, {DType::kF32});
  check_ndim(fn, arg, t, {2});
  TESSERA_CHECK(t.shape[0] == rows && t.shape[1] == cols, fn, ": argument '", arg, "' must be [", rows, ", ", cols,
                "], got ", t.shape_str());
  if (rows == 0 || ((t.strides[1] == 1 || cols == 1) && (t.strides[0] == cols || rows == 1))) return t.ptr<float>();
  *storage = contiguous_f32(fn, arg, t, rows, cols);
  return storage->data();
}

}  // namespace tessera::ep::detail
