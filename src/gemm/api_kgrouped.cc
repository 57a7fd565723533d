// K-grouped GEMMs (DeepGEMM's API, docs/gemm.md; MoE weight gradients): D[g] = C[g] + A[K_g]^T . B[K_g]. Each
// group is one GemmProblem over its K range; all of them run as one batch.
#include <cstring>
#include <vector>

#include "gemm/operands.h"
#include "tessera/gemm_grouped.h"

namespace tessera::gemm {
namespace {

struct KRange {
  int64_t k0, k1;
  int64_t sf_k;  // K values the group's scale-factor rows cover: ceil(sf_k / gran_k) rows (DeepGEMM's rule)
};

int64_t align_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}
int32_t at(const TensorView& t, int64_t i) {
  return t.ptr<const int32_t>()[i * t.strides[0]];
}

// The K range of every group, validated against sum_k (the rows of a and b).
std::vector<KRange> parse_k_layout(const char* fn, const KGroupedLayout& L, int64_t groups, int64_t sum_k) {
  const TensorView& t = L.grouped_layout;
  check_ndim(fn, "grouped_layout", t, {1});
  check_dtype(fn, "grouped_layout", t, {DType::kI32});
  check_defined(fn, "grouped_layout", t);
  check_dim(fn, "grouped_layout", t, 0, groups, "G (the groups of 'd')");
  const int64_t align = L.k_alignment;
  TESSERA_CHECK(align >= 1, fn, ": the K alignment must be >= 1, got ", align);
  TESSERA_CHECK(L.ks.empty() || int64_t(L.ks.size()) == groups, fn, ": argument 'ks_cpu' must have G = ", groups,
                " entries, got ", L.ks.size());
  std::vector<KRange> r;
  int64_t pos = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t v = at(t, g);
    if (!L.use_psum_layout) {
      TESSERA_CHECK(v >= 0 && v % align == 0, fn, ": argument 'grouped_layout' entry ", g, " (K of group ", g,
                    ") = ", v, " must be >= 0 and a multiple of the K alignment ", align);
      TESSERA_CHECK(L.ks.empty() || L.ks[size_t(g)] == v, fn, ": argument 'ks_cpu' entry ", g, " = ",
                    L.ks.empty() ? 0 : L.ks[size_t(g)], " differs from 'grouped_layout' entry ", v);
      r.push_back({pos, pos + v, v});
      pos += v;
    } else {
      const int64_t start = align_up(pos, align);
      TESSERA_CHECK(v >= pos && (v == pos || v >= start), fn, ": argument 'grouped_layout' (psum ends) entry ", g,
                    " = ", v, " must be >= the previous end ", pos, " and not inside the alignment gap before ", start);
      const int64_t k0 = v == pos ? pos : start;
      // ks_cpu may give the group's K or that K aligned up (what DeepGEMM's own psum callers pass).
      const int64_t kg = v - k0, kg_aligned = align_up(kg, align);
      TESSERA_CHECK(L.ks.empty() || L.ks[size_t(g)] == kg || L.ks[size_t(g)] == kg_aligned, fn,
                    ": argument 'ks_cpu' entry ", g, " = ", L.ks.empty() ? 0 : L.ks[size_t(g)],
                    " is neither the psum layout's K of group ", g, " (", kg, ") nor that K aligned to ", align, " (",
                    kg_aligned, ")");
      r.push_back({k0, v, kg});
      pos = v;
    }
  }
  TESSERA_CHECK(pos <= sum_k, fn, ": the groups need ", pos, " K rows but 'a' and 'b' have ", sum_k);
  return r;
}

