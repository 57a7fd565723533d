// Argument checks of the dense MHA prefill (see mla_varlen_args.h).
#include "attention/flash_mla/mla_varlen_args.h"

#include <cmath>
#include <utility>

#include "tessera/core/error.h"

namespace tessera::flash_mla {
namespace {

// Reads a cu_seqlens array into per-request (begin, length); checks the prefix-sum rules.
void read_cu_seqlens(const char* fn, const char* arg, const TensorView& cu, int64_t b, int64_t total, int64_t max_len,
                     const char* max_arg, std::vector<int64_t>* begin, std::vector<int64_t>* len) {
  check_defined(fn, arg, cu);
  check_dtype(fn, arg, cu, {DType::kI32});
  check_ndim(fn, arg, cu, {1});
  check_dim(fn, arg, cu, 0, b + 1, "batch_size + 1 (cu_seqlens_qo's length)");
  const int32_t* c = cu.ptr<int32_t>();
  TESSERA_CHECK(c[0] == 0 && c[b * cu.strides[0]] == total, fn, ": argument '", arg, "' must run from 0 to ", total,
                " (the tokens of the tensor it indexes), got ", c[0], " .. ", c[b * cu.strides[0]]);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t lo = c[i * cu.strides[0]], n = int64_t(c[(i + 1) * cu.strides[0]]) - lo;
    TESSERA_CHECK(n >= 0 && n <= max_len, fn, ": argument '", arg, "': request ", i, " has ", n,
                  " tokens; every count must be in [0, ", max_arg, " = ", max_len, "]");
    begin->push_back(lo);
    len->push_back(n);
  }
}

}  // namespace

VarlenLayout check_varlen_inputs(const char* fn, const VarlenInputs& in) {
  const TensorView &q = in.q, &k = in.k, &v = in.v;
  for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"q", &q}, {"k", &k}, {"v", &v}}) {
    check_defined(fn, name, *t);
    check_dtype(fn, name, *t, {DType::kBF16, DType::kF16});
    check_ndim(fn, name, *t, {3});
  }
  TESSERA_CHECK(k.dtype == q.dtype && v.dtype == q.dtype, fn,
                ": arguments 'q', 'k' and 'v' must share one dtype, "
                "got ",
                dtype_name(q.dtype), ", ", dtype_name(k.dtype), ", ", dtype_name(v.dtype));
  VarlenLayout l;
  l.total_q = q.shape[0];
  l.h_q = q.shape[1];
  l.d_qk = q.shape[2];
  l.total_kv = k.shape[0];
  l.h_kv = k.shape[1];
  l.d_v = v.shape[2];
  TESSERA_CHECK(l.d_qk >= 1 && k.shape[2] == l.d_qk, fn, ": argument 'k' must have head_dim ", l.d_qk,
                " (q's last dim), got shape ", k.shape_str());
  TESSERA_CHECK(v.shape[0] == l.total_kv && v.shape[1] == l.h_kv && l.d_v >= 1, fn, ": argument 'v' must have shape [",
                l.total_kv, ", ", l.h_kv, ", d_v >= 1] (k's tokens and heads), got ", v.shape_str());
  TESSERA_CHECK(l.h_kv >= 1 && l.h_q >= 1 && l.h_q % l.h_kv == 0, fn, ": num_heads of q (", l.h_q,
                ") must be a positive multiple of num_heads of k (", l.h_kv, ")");
  TESSERA_CHECK(in.max_seqlen_qo >= 0 && in.max_seqlen_qo * (l.h_q / l.h_kv) < (int64_t(1) << 30), fn,
                ": max_seqlen_qo * h_q / h_kv must be in [0, 2^30), got ", in.max_seqlen_qo, " * ", l.h_q / l.h_kv);
  TESSERA_CHECK(!in.softmax_scale || std::isfinite(*in.softmax_scale), fn,
                ": argument 'softmax_scale' must be finite, got ", *in.softmax_scale);
  l.b = in.cu_seqlens_qo.ndim == 1 ? in.cu_seqlens_qo.shape[0] - 1 : 0;
  TESSERA_CHECK(l.b >= 0, fn, ": argument 'cu_seqlens_qo' must hold batch_size + 1 >= 1 entries");
  read_cu_seqlens(fn, "cu_seqlens_qo", in.cu_seqlens_qo, l.b, l.total_q, in.max_seqlen_qo, "max_seqlen_qo", &l.q_begin,
                  &l.q_len);
  read_cu_seqlens(fn, "cu_seqlens_kv", in.cu_seqlens_kv, l.b, l.total_kv, in.max_seqlen_kv, "max_seqlen_kv",
                  &l.kv_begin, &l.kv_len);
  l.scale = in.softmax_scale.value_or(1.0 / std::sqrt(double(l.d_qk)));
  return l;
}

void check_varlen_tensor(const char* fn, const char* arg, const TensorView& t, std::initializer_list<DType> dtypes,
                         std::initializer_list<int64_t> shape, const char* const* dim_names, bool output,
                         const VarlenInputs& in) {
  check_defined(fn, arg, t);
  check_dtype(fn, arg, t, dtypes);
  const int nd = int(shape.size());
  check_ndim(fn, arg, t, {nd});
  int dim = 0;
  for (int64_t n : shape) {
    check_dim(fn, arg, t, dim, n, dim_names[dim]);
    ++dim;
  }
  if (!output) return;
  TESSERA_CHECK(t.strides[nd - 1] == 1 || t.shape[nd - 1] == 1, fn, ": argument '", arg,
                "' must have a contiguous last dim, got strides ", t.strides_str());
  for (const auto& [name, x] : {std::pair<const char*, const TensorView*>{"q", &in.q}, {"k", &in.k}, {"v", &in.v}})
    check_no_overlap(fn, arg, t, name, *x);
}

}  // namespace tessera::flash_mla
