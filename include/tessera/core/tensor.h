// tessera/core/tensor.h - non-owning tensor views and the argument checks every public function uses.
//
// A TensorView is (data pointer, dtype, shape, strides in elements). For packed fp4 (kF4E2M1) the
// view describes bytes: shape and strides count bytes that each hold two values.
// Views never own memory; the caller keeps the buffer alive for the duration of the call.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"

namespace tessera {

constexpr int kMaxDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  TensorView() = default;
  // Row-major (contiguous) view.
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape);
  // View with explicit strides (elements).
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, std::initializer_list<int64_t> strides);

  bool defined() const { return data != nullptr || numel() == 0; }
  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t stride(int d) const { return strides[d < 0 ? d + ndim : d]; }
  int64_t numel() const;
  bool is_contiguous() const;
  template <class T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // Byte offset span [lo, hi) touched by the view, used for overlap checks.
  void byte_span(const char** lo, const char** hi) const;
  std::string shape_str() const;    // "[128, 7168]"
  std::string strides_str() const;  // "(7168, 1)"
};

// ---- argument checks: each throws Error(kInvalidArgument) naming fn, the argument and the rule ----
void check_defined(const char* fn, const char* arg, const TensorView& t);
void check_dtype(const char* fn, const char* arg, const TensorView& t, std::initializer_list<DType> allowed);
void check_ndim(const char* fn, const char* arg, const TensorView& t, std::initializer_list<int> allowed);
void check_dim(const char* fn, const char* arg, const TensorView& t, int dim, int64_t expected, const char* what);
void check_same_shape(const char* fn, const char* arg, const TensorView& t, const char* other_arg,
                      const TensorView& other);
void check_row_major(const char* fn, const char* arg, const TensorView& t);  // stride(-1)==1, no overlap
void check_contiguous(const char* fn, const char* arg, const TensorView& t);
// Throws if two elements of an output view share memory (a stride of 0, or strides whose steps land
// inside another dimension's extent, in any dimension order).
void check_no_self_overlap(const char* fn, const char* arg, const TensorView& t);
// Throws if the byte ranges of an output and an input overlap (outputs must not alias inputs).
void check_no_overlap(const char* fn, const char* out_arg, const TensorView& out, const char* in_arg,
                      const TensorView& in);

// Major-ness of a 2-D (or last two dims of a 3-D) operand: stride(-1)==1 is "row major" (the last dim
// is contiguous), stride(-2)==1 is "column major". A [R,1] or [1,C] view is both.
bool last_dim_contiguous(const TensorView& t);
bool second_last_dim_contiguous(const TensorView& t);

}  // namespace tessera
