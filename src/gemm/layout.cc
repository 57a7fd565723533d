// DeepGEMM's scale-factor layout utilities (DeepGEMM's API, docs/gemm.md): exact shapes and strides, even
// though the CPU kernels read any layout.
#include <cmath>

#include "tessera/gemm.h"

namespace tessera::gemm {
namespace {

int64_t align_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

// Checks dst = [(G,) MN, cols] with the MN-major TMA-aligned strides for `cols` columns.
void check_mn_major_dst(const char* fn, const TensorView& src, const TensorView& dst, int64_t cols, DType dtype) {
  check_dtype(fn, "dst", dst, {dtype});
  TESSERA_CHECK(dst.ndim == src.ndim, fn, ": 'dst' must have ", src.ndim, " dimensions, got ", dst.ndim);
  const int64_t mn = src.size(-2), amn = align_up(mn, 4);
  TESSERA_CHECK(dst.size(-2) == mn && dst.size(-1) == cols && (src.ndim == 2 || dst.size(0) == src.size(0)), fn,
                ": 'dst' must have shape [", src.ndim == 3 ? std::to_string(src.size(0)) + ", " : std::string(), mn,
                ", ", cols, "], got ", dst.shape_str());
  const bool strides_ok = (mn <= 1 || dst.stride(-2) == 1) && (cols <= 1 || dst.stride(-1) == amn) &&
                          (src.ndim == 2 || dst.size(0) <= 1 || dst.stride(0) == amn * cols);
  TESSERA_CHECK(strides_ok, fn, ": 'dst' must be MN-major with TMA-aligned strides (1, ", amn, "), got ",
                dst.strides_str());
}

}  // namespace

int64_t get_tma_aligned_size(int64_t x, int64_t element_size) {
  TESSERA_CHECK(element_size > 0 && 16 % element_size == 0,
                "get_tma_aligned_size: argument 'element_size' must "
                "divide 16, got ",
                element_size);
  return align_up(x, 16 / element_size);
}

void copy_to_mn_major_tma_aligned(const TensorView& sf, const TensorView& dst) {
  const char* fn = "get_mn_major_tma_aligned_tensor";
  check_ndim(fn, "sf", sf, {2, 3});
  check_dtype(fn, "sf", sf, {DType::kF32});
  check_mn_major_dst(fn, sf, dst, sf.size(-1), DType::kF32);
  const int64_t groups = sf.ndim == 3 ? sf.shape[0] : 1, mn = sf.size(-2), k = sf.size(-1);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < mn; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const int64_t so = (sf.ndim == 3 ? g * sf.strides[0] : 0) + r * sf.stride(-2) + c * sf.stride(-1);
        const int64_t d_off = (sf.ndim == 3 ? g * dst.strides[0] : 0) + r * dst.stride(-2) + c * dst.stride(-1);
        dst.ptr<float>()[d_off] = sf.ptr<const float>()[so];
      }
}

void pack_ue8m0_mn_major(const TensorView& sf, const TensorView& dst) {
  const char* fn = "get_mn_major_tma_aligned_packed_ue8m0_tensor";
  check_ndim(fn, "sf", sf, {2, 3});
  check_dtype(fn, "sf", sf, {DType::kF32});
  const int64_t groups = sf.ndim == 3 ? sf.shape[0] : 1, mn = sf.size(-2), k = sf.size(-1);
  const int64_t packed = (k + 3) / 4;
  check_mn_major_dst(fn, sf, dst, packed, DType::kI32);
  // Validate everything before writing (outputs untouched on error).
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < mn; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float v =
            sf.ptr<const float>()[(sf.ndim == 3 ? g * sf.strides[0] : 0) + r * sf.stride(-2) + c * sf.stride(-1)];
        const uint32_t bits = f32_bits(v);
        TESSERA_CHECK(v > 0 && std::isfinite(v) && (bits & 0x7FFFFFu) == 0 && (bits >> 23) != 0, fn,
                      ": argument 'sf' must hold positive normal powers of two to pack as UE8M0, got ", v, " at (",
                      sf.ndim == 3 ? std::to_string(g) + ", " : std::string(), r, ", ", c, ")");
      }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < mn; ++r)
      for (int64_t j = 0; j < packed; ++j) {
        uint32_t word = 0;
        for (int b = 0; b < 4; ++b) {
          const int64_t c = 4 * j + b;
          if (c >= k) continue;  // missing K entries: exponent byte 0
          const float v =
              sf.ptr<const float>()[(sf.ndim == 3 ? g * sf.strides[0] : 0) + r * sf.stride(-2) + c * sf.stride(-1)];
          word |= (f32_bits(v) >> 23) << (8 * b);
        }
        const int64_t d_off = (sf.ndim == 3 ? g * dst.strides[0] : 0) + r * dst.stride(-2) + j * dst.stride(-1);
        dst.ptr<int32_t>()[d_off] = int32_t(word);
      }
}

}  // namespace tessera::gemm
