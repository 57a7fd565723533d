// DeepGEMM's einsum and fp8_einsum (DeepGEMM's API, docs/gemm.md), each reduced to GemmProblems: one per
// head for the per-head expressions, one per batch for 'bmk,bnk->mn'.
#include <cstring>
#include <vector>

#include "gemm/operands.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm_grouped.h"

namespace tessera::gemm {
namespace {

// A problem over 2-D canonical operands (rows, K) described by raw strides.
GemmProblem make_problem(const char* fn, int64_t m, int64_t n, int64_t k, cpu::GemmSrc a, cpu::GemmSrc b, void* d,
                         DType d_type, int64_t ldd) {
  GemmProblem p;
  p.fn = fn;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = a;
  p.b = b;
  p.d = d;
  p.d_type = d_type;
  p.ldd = ldd;
  return p;
}

cpu::GemmSrc src(const TensorView& t, int64_t offset_elems, int64_t stride_r, int64_t stride_k) {
  cpu::GemmSrc s;
  s.data = static_cast<const char*>(t.data) + offset_elems * dtype_storage_bytes(t.dtype);
  s.type = t.dtype == DType::kBF16  ? cpu::GemmSrcType::kBF16
           : t.dtype == DType::kF32 ? cpu::GemmSrcType::kF32
                                    : cpu::GemmSrcType::kE4M3;
  s.stride_r = stride_r;
  s.stride_k = stride_k;
  return s;
}

void check_3d(const char* fn, const char* arg, const TensorView& t, std::initializer_list<DType> types) {
  check_ndim(fn, arg, t, {3});
  check_dtype(fn, arg, t, types);
  check_defined(fn, arg, t);
}

// 'bhr,hdr->bhd' (a [B,H,R], b [H,D,R] -> d [B,H,D]) and 'bhd,hdr->bhr' (a [B,H,D], b [H,D,R] -> d [B,H,R]):
// one problem per head h, m = B.
std::vector<GemmProblem> head_problems(const char* fn, bool bhd_out, const TensorView& a, const TensorView& b,
                                       const TensorView& d) {
  const int64_t B = a.shape[0], H = a.shape[1];
  TESSERA_CHECK(b.shape[0] == H, fn, ": argument 'b' dimension 0 must be H = ", H, ", got shape ", b.shape_str());
  const int64_t dd = b.shape[1], r = b.shape[2];
  const int64_t k = bhd_out ? r : dd, n = bhd_out ? dd : r;
  TESSERA_CHECK(a.shape[2] == k, fn, ": argument 'a' dimension 2 must be ", bhd_out ? "R = " : "D = ", k,
                ", got shape ", a.shape_str());
  TESSERA_CHECK(d.shape[0] == B && d.shape[1] == H && d.shape[2] == n, fn, ": argument 'd' must have shape [", B, ", ",
                H, ", ", n, "], got ", d.shape_str());
  check_no_self_overlap(fn, "d", d);
  for (const auto& [arg, t] : {std::pair<const char*, const TensorView*>{"a", &a}, {"b", &b}, {"d", &d}})
    TESSERA_CHECK(t->shape[2] <= 1 || t->strides[2] == 1, fn, ": argument '", arg,
                  "' must have stride(2) == 1, got strides ", t->strides_str());
  check_no_overlap(fn, "d", d, "a", a);
  check_no_overlap(fn, "d", d, "b", b);
  std::vector<GemmProblem> out;
  for (int64_t h = 0; h < H; ++h) {
    const cpu::GemmSrc as = src(a, h * a.strides[1], a.strides[0], 1);
    const cpu::GemmSrc bs = bhd_out ? src(b, h * b.strides[0], b.strides[1], 1)   // b[h] as [D, R]
                                    : src(b, h * b.strides[0], 1, b.strides[1]);  // b[h]^T as [R, D]
    out.push_back(make_problem(fn, B, n, k, as, bs,
                               static_cast<char*>(d.data) + h * d.strides[1] * dtype_storage_bytes(d.dtype), d.dtype,
                               d.strides[0]));
  }
  return out;
}

}  // namespace

void einsum(const std::string& expr, const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c,
            EinsumOrder order) {
  const char* fn = "einsum";
  const bool has_c = c && c->data;
  if (expr == "bmk,bnk->mn") {
    check_3d(fn, "a", a, {DType::kBF16});
    check_3d(fn, "b", b, {DType::kBF16});
    const int64_t batches = a.shape[0], m = a.shape[1], k = a.shape[2], n = b.shape[1];
    TESSERA_CHECK(b.shape[0] == batches && b.shape[2] == k, fn, ": argument 'b' must have shape [", batches, ", N, ", k,
                  "], got ", b.shape_str());
    check_ndim(fn, "d", d, {2});
    check_dtype(fn, "d", d, {DType::kBF16, DType::kF32});
    TESSERA_CHECK(d.shape[0] == m && d.shape[1] == n, fn, ": argument 'd' must have shape [", m, ", ", n, "], got ",
                  d.shape_str());
    check_row_major(fn, "d", d);
    if (d.dtype == DType::kF32) {
      TESSERA_CHECK(has_c && c->data == d.data, fn, ": with float32 'd', 'bmk,bnk->mn' accumulates into d: pass c=d");
      TESSERA_CHECK(c->ndim == 2 && c->shape[0] == m && c->shape[1] == n && c->strides[0] == d.strides[0] &&
                        (n <= 1 || c->strides[1] == d.strides[1]),
                    fn, ": argument 'c' must be 'd' itself (shape ", d.shape_str(), ", strides ", d.strides_str(),
                    "), got shape ", c->shape_str(), " strides ", c->strides_str());
    } else {
      TESSERA_CHECK(!has_c, fn, ": with bfloat16 'd', 'bmk,bnk->mn' takes no 'c'");
    }
    check_no_overlap(fn, "d", d, "a", a);
    check_no_overlap(fn, "d", d, "b", b);
    // Sum over the batch in fp32 (in d itself for fp32 d, else in a temporary), batch by batch in order.
    AlignedPtr<float> acc;
    float* sum = d.dtype == DType::kF32 ? d.ptr<float>() : nullptr;
    int64_t ld = d.strides[0];
    if (!sum) {
      acc = aligned_array<float>(size_t(std::max<int64_t>(m * n, 1)));
      std::memset(acc.get(), 0, size_t(m * n) * 4);
      sum = acc.get();
      ld = n;
    }
    for (int64_t s = 0; s < batches; ++s) {
      GemmProblem p = make_problem(fn, m, n, k, src(a, s * a.strides[0], a.strides[1], a.strides[2]),
                                   src(b, s * b.strides[0], b.strides[1], b.strides[2]), sum, DType::kF32, ld);
      p.c = sum;
      p.c_type = DType::kF32;
      p.ldc = ld;
      if (k > 0) run_gemm(p);
    }
    if (d.dtype == DType::kBF16)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) d.ptr<uint16_t>()[r * d.strides[0] + j] = f32_to_bf16(sum[r * n + j]);
    return;
  }
  const bool bhd = expr == "bhr,hdr->bhd";
  if (!bhd && expr != "bhd,hdr->bhr")
    TESSERA_NOT_IMPLEMENTED(fn, ": expression '", expr, "' (supported: 'bmk,bnk->mn', 'bhr,hdr->bhd', 'bhd,hdr->bhr')");
  check_3d(fn, "a", a, {DType::kBF16});
  check_3d(fn, "b", b, {DType::kBF16});
  check_3d(fn, "d", d, {DType::kBF16, DType::kF32});
  TESSERA_CHECK(!has_c, fn, ": '", expr, "' takes no 'c'");
  std::vector<GemmProblem> problems = head_problems(fn, bhd, a, b, d);
  for (GemmProblem& p : problems) p.k_chain = order == EinsumOrder::kOneChain;
  if (problems.empty()) return;
  if (problems[0].k == 0) {
    for (GemmProblem& p : problems) handle_empty_k(p);
    return;
  }
  run_gemm_batch(problems.data(), int64_t(problems.size()));
}

