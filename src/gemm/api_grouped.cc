// M-grouped GEMMs (DeepGEMM's API, docs/gemm.md): the contiguous layout (per-row group ids or psum ends) and
// the masked layout. Each group's rows become one GemmProblem; all of them run as one batch.
#include <cstring>
#include <vector>

#include "gemm/operands.h"
#include "tessera/gemm_grouped.h"

namespace tessera::gemm {
namespace {

struct Segment {
  int64_t group, r0, r1;
};
struct RowRange {
  int64_t r0, r1;
};

int64_t align_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

int32_t layout_at(const TensorView& t, int64_t i) {
  return t.ptr<const int32_t>()[i * t.strides[0]];
}

// Splits the rows of a contiguous layout into group segments and rows that D must hold zeros in.
void parse_contiguous(const char* fn, const ContiguousLayout& L, int64_t m_sum, int64_t groups,
                      std::vector<Segment>* segs, std::vector<RowRange>* zeros) {
  const TensorView& t = L.grouped_layout;
  check_ndim(fn, "grouped_layout", t, {1});
  check_dtype(fn, "grouped_layout", t, {DType::kI32});
  check_defined(fn, "grouped_layout", t);
  const int64_t align = L.mk_alignment;
  TESSERA_CHECK(align >= 1, fn, ": the M alignment for contiguous layouts must be >= 1, got ", align);
  if (!L.use_psum_layout) {
    check_dim(fn, "grouped_layout", t, 0, m_sum, "M_sum (the rows of 'a')");
    for (int64_t r = 0; r < m_sum;) {
      const int32_t id = layout_at(t, r);
      int64_t r1 = r + 1;
      while (r1 < m_sum && layout_at(t, r1) == id) ++r1;
      TESSERA_CHECK(id >= -1 && id < groups, fn, ": argument 'grouped_layout' gives row ", r, " group ", id,
                    ", which is neither -1 (padding) nor in [0, ", groups, ")");
      if (id >= 0) {
        TESSERA_CHECK(r % align == 0, fn, ": argument 'grouped_layout': the segment of group ", id, " starts at row ",
                      r, ", which is not a multiple of the M alignment ", align);
        segs->push_back({id, r, r1});
      } else {
        zeros->push_back({r, r1});
      }
      r = r1;
    }
    return;
  }
  check_dim(fn, "grouped_layout", t, 0, groups, "G (the groups of 'b') for the psum layout");
  int64_t prev_end = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t end = layout_at(t, g), start = align_up(prev_end, align);
    TESSERA_CHECK(end >= prev_end && end <= m_sum, fn, ": argument 'grouped_layout' (psum ends) entry ", g, " = ", end,
                  " must be >= the previous end ", prev_end, " and <= M_sum = ", m_sum);
    TESSERA_CHECK(end == prev_end || end >= start, fn, ": argument 'grouped_layout' (psum ends) entry ", g, " = ", end,
                  " falls inside the alignment gap [", prev_end, ", ", start, ") after the previous group");
    if (end > prev_end) {
      if (L.ensure_zero_padding && start > prev_end) zeros->push_back({prev_end, start});
      segs->push_back({g, start, end});
      prev_end = end;
    }
  }
  if (L.ensure_zero_padding && prev_end < m_sum) zeros->push_back({prev_end, m_sum});
}

void zero_rows(const GemmProblem& out, const std::vector<RowRange>& rows) {
  const int64_t es = dtype_storage_bytes(out.d_type);
  for (const RowRange& rr : rows)
    for (int64_t r = rr.r0; r < rr.r1; ++r) std::memset(static_cast<char*>(out.d) + r * out.ldd * es, 0, out.n * es);
}

// The problem for rows [r0, r1) of a, group g's b, rows [r0, r1) of d (a scale table for a shifts with
// the rows; its row granularity must divide r0).
GemmProblem segment_problem(const char* fn, const GemmProblem& base, const cpu::GemmSrc& a, const cpu::GemmSrc& bg,
                            const ScaleTable& sbg, int64_t r0, int64_t r1) {
  GemmProblem p = base;
  p.m = r1 - r0;
  const int64_t a_es = src_bytes(a);
  if (a.fp4_along_r) {
    TESSERA_CHECK(r0 % 2 == 0, fn, ": a group starts at row ", r0, ", which splits a byte of 'a' packed along M");
    p.a.data = static_cast<const char*>(a.data) + (r0 / 2) * a.stride_r;
  } else {
    p.a.data = static_cast<const char*>(a.data) + r0 * a.stride_r * a_es;
  }
  p.b = bg;
  p.sb = sbg;
  if (p.group > 0) {
    TESSERA_CHECK(r0 % base.sa.r_div == 0, fn, ": a group starts at row ", r0,
                  ", which is not a multiple of the activation scale granularity ", base.sa.r_div);
    p.sa = base.sa.shifted(r0);
  }
  p.d = static_cast<char*>(base.d) + r0 * base.ldd * dtype_storage_bytes(base.d_type);
  return p;
}

// Shared checks of a (2-D, [rows, K] canonical) and the per-group b ([G, N, K] or [G, K, N]).
struct GroupedOperands {
  OperandInfo a, b;  // b describes group 0; every group has the same strides
  int64_t groups = 0;
};

GroupedOperands check_grouped_operands(const char* fn, const TensorView& a, const TensorView& b, bool b_rows_first,
                                       std::initializer_list<DType> types) {
  GroupedOperands g;
  g.a = check_operand(fn, "a", a, true, types);
  check_ndim(fn, "b", b, {3});
  g.groups = b.shape[0];
  check_group_count(fn, "b", g.groups);
  TESSERA_CHECK(g.groups >= 1, fn, ": argument 'b' must hold at least one group, got shape ", b.shape_str());
  g.b = check_operand(fn, "b", slice0(b, 0), b_rows_first, types);
  TESSERA_CHECK(g.a.k == g.b.k, fn, ": 'a' and 'b' must share K, got ", g.a.k, " (a shape ", a.shape_str(), ") and ",
                g.b.k, " (b shape ", b.shape_str(), ")");
  return g;
}

cpu::GemmSrc group_src(const cpu::GemmSrc& g0, const TensorView& b, int64_t g) {
  cpu::GemmSrc s = g0;
  s.data = slice0(b, g).data;
  return s;
}

void contiguous_gemm(const char* fn, bool nt, const TensorView& a, const TensorView* sfa, const TensorView& b,
                     const TensorView* sfb, const TensorView& d, const ContiguousLayout& layout, const Recipe* recipe) {
  static constexpr std::initializer_list<DType> kScaledTypes = {DType::kF8E4M3, DType::kF4E2M1, DType::kI8, DType::kU8};
  static constexpr std::initializer_list<DType> kBf16 = {DType::kBF16};
  const bool scaled = sfa != nullptr;
  const GroupedOperands ops = check_grouped_operands(fn, a, b, nt, scaled ? kScaledTypes : kBf16);
  GemmProblem base;
  base.fn = fn;
  base.m = ops.a.rows;
  base.n = ops.b.rows;
  base.k = ops.a.k;
  base.a = ops.a.src;
  check_dtype(fn, "d", d, {DType::kBF16});
  std::vector<std::pair<const char*, const TensorView*>> inputs = {
      {"a", &a}, {"b", &b}, {"grouped_layout", &layout.grouped_layout}};

  std::vector<AlignedPtr<float>> stores(size_t(ops.groups) + 1);
  std::vector<ScaleTable> sb(size_t(ops.groups));
  if (scaled) {
    check_ndim(fn, "b.scale", *sfb, {3});
    check_dim(fn, "b.scale", *sfb, 0, ops.groups, "G (the groups of 'b')");
    ScaleInput sa_in{"a.scale", *sfa, base.m, base.k};
    ScaleInput sb_in{"b.scale", nt ? slice0(*sfb, 0) : transpose_last2(slice0(*sfb, 0)), base.n, base.k};
    sb_in.transposed = !nt;
    resolve_recipe(fn, *recipe, ops.a.fp4, ops.b.fp4, sfb->dtype, &sa_in, &sb_in);
    base.group = std::min(sa_in.gran_k, sb_in.gran_k);
    base.sa = make_scale_table(fn, sa_in, base.group, &stores.back());
    for (int64_t g = 0; g < ops.groups; ++g) {
      sb_in.sf = nt ? slice0(*sfb, g) : transpose_last2(slice0(*sfb, g));
      sb[g] = make_scale_table(fn, sb_in, base.group, &stores[g]);
    }
    inputs.push_back({"a.scale", sfa});
    inputs.push_back({"b.scale", sfb});
  }
  check_output(fn, d, nullptr, base.m, base.n, {}, &base);
  for (const auto& in : inputs) check_no_overlap(fn, "d", d, in.first, *in.second);

  std::vector<Segment> segs;
  std::vector<RowRange> zeros;
  parse_contiguous(fn, layout, base.m, ops.groups, &segs, &zeros);
  std::vector<GemmProblem> problems;
  problems.reserve(segs.size());
  for (const Segment& s : segs)
    problems.push_back(segment_problem(fn, base, base.a, group_src(ops.b.src, b, s.group),
                                       scaled ? sb[s.group] : ScaleTable{}, s.r0, s.r1));
  zero_rows(base, zeros);
  if (base.k == 0) {
    for (const Segment& s : segs) zero_rows(base, {{s.r0, s.r1}});
    return;
  }
  run_gemm_batch(problems.data(), int64_t(problems.size()));
}

void masked_gemm(const char* fn, const TensorView& a, const TensorView* sfa, const TensorView& b, const TensorView* sfb,
                 const TensorView& d, const TensorView& masked_m, int64_t expected_m, const Recipe* recipe) {
  static constexpr std::initializer_list<DType> kScaledTypes = {DType::kF8E4M3, DType::kF4E2M1, DType::kI8, DType::kU8};
  static constexpr std::initializer_list<DType> kBf16 = {DType::kBF16};
  const bool scaled = sfa != nullptr;
  check_ndim(fn, "a", a, {3});
  check_ndim(fn, "d", d, {3});
  check_dtype(fn, "d", d, {DType::kBF16});
  const int64_t groups = a.shape[0], max_m = a.shape[1];
  check_group_count(fn, "a", groups);
  check_dim(fn, "b", b, 0, groups, "G (the groups of 'a')");
  check_dim(fn, "d", d, 0, groups, "G (the groups of 'a')");
  TESSERA_CHECK(expected_m > 0, fn, ": argument 'expected_m' must be > 0 (it is a hint), got ", expected_m);
  check_ndim(fn, "masked_m", masked_m, {1});
  check_dtype(fn, "masked_m", masked_m, {DType::kI32});
  check_defined(fn, "masked_m", masked_m);
  check_dim(fn, "masked_m", masked_m, 0, groups, "G (the groups of 'a')");
  for (int64_t g = 0; g < groups; ++g) {
    const int32_t m = layout_at(masked_m, g);
    TESSERA_CHECK(m >= 0 && m <= max_m, fn, ": argument 'masked_m' entry ", g, " = ", m,
                  " must be in [0, max_m = ", max_m, "]");
  }
  const GroupedOperands ops = check_grouped_operands(fn, slice0(a, 0), b, true, scaled ? kScaledTypes : kBf16);
  GemmProblem base;
  base.fn = fn;
  base.m = max_m;
  base.n = ops.b.rows;
  base.k = ops.a.k;
  check_output(fn, slice0(d, 0), nullptr, max_m, base.n, {}, &base);
  std::vector<std::pair<const char*, const TensorView*>> inputs = {{"a", &a}, {"b", &b}, {"masked_m", &masked_m}};
  if (scaled) {
    inputs.push_back({"a.scale", sfa});
    inputs.push_back({"b.scale", sfb});
  }
  for (const auto& in : inputs) check_no_overlap(fn, "d", d, in.first, *in.second);
  TESSERA_CHECK(groups <= 1 || d.strides[0] >= d.shape[1] * d.strides[1], fn, ": argument 'd' groups overlap (strides ",
                d.strides_str(), ")");

  std::vector<AlignedPtr<float>> stores(size_t(2 * groups));
  std::vector<GemmProblem> problems;
  ScaleInput sa_in{"a.scale", TensorView(), max_m, base.k}, sb_in{"b.scale", TensorView(), base.n, base.k};
  if (scaled) {
    check_ndim(fn, "a.scale", *sfa, {3});
    check_ndim(fn, "b.scale", *sfb, {3});
    check_dim(fn, "a.scale", *sfa, 0, groups, "G (the groups of 'a')");
    check_dim(fn, "b.scale", *sfb, 0, groups, "G (the groups of 'a')");
    resolve_recipe(fn, *recipe, ops.a.fp4, ops.b.fp4, sfb->dtype, &sa_in, &sb_in);
  }
  for (int64_t g = 0; g < groups; ++g) {
    GemmProblem p = base;
    p.m = layout_at(masked_m, g);
    p.a = group_src(ops.a.src, a, g);
    p.b = group_src(ops.b.src, b, g);
    p.d = slice0(d, g).data;
    if (scaled) {
      sa_in.sf = slice0(*sfa, g);
      sb_in.sf = slice0(*sfb, g);
      p.group = std::min(sa_in.gran_k, sb_in.gran_k);
      p.sa = make_scale_table(fn, sa_in, p.group, &stores[2 * g]);
      p.sb = make_scale_table(fn, sb_in, p.group, &stores[2 * g + 1]);
    }
    if (p.m > 0) problems.push_back(p);
  }
  if (base.k == 0) {
    for (const GemmProblem& p : problems) zero_rows(p, {{0, p.m}});
    return;
  }
  run_gemm_batch(problems.data(), int64_t(problems.size()));
}

}  // namespace

