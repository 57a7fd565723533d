#include "gemm/operands.h"

#include <algorithm>
#include <cstring>

namespace tessera::gemm {

TensorView transpose_last2(const TensorView& t) {
  TensorView r = t;
  if (t.ndim >= 2) {
    std::swap(r.shape[t.ndim - 1], r.shape[t.ndim - 2]);
    std::swap(r.strides[t.ndim - 1], r.strides[t.ndim - 2]);
  }
  return r;
}

bool is_packed_fp4(DType t) {
  return t == DType::kF4E2M1 || t == DType::kI8 || t == DType::kU8;
}

static cpu::GemmSrcType src_type(DType t) {
  switch (t) {
    case DType::kBF16:
      return cpu::GemmSrcType::kBF16;
    case DType::kF32:
      return cpu::GemmSrcType::kF32;
    case DType::kF8E4M3:
      return cpu::GemmSrcType::kE4M3;
    default:
      return cpu::GemmSrcType::kE2M1;
  }
}

OperandInfo check_operand(const char* fn, const char* arg, const TensorView& t, bool rows_first,
                          std::initializer_list<DType> allowed) {
  check_ndim(fn, arg, t, {2});
  check_dtype(fn, arg, t, allowed);
  check_defined(fn, arg, t);
  const bool last_contig = last_dim_contiguous(t), second_contig = second_last_dim_contiguous(t);
  TESSERA_CHECK(last_contig || second_contig, fn, ": argument '", arg,
                "' must have stride(-1) == 1 or stride(-2) == 1 (K-major or MN-major), got shape ", t.shape_str(),
                " strides ", t.strides_str());
  // Canonical [rows, K] view.
  const TensorView v = rows_first ? t : transpose_last2(t);
  OperandInfo info;
  info.fp4 = is_packed_fp4(t.dtype);
  info.src.data = t.data;
  info.src.type = src_type(t.dtype);
  info.src.stride_r = v.strides[0];
  info.src.stride_k = v.strides[1];
  info.rows = v.shape[0];
  info.k = v.shape[1];
  if (info.fp4) {
    // Two values per byte along the contiguous dimension: K (K-major) or M/N (MN-major).
    if (v.strides[1] == 1 || v.shape[1] <= 1) {
      info.k = v.shape[1] * 2;
    } else {
      info.src.fp4_along_r = true;
      info.rows = v.shape[0] * 2;
    }
  }
  return info;
}

void check_output(const char* fn, const TensorView& d, const TensorView* c, int64_t m, int64_t n,
                  std::initializer_list<const std::pair<const char*, const TensorView*>> inputs, GemmProblem* p) {
  check_ndim(fn, "d", d, {2});
  check_dtype(fn, "d", d, {DType::kBF16, DType::kF32});
  check_defined(fn, "d", d);
  TESSERA_CHECK(d.shape[0] == m && d.shape[1] == n, fn, ": argument 'd' must have shape [M, N] = [", m, ", ", n,
                "], got ", d.shape_str());
  check_row_major(fn, "d", d);
  for (const auto& in : inputs) check_no_overlap(fn, "d", d, in.first, *in.second);
  p->d = d.data;
  p->d_type = d.dtype;
  p->ldd = d.shape[0] > 1 ? d.strides[0] : n;
  p->c = nullptr;
  if (c && c->data != nullptr) {
    check_ndim(fn, "c", *c, {2});
    TESSERA_CHECK(c->dtype == d.dtype, fn, ": argument 'c' must have the dtype of 'd' (", dtype_name(d.dtype),
                  "), got ", dtype_name(c->dtype));
    check_same_shape(fn, "c", *c, "d", d);
    check_row_major(fn, "c", *c);
    if (c->data == d.data) {
      TESSERA_CHECK(c->shape[0] <= 1 || c->strides[0] == d.strides[0], fn,
                    ": when 'c' is 'd' it must have the same strides, got ", c->strides_str(), " and ",
                    d.strides_str());
    } else {
      check_no_overlap(fn, "d", d, "c", *c);
    }
    p->c = c->data;
    p->c_type = c->dtype;
    p->ldc = c->shape[0] > 1 ? c->strides[0] : n;
  }
}

bool handle_empty_k(const GemmProblem& p) {
  if (p.k != 0) return false;
  // d = c exactly (bit for bit, -0.0 included), or zeros.
  const size_t row_bytes = size_t(p.n) * dtype_storage_bytes(p.d_type);
  for (int64_t r = 0; r < p.m; ++r) {
    char* d = static_cast<char*>(p.d) + r * p.ldd * dtype_storage_bytes(p.d_type);
    if (!p.c) {
      std::memset(d, 0, row_bytes);
    } else if (p.c != p.d) {
      std::memcpy(d, static_cast<const char*>(p.c) + r * p.ldc * dtype_storage_bytes(p.c_type), row_bytes);
    }
  }
  return true;
}

ScaleTable make_scale_table(const char* fn, const ScaleInput& in, int group, AlignedPtr<float>* storage) {
  const TensorView& sf = in.sf;
  const int64_t sf_rows = (in.rows + in.gran_mn - 1) / in.gran_mn;
  const int64_t sf_k = (in.k + in.gran_k - 1) / in.gran_k;
  check_ndim(fn, in.arg, sf, {2});
  check_dtype(fn, in.arg, sf, {DType::kF32, DType::kI32});
  check_defined(fn, in.arg, sf);
  const bool packed = sf.dtype == DType::kI32;
  const int64_t want_cols = packed ? (sf_k + 3) / 4 : sf_k;
  if (!(sf.shape[0] == sf_rows && sf.shape[1] == want_cols)) {
    // Report shapes as the caller passed them (the view here may be transposed to [rows, K]).
    const int64_t e0 = in.transposed ? want_cols : sf_rows, e1 = in.transposed ? sf_rows : want_cols;
    const TensorView given = in.transposed ? transpose_last2(sf) : sf;
    fail(ErrorCode::kInvalidArgument, fn, ": argument '", in.arg, "' must have shape [", e0, ", ", e1, "] (",
         packed ? "packed UE8M0 int32" : "float32", in.transposed ? ", K first" : "", " for ", in.rows,
         " rows with gran_mn ", in.gran_mn, ", K ", in.k, " with gran_k ", in.gran_k, "), got ", given.shape_str());
  }

  ScaleTable t;
  t.stride_g = sf_rows;
  t.g_div = in.gran_k / group;
  t.r_div = in.gran_mn;
  if (packed) {
    // Exponent bytes read in place: four K-consecutive ones per little-endian int32.
    t.ue8m0 = sf.ptr<const uint8_t>();
    t.row_bytes = sf.strides[0] * 4;
    t.word_bytes = sf.strides[1] * 4;
    return t;
  }
  if ((sf.strides[0] == 1 || sf_rows == 1) && (sf_k == 1 || sf.strides[1] >= sf_rows)) {
    t.data = sf.ptr<const float>();  // already MN-major: use in place
    t.stride_g = sf_k > 1 ? sf.strides[1] : sf_rows;
    return t;
  }
  *storage = aligned_array<float>(size_t(sf_k * sf_rows));
  float* out = storage->get();
  // Written in order (a K-major table of 1024 rows read in order wrote one line per value: 1.3% of an
  // fp8 M=1024, N=576, K=7168 GEMM).
  const float* in_data = sf.ptr<const float>();
  for (int64_t g = 0; g < sf_k; ++g)
    for (int64_t r = 0; r < sf_rows; ++r) out[g * sf_rows + r] = in_data[r * sf.strides[0] + g * sf.strides[1]];
  t.data = out;
  return t;
}

// Resolves (gran_mn, gran_k) for both operands from the recipe arguments and the operand/SF types.
void resolve_recipe(const char* fn, const Recipe& r, bool a_fp4, bool b_fp4, DType sfb_type, ScaleInput* sa,
                    ScaleInput* sb) {
  TESSERA_CHECK(!(r.recipe && (r.recipe_a || r.recipe_b)), fn,
                ": pass either 'recipe' or 'recipe_a'/'recipe_b', not both");
  if (r.recipe) {
    const auto& g = *r.recipe;
    sa->gran_mn = g[0];
    sb->gran_mn = g[1];
    sa->gran_k = sb->gran_k = g[2];
  } else {
    sa->gran_mn = 1;
    sa->gran_k = a_fp4 ? 32 : 128;
    sb->gran_mn = b_fp4 ? 1 : (sfb_type == DType::kI32 ? 1 : 128);
    sb->gran_k = b_fp4 ? 32 : 128;
    if (r.recipe_a) {
      sa->gran_mn = (*r.recipe_a)[0];
      sa->gran_k = (*r.recipe_a)[1];
    }
    if (r.recipe_b) {
      sb->gran_mn = (*r.recipe_b)[0];
      sb->gran_k = (*r.recipe_b)[1];
    }
  }
  for (const ScaleInput* s : {static_cast<const ScaleInput*>(sa), static_cast<const ScaleInput*>(sb)}) {
    TESSERA_CHECK(s->gran_mn >= 1, fn, ": recipe gran_mn for '", s->arg, "' must be >= 1, got ", s->gran_mn);
    TESSERA_CHECK(s->gran_k >= 32 && s->gran_k % 32 == 0, fn, ": recipe gran_k for '", s->arg,
                  "' must be a positive multiple of 32 (DeepGEMM uses 32 or 128), got ", s->gran_k);
  }
  const int lo = std::min(sa->gran_k, sb->gran_k), hi = std::max(sa->gran_k, sb->gran_k);
  TESSERA_CHECK(hi % lo == 0, fn, ": the K granularities of a (", sa->gran_k, ") and b (", sb->gran_k,
                ") must divide one another");
}

TensorView slice0(const TensorView& t, int64_t i) {
  TensorView r;
  r.data = static_cast<char*>(t.data) + i * t.strides[0] * dtype_storage_bytes(t.dtype);
  r.dtype = t.dtype;
  r.ndim = t.ndim - 1;
  for (int d = 1; d < t.ndim; ++d) {
    r.shape[d - 1] = t.shape[d];
    r.strides[d - 1] = t.strides[d];
  }
  return r;
}

TensorView slice_rows(const TensorView& t, int64_t r0, int64_t rows) {
  TensorView r = t;
  r.data = static_cast<char*>(t.data) + r0 * t.strides[0] * dtype_storage_bytes(t.dtype);
  r.shape[0] = rows;
  return r;
}

void check_group_count(const char* fn, const char* arg, int64_t groups) {
  TESSERA_CHECK(groups <= kMaxGroups, fn, ": argument '", arg, "' must hold at most 2^20 groups, got ", groups);
}

}  // namespace tessera::gemm
