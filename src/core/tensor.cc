#include "tessera/core/tensor.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace tessera {

TensorView::TensorView(void* data_, DType dtype_, std::initializer_list<int64_t> shape_)
    : data(data_), dtype(dtype_), ndim(int(shape_.size())) {
  TESSERA_CHECK(ndim <= kMaxDims, "TensorView: at most ", kMaxDims, " dimensions, got ", ndim);
  std::copy(shape_.begin(), shape_.end(), shape);
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

TensorView::TensorView(void* data_, DType dtype_, std::initializer_list<int64_t> shape_,
                       std::initializer_list<int64_t> strides_)
    : data(data_), dtype(dtype_), ndim(int(shape_.size())) {
  TESSERA_CHECK(ndim <= kMaxDims, "TensorView: at most ", kMaxDims, " dimensions, got ", ndim);
  TESSERA_CHECK(strides_.size() == shape_.size(), "TensorView: ", shape_.size(), " sizes but ", strides_.size(),
                " strides");
  std::copy(shape_.begin(), shape_.end(), shape);
  std::copy(strides_.begin(), strides_.end(), strides);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

void TensorView::byte_span(const char** lo, const char** hi) const {
  const int64_t es = dtype_storage_bytes(dtype);
  int64_t min_off = 0, max_off = 0;
  if (numel() == 0) {
    *lo = *hi = static_cast<const char*>(data);
    return;
  }
  for (int d = 0; d < ndim; ++d) {
    const int64_t ext = (shape[d] - 1) * strides[d];
    if (ext < 0)
      min_off += ext;
    else
      max_off += ext;
  }
  *lo = static_cast<const char*>(data) + min_off * es;
  *hi = static_cast<const char*>(data) + (max_off + 1) * es;
}

static std::string join(const int64_t* v, int n, char open, char close) {
  std::ostringstream os;
  os << open;
  for (int i = 0; i < n; ++i) os << (i ? ", " : "") << v[i];
  if (n == 1 && open == '(') os << ',';
  os << close;
  return os.str();
}
std::string TensorView::shape_str() const {
  return join(shape, ndim, '[', ']');
}
std::string TensorView::strides_str() const {
  return join(strides, ndim, '(', ')');
}

void check_defined(const char* fn, const char* arg, const TensorView& t) {
  TESSERA_CHECK(t.data != nullptr || t.numel() == 0, fn, ": argument '", arg, "' has a null data pointer");
}

void check_dtype(const char* fn, const char* arg, const TensorView& t, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return;
  std::ostringstream os;
  int i = 0;
  for (DType d : allowed) os << (i++ ? " or " : "") << dtype_name(d);
  fail(ErrorCode::kInvalidArgument, fn, ": argument '", arg, "' must have dtype ", os.str(), ", got ",
       dtype_name(t.dtype));
}

void check_ndim(const char* fn, const char* arg, const TensorView& t, std::initializer_list<int> allowed) {
  for (int n : allowed)
    if (t.ndim == n) return;
  std::ostringstream os;
  int i = 0;
  for (int n : allowed) os << (i++ ? " or " : "") << n;
  fail(ErrorCode::kInvalidArgument, fn, ": argument '", arg, "' must be ", os.str(), "-D, got shape ", t.shape_str());
}

void check_dim(const char* fn, const char* arg, const TensorView& t, int dim, int64_t expected, const char* what) {
  TESSERA_CHECK(t.size(dim) == expected, fn, ": argument '", arg, "' dimension ", dim, " must be ", what, " = ",
                expected, ", got shape ", t.shape_str());
}

void check_same_shape(const char* fn, const char* arg, const TensorView& t, const char* other_arg,
                      const TensorView& other) {
  bool same = t.ndim == other.ndim;
  for (int d = 0; same && d < t.ndim; ++d) same = t.shape[d] == other.shape[d];
  TESSERA_CHECK(same, fn, ": argument '", arg, "' must have the shape of '", other_arg, "' ", other.shape_str(),
                ", got ", t.shape_str());
}

void check_row_major(const char* fn, const char* arg, const TensorView& t) {
  TESSERA_CHECK(t.ndim >= 1 && (t.stride(-1) == 1 || t.size(-1) <= 1), fn, ": argument '", arg,
                "' must be row-major (stride(-1) == 1), got strides ", t.strides_str());
  // Each outer step must clear the whole extent of the dimensions inside it.
  int64_t inner_extent = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    TESSERA_CHECK(d == t.ndim - 1 || t.shape[d] <= 1 || t.strides[d] >= inner_extent, fn, ": argument '", arg,
                  "' has overlapping rows (shape ", t.shape_str(), ", strides ", t.strides_str(), ")");
    if (t.shape[d] > 1) inner_extent += (t.shape[d] - 1) * (t.strides[d] < 0 ? -t.strides[d] : t.strides[d]);
  }
}

void check_no_self_overlap(const char* fn, const char* arg, const TensorView& t) {
  // Sufficient test (the usual one): visiting dimensions by increasing |stride|, each stride must clear
  // the extent spanned by the dimensions before it.
  if (t.numel() == 0) return;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of dimensions with size > 1
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] > 1) dims.emplace_back(t.strides[d] < 0 ? -t.strides[d] : t.strides[d], t.shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;
  for (const auto& [stride, size] : dims) {
    TESSERA_CHECK(stride >= extent, fn, ": output '", arg, "' has elements that share memory (shape ", t.shape_str(),
                  ", strides ", t.strides_str(), "); pass a view without repeated or interleaved elements");
    extent = stride * (size - 1) + extent;
  }
}

void check_contiguous(const char* fn, const char* arg, const TensorView& t) {
  TESSERA_CHECK(t.is_contiguous(), fn, ": argument '", arg, "' must be contiguous, got shape ", t.shape_str(),
                " strides ", t.strides_str());
}

void check_no_overlap(const char* fn, const char* out_arg, const TensorView& out, const char* in_arg,
                      const TensorView& in) {
  if (out.numel() == 0 || in.numel() == 0) return;
  const char *a0, *a1, *b0, *b1;
  out.byte_span(&a0, &a1);
  in.byte_span(&b0, &b1);
  TESSERA_CHECK(a1 <= b0 || b1 <= a0, fn, ": output '", out_arg, "' must not overlap input '", in_arg, "'");
}

bool last_dim_contiguous(const TensorView& t) {
  return t.ndim >= 1 && (t.stride(-1) == 1 || t.size(-1) == 1);
}
bool second_last_dim_contiguous(const TensorView& t) {
  return t.ndim >= 2 && (t.stride(-2) == 1 || t.size(-2) == 1);
}

}  // namespace tessera