// Per-channel scale factors of one operand, group by group: fp32 [sum_g ceil(k_g/gran_k), MN] or packed
// int32 [sum_g ceil(k_g/(4 gran_k)), MN]; returns one compact table per group (rows = channels).
std::vector<ScaleTable> per_channel_tables(const char* fn, const char* arg, const TensorView& sf,
                                           const std::vector<KRange>& ranges, int64_t mn, int gran_k,
                                           std::vector<AlignedPtr<float>>* storage) {
  check_ndim(fn, arg, sf, {2});
  check_dtype(fn, arg, sf, {DType::kF32, DType::kI32});
  check_defined(fn, arg, sf);
  const bool packed = sf.dtype == DType::kI32;
  int64_t rows = 0;
  for (const KRange& r : ranges) {
    const int64_t blocks = (r.sf_k + gran_k - 1) / gran_k;
    rows += packed ? (blocks + 3) / 4 : blocks;
  }
  TESSERA_CHECK(
      sf.shape[0] == rows && sf.shape[1] == mn, fn, ": argument '", arg, "' must have shape [", rows, ", ", mn, "] (",
      packed ? "packed UE8M0 int32: sum over groups of ceil(k_g / (4 * " : "float32: sum over groups of ceil(k_g / ",
      gran_k, packed ? "))" : ")", " rows, one column per channel), got ", sf.shape_str());
  std::vector<ScaleTable> tables;
  int64_t row = 0;
  for (const KRange& r : ranges) {
    const int64_t blocks = (r.sf_k + gran_k - 1) / gran_k;
    ScaleTable t;
    t.stride_g = mn;
    storage->push_back(aligned_array<float>(size_t(std::max<int64_t>(blocks, 1) * mn)));
    float* out = storage->back().get();
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t c = 0; c < mn; ++c) {
        if (packed) {
          const int32_t w = sf.ptr<const int32_t>()[(row + b / 4) * sf.strides[0] + c * sf.strides[1]];
          out[b * mn + c] = ue8m0_to_f32(uint8_t(uint32_t(w) >> (8 * (b % 4))));
        } else {
          out[b * mn + c] = sf.ptr<const float>()[(row + b) * sf.strides[0] + c * sf.strides[1]];
        }
      }
    t.data = out;
    tables.push_back(t);
    row += packed ? (blocks + 3) / 4 : blocks;
  }
  return tables;
}

void k_grouped(const char* fn, const TensorView& a, const TensorView* sfa, const TensorView& b, const TensorView* sfb,
               const TensorView& d, const TensorView* c, const KGroupedLayout& layout, int gran_k) {
  const bool scaled = sfa != nullptr;
  static constexpr std::initializer_list<DType> kBf16 = {DType::kBF16};
  static constexpr std::initializer_list<DType> kFp8 = {DType::kF8E4M3};
  const OperandInfo ai = check_operand(fn, "a", a, false, scaled ? kFp8 : kBf16);
  const OperandInfo bi = check_operand(fn, "b", b, false, scaled ? kFp8 : kBf16);
  TESSERA_CHECK(ai.k == bi.k, fn, ": 'a' and 'b' must have the same number of K rows, got ", a.shape_str(), " and ",
                b.shape_str());
  check_ndim(fn, "d", d, {3});
  check_dtype(fn, "d", d, {DType::kF32});
  const int64_t groups = d.shape[0], m = ai.rows, n = bi.rows;
  check_group_count(fn, "d", groups);
  TESSERA_CHECK(d.shape[1] == m && d.shape[2] == n, fn, ": argument 'd' must have shape [G, M, N] = [", groups, ", ", m,
                ", ", n, "], got ", d.shape_str());
  if (c && c->data) {
    check_same_shape(fn, "c", *c, "d", d);
    check_dtype(fn, "c", *c, {DType::kF32});
    TESSERA_CHECK(groups <= 1 || c->strides[0] >= m * c->strides[1], fn, ": argument 'c' groups overlap");
  }
  TESSERA_CHECK(groups <= 1 || d.strides[0] >= m * d.strides[1], fn, ": argument 'd' groups overlap (strides ",
                d.strides_str(), ")");
  const std::vector<KRange> ranges = parse_k_layout(fn, layout, groups, ai.k);
  std::vector<AlignedPtr<float>> storage;
  std::vector<ScaleTable> ta, tb;
  if (scaled) {
    TESSERA_CHECK(gran_k >= 32 && gran_k % 32 == 0, fn,
                  ": recipe gran_k must be a positive multiple of 32 (32 or 128), got ", gran_k);
    ta = per_channel_tables(fn, "a.scale", *sfa, ranges, m, gran_k, &storage);
    tb = per_channel_tables(fn, "b.scale", *sfb, ranges, n, gran_k, &storage);
  }
  std::vector<GemmProblem> problems, empty;
  for (int64_t g = 0; g < groups; ++g) {
    GemmProblem p;
    p.fn = fn;
    p.m = m;
    p.n = n;
    p.k = ranges[g].k1 - ranges[g].k0;
    p.a = ai.src;
    p.b = bi.src;
    p.a.data = static_cast<const char*>(ai.src.data) + ranges[g].k0 * ai.src.stride_k * dtype_storage_bytes(a.dtype);
    p.b.data = static_cast<const char*>(bi.src.data) + ranges[g].k0 * bi.src.stride_k * dtype_storage_bytes(b.dtype);
    const TensorView dg = slice0(d, g);
    const TensorView cg = c && c->data ? slice0(*c, g) : TensorView();
    check_output(fn, dg, c && c->data ? &cg : nullptr, m, n, {{"a", &a}, {"b", &b}}, &p);
    if (scaled) {
      p.group = gran_k;
      p.sa = ta[g];
      p.sb = tb[g];
    }
    (p.k == 0 ? empty : problems).push_back(p);
  }
  for (const GemmProblem& p : empty) handle_empty_k(p);
  run_gemm_batch(problems.data(), int64_t(problems.size()));
}

}  // namespace