void fp8_einsum(const std::string& expr, const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                const TensorView* c, const Recipe& recipe) {
  const char* fn = "fp8_einsum";
  if (expr != "bhr,hdr->bhd")
    TESSERA_NOT_IMPLEMENTED(fn, ": expression '", expr, "' (only 'bhr,hdr->bhd' is provided on the CPU)");
  check_3d(fn, "a", a.data, {DType::kF8E4M3});
  check_3d(fn, "b", b.data, {DType::kF8E4M3});
  check_3d(fn, "d", d, {DType::kBF16, DType::kF32});
  check_3d(fn, "a.scale", a.scale, {DType::kF32});
  check_3d(fn, "b.scale", b.scale, {DType::kF32});
  std::vector<GemmProblem> problems = head_problems(fn, true, a.data, b.data, d);
  const int64_t B = a.data.shape[0], H = a.data.shape[1], D = b.data.shape[1], R = b.data.shape[2];
  // The scales' batch and head dimensions index per head below; their K/N extents are checked by the recipe.
  TESSERA_CHECK(a.scale.shape[0] == B && a.scale.shape[1] == H, fn, ": argument 'a.scale' must have shape [", B, ", ",
                H, ", ceil(R / gran_k)] (the batch and heads of 'a'), got ", a.scale.shape_str());
  TESSERA_CHECK(b.scale.shape[0] == H, fn, ": argument 'b.scale' must have shape [", H,
                ", ceil(D / gran_n), ceil(R / gran_k)] (the heads of 'b'), got ", b.scale.shape_str());
  if (c && c->data) {  // d = c + x.y per head (c may be d)
    check_3d(fn, "c", *c, {d.dtype});
    check_same_shape(fn, "c", *c, "d", d);
    TESSERA_CHECK(c->shape[2] <= 1 || c->strides[2] == 1, fn, ": argument 'c' must have stride(2) == 1, got strides ",
                  c->strides_str());
    if (c->data != d.data) {
      check_no_overlap(fn, "d", d, "c", *c);
    } else {
      TESSERA_CHECK(c->strides[0] == d.strides[0] && c->strides[1] == d.strides[1], fn,
                    ": when 'c' is 'd' it must have the same strides");
    }
    for (int64_t h = 0; h < H; ++h) {
      GemmProblem& p = problems[size_t(h)];
      p.c = static_cast<const char*>(c->data) + h * c->strides[1] * dtype_storage_bytes(c->dtype);
      p.c_type = c->dtype;
      p.ldc = c->strides[0];
    }
  }
  check_no_overlap(fn, "d", d, "a.scale", a.scale);
  check_no_overlap(fn, "d", d, "b.scale", b.scale);
  std::vector<AlignedPtr<float>> stores(size_t(2 * H));
  for (int64_t h = 0; h < H; ++h) {
    GemmProblem& p = problems[size_t(h)];
    ScaleInput sa{"a.scale",
                  TensorView(static_cast<char*>(a.scale.data) + h * a.scale.strides[1] * 4, DType::kF32,
                             {B, a.scale.shape[2]}, {a.scale.strides[0], a.scale.strides[2]}),
                  B, R};
    ScaleInput sb{"b.scale", slice0(b.scale, h), D, R};
    resolve_recipe(fn, recipe, false, false, DType::kF32, &sa, &sb);
    p.group = std::min(sa.gran_k, sb.gran_k);
    p.sa = make_scale_table(fn, sa, p.group, &stores[size_t(2 * h)]);
    p.sb = make_scale_table(fn, sb, p.group, &stores[size_t(2 * h + 1)]);
  }
  if (problems.empty()) return;
  if (R == 0) {
    for (GemmProblem& p : problems) handle_empty_k(p);
    return;
  }
  run_gemm_batch(problems.data(), int64_t(problems.size()));
}

}  // namespace tessera::gemm