void m_grouped_bf16_gemm_nt_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const ContiguousLayout& layout) {
  contiguous_gemm("m_grouped_bf16_gemm_nt_contiguous", true, a, nullptr, b, nullptr, d, layout, nullptr);
}
void m_grouped_bf16_gemm_nn_contiguous(const TensorView& a, const TensorView& b, const TensorView& d,
                                       const ContiguousLayout& layout) {
  contiguous_gemm("m_grouped_bf16_gemm_nn_contiguous", false, a, nullptr, b, nullptr, d, layout, nullptr);
}
void m_grouped_fp8_fp4_gemm_nt_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                          const ContiguousLayout& layout, const Recipe& recipe) {
  contiguous_gemm("m_grouped_fp8_fp4_gemm_nt_contiguous", true, a.data, &a.scale, b.data, &b.scale, d, layout, &recipe);
}
void m_grouped_fp8_fp4_gemm_nn_contiguous(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                          const ContiguousLayout& layout, const Recipe& recipe) {
  contiguous_gemm("m_grouped_fp8_fp4_gemm_nn_contiguous", false, a.data, &a.scale, b.data, &b.scale, d, layout,
                  &recipe);
}
void m_grouped_bf16_gemm_nt_masked(const TensorView& a, const TensorView& b, const TensorView& d,
                                   const TensorView& masked_m, int64_t expected_m) {
  masked_gemm("m_grouped_bf16_gemm_nt_masked", a, nullptr, b, nullptr, d, masked_m, expected_m, nullptr);
}
void m_grouped_fp8_fp4_gemm_nt_masked(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                                      const TensorView& masked_m, int64_t expected_m, const Recipe& recipe) {
  masked_gemm("m_grouped_fp8_fp4_gemm_nt_masked", a.data, &a.scale, b.data, &b.scale, d, masked_m, expected_m, &recipe);
}

}  // namespace tessera::gemm