void k_grouped_bf16_gemm_tn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const TensorView* c, const KGroupedLayout& layout) {
  k_grouped("k_grouped_bf16_gemm_tn_contiguous", a, nullptr, b, nullptr, d, c, layout, 0);
}

void k_grouped_fp8_gemm_tn_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                      const TensorView* c, const KGroupedLayout& layout, int gran_k) {
  k_grouped("k_grouped_fp8_gemm_tn_contiguous", a.data, &a.scale, b.data, &b.scale, d, c, layout, gran_k);
}

void k_grouped_fp8_gemm_nt_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                      const TensorView* c, const std::vector<int64_t>& ks) {
  const char* fn = "k_grouped_fp8_gemm_nt_contiguous";
  check_ndim(fn, "d", d, {3});
  check_dtype(fn, "d", d, {DType::kF32});
  const int64_t groups = d.shape[0], m = d.shape[1], n = d.shape[2];
  check_group_count(fn, "d", groups);
  TESSERA_CHECK(int64_t(ks.size()) == groups, fn, ": argument 'ks' must have G = ", groups, " entries, got ",
                ks.size());
  int64_t sum_k = 0, sf_cols = 0;
  for (int64_t k : ks) {
    TESSERA_CHECK(k >= 0, fn, ": argument 'ks' entries must be >= 0, got ", k);
    sum_k += k;
    sf_cols += (k + 127) / 128;
  }
  for (const auto& [arg, t, rows] :
       {std::tuple<const char*, const TensorView*, int64_t>{"a", &a.data, m}, {"b", &b.data, n}}) {
    check_ndim(fn, arg, *t, {1});
    check_dtype(fn, arg, *t, {DType::kF8E4M3});
    check_defined(fn, arg, *t);
    TESSERA_CHECK(t->shape[0] == rows * sum_k && (t->shape[0] <= 1 || t->strides[0] == 1), fn, ": argument '", arg,
                  "' must be a contiguous 1-D tensor of ", rows * sum_k, " values (the groups' K-major [", rows,
                  ", k_g] blocks one after another), got shape ", t->shape_str(), " strides ", t->strides_str());
  }
  for (const auto& [arg, t, rows] :
       {std::tuple<const char*, const TensorView*, int64_t>{"a.scale", &a.scale, m}, {"b.scale", &b.scale, n}}) {
    check_ndim(fn, arg, *t, {2});
    check_dtype(fn, arg, *t, {DType::kF32});
    check_defined(fn, arg, *t);
    TESSERA_CHECK(t->shape[0] == rows && t->shape[1] == sf_cols, fn, ": argument '", arg, "' must have shape [", rows,
                  ", ", sf_cols, "] (sum over groups of ceil(k_g / 128)), got ", t->shape_str());
  }
  std::vector<GemmProblem> problems, empty;
  int64_t k_off = 0, sf_off = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t k = ks[size_t(g)];
    GemmProblem p;
    p.fn = fn;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = {a.data.ptr<const char>() + m * k_off, cpu::GemmSrcType::kE4M3, k, 1};
    p.b = {b.data.ptr<const char>() + n * k_off, cpu::GemmSrcType::kE4M3, k, 1};
    p.group = 128;
    p.sa.data = a.scale.ptr<const float>() + sf_off * a.scale.strides[1];
    p.sa.stride_g = a.scale.strides[1];
    p.sb.data = b.scale.ptr<const float>() + sf_off * b.scale.strides[1];
    p.sb.stride_g = b.scale.strides[1];
    TESSERA_CHECK(m <= 1 || a.scale.strides[0] == 1, fn,
                  ": argument 'a.scale' must be MN-major (stride(0) == 1), got strides ", a.scale.strides_str());
    TESSERA_CHECK(n <= 1 || b.scale.strides[0] == 1, fn,
                  ": argument 'b.scale' must be MN-major (stride(0) == 1), got strides ", b.scale.strides_str());
    const TensorView dg = slice0(d, g);
    const TensorView cg = c && c->data ? slice0(*c, g) : TensorView();
    check_output(fn, dg, c && c->data ? &cg : nullptr, m, n, {{"a", &a.data}, {"b", &b.data}}, &p);
    (k == 0 ? empty : problems).push_back(p);
    k_off += k;
    sf_off += (k + 127) / 128;
  }
  for (const GemmProblem& p : empty) handle_empty_k(p);
  run_gemm_batch(problems.data(), int64_t(problems.size()));
}

}  // namespace tessera::gemm
