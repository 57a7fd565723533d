#include "gemm/gemm_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace tessera::test {
namespace {

bool is_fp4(DType t) {
  return t == DType::kF4E2M1 || t == DType::kI8 || t == DType::kU8;
}

template <class T>
void store(std::vector<uint8_t>* bytes, int64_t index, T value) {
  std::memcpy(bytes->data() + size_t(index) * sizeof(T), &value, sizeof(T));
}

TensorView oriented(void* data, DType dtype, int64_t rows, int64_t cols, int64_t stride_r, int64_t stride_c,
                    bool rows_first) {
  return rows_first ? TensorView(data, dtype, {rows, cols}, {stride_r, stride_c})
                    : TensorView(data, dtype, {cols, rows}, {stride_c, stride_r});
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

const char* family_function(Family f, Layout l) {
  static const char* kNames[3][4] = {
      {"bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt"},
      {"cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt"},
      {"fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt"},
  };
  return kNames[int(f)][int(l)];
}

// Output, C and the float64 reference; shared by plain and scaled cases.
void finish(PreparedGemm* g, const GemmShape& s, Rng& rng) {
  g->c_mode = s.c_mode;
  if (s.c_mode == CMode::kSeparate) g->c = make_random_matrix(s.d_dtype, s.m, s.n, s.pad + 3, rng);
  g->d = s.c_mode == CMode::kInPlace ? make_random_matrix(s.d_dtype, s.m, s.n, s.pad, rng)
                                     : make_poisoned_matrix(s.d_dtype, s.m, s.n, s.pad);
  g->d_initial = g->d.storage;
  compute_reference(g, s);
  std::ostringstream os;
  os << family_function(g->family, g->layout) << " " << describe(s) << " isa=" << isa_name(active_isa())
     << " threads=" << num_threads() << " a=" << dtype_name(g->a.view.dtype) << g->a.view.shape_str()
     << g->a.view.strides_str() << " b=" << dtype_name(g->b.view.dtype) << g->b.view.shape_str()
     << g->b.view.strides_str();
  g->what = os.str() + g->what;
}

}  // namespace

void compute_reference(PreparedGemm* g, const GemmShape& s) {
  const Matrix* c = s.c_mode == CMode::kSeparate ? &*g->c : s.c_mode == CMode::kInPlace ? &g->d : nullptr;

  // Scaled operands once, then D[m, n] = C[m, n] + sum_k A'[m, k] * B'[n, k] in float64.
  std::vector<double> as(size_t(s.m * s.k)), bs(size_t(s.n * s.k));
  for (int64_t r = 0; r < s.m; ++r)
    for (int64_t k = 0; k < s.k; ++k) as[size_t(r * s.k + k)] = g->a.at(r, k) * (g->sa ? g->sa->at(r, k) : 1.0);
  for (int64_t r = 0; r < s.n; ++r)
    for (int64_t k = 0; k < s.k; ++k) bs[size_t(r * s.k + k)] = g->b.at(r, k) * (g->sb ? g->sb->at(r, k) : 1.0);
  g->ref.assign(size_t(s.m * s.n), 0.0);
  g->ref_abs.assign(size_t(s.m * s.n), 0.0);
  // Four outputs at a time: independent chains for the CPU to overlap (each sum stays in k order). A
  // last group past N repeats column N - 1 and is not stored.
  constexpr int64_t kCols = 4;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j0 = 0; j0 < s.n; j0 += kCols) {
      const double* x = as.data() + i * s.k;
      const double* y[kCols];
      double acc[kCols], mag[kCols];
      for (int64_t t = 0; t < kCols; ++t) {
        const int64_t j = std::min(j0 + t, s.n - 1);
        y[t] = bs.data() + j * s.k;
        acc[t] = c ? c->get(i, j) : 0.0;
        mag[t] = std::fabs(acc[t]);
      }
      for (int64_t k = 0; k < s.k; ++k)
        for (int64_t t = 0; t < kCols; ++t) {
          acc[t] += x[k] * y[t][k];
          mag[t] += std::fabs(x[k] * y[t][k]);
        }
      for (int64_t t = 0; t < kCols && j0 + t < s.n; ++t) {
        g->ref[size_t(i * s.n + j0 + t)] = acc[t];
        g->ref_abs[size_t(i * s.n + j0 + t)] = mag[t];
      }
    }
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kNT:
      return "nt";
    case Layout::kNN:
      return "nn";
    case Layout::kTN:
      return "tn";
    case Layout::kTT:
      return "tt";
  }
  return "?";
}

const char* sf_style_name(SfStyle s) {
  switch (s) {
    case SfStyle::kF32KMajor:
      return "f32-kmajor";
    case SfStyle::kF32MNMajor:
      return "f32-mnmajor";
    case SfStyle::kPackedMNMajor:
      return "ue8m0x4-mnmajor";
    case SfStyle::kPackedKMajor:
      return "ue8m0x4-kmajor";
  }
  return "?";
}

TensorView transposed(const TensorView& t) {
  return TensorView(t.data, t.dtype, {t.shape[1], t.shape[0]}, {t.strides[1], t.strides[0]});
}

Operand make_operand(DType dtype, int64_t rows, int64_t k, bool rows_first, Major major, int64_t pad, Rng& rng) {
  const bool fp4 = is_fp4(dtype);
  if (fp4 && (k % 2 != 0 || major != Major::kK)) {
    ADD_FAILURE() << "harness: packed FP4 operands need even K and K-major storage";
    return {};
  }
  Operand op;
  op.rows = rows;
  op.k = k;
  const int64_t stored_k = fp4 ? k / 2 : k;
  const int64_t ld = major == Major::kK ? stored_k + pad : rows + pad;
  const int64_t stride_r = major == Major::kK ? ld : 1, stride_k = major == Major::kK ? 1 : ld;
  const int64_t elems = major == Major::kK ? rows * ld : stored_k * ld;
  const int es = dtype_storage_bytes(dtype);
  op.storage.assign(size_t(std::max<int64_t>(elems, 1) * es), 0);
  fill_poison(&op.storage, dtype);
  op.values.assign(size_t(rows * k), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t kk = 0; kk < stored_k; ++kk) {
      const int64_t at = r * stride_r + kk * stride_k;
      if (dtype == DType::kBF16) {
        const uint16_t h = f32_to_bf16(float(rng.normal()));
        store(&op.storage, at, h);
        op.values[size_t(r * k + kk)] = bf16_to_f32(h);
      } else if (dtype == DType::kF8E4M3) {
        const uint8_t q = f32_to_e4m3(float(2 * rng.normal()));
        store(&op.storage, at, q);
        op.values[size_t(r * k + kk)] = e4m3_to_f32(q);
      } else {
        const uint8_t byte = uint8_t(rng.bits32());
        store(&op.storage, at, byte);
        op.values[size_t(r * k + 2 * kk)] = e2m1_to_f32(byte & 0xF);
        op.values[size_t(r * k + 2 * kk + 1)] = e2m1_to_f32(byte >> 4);
      }
    }
  op.view = oriented(op.storage.data(), dtype, rows, stored_k, stride_r, stride_k, rows_first);
  return op;
}

Scales make_scales(SfStyle style, int64_t rows, int64_t k, int gran_mn, int gran_k, bool rows_first, Rng& rng) {
  Scales s;
  s.gran_mn = gran_mn;
  s.gran_k = gran_k;
  s.sf_rows = ceil_div(rows, gran_mn);
  s.sf_k = ceil_div(k, gran_k);
  s.values.assign(size_t(s.sf_rows * s.sf_k), 0.0);
  if (style == SfStyle::kF32KMajor || style == SfStyle::kF32MNMajor) {
    const bool mn = style == SfStyle::kF32MNMajor;
    const int64_t sr = mn ? 1 : s.sf_k, sk = mn ? s.sf_rows : 1;
    s.storage.assign(size_t(std::max<int64_t>(s.sf_rows * s.sf_k, 1) * 4), 0);
    for (int64_t r = 0; r < s.sf_rows; ++r)
      for (int64_t g = 0; g < s.sf_k; ++g) {
        const float v = float(std::exp(rng.uniform(std::log(1.0 / 16), std::log(4.0))));  // not a power of two
        store(&s.storage, r * sr + g * sk, v);
        s.values[size_t(r * s.sf_k + g)] = v;
      }
    s.view = oriented(s.storage.data(), DType::kF32, s.sf_rows, s.sf_k, sr, sk, rows_first);
    return s;
  }
  const int64_t packed = ceil_div(s.sf_k, 4), aligned_rows = ceil_div(s.sf_rows, 4) * 4;
  const bool mn = style == SfStyle::kPackedMNMajor;
  const int64_t sr = mn ? 1 : packed, sk = mn ? aligned_rows : 1;
  s.storage.assign(size_t(std::max<int64_t>((mn ? aligned_rows : s.sf_rows) * packed, 1) * 4), 0);
  fill_poison(&s.storage, DType::kU8);
  for (int64_t r = 0; r < s.sf_rows; ++r)
    for (int64_t j = 0; j < packed; ++j) {
      uint32_t word = 0;
      for (int byte = 0; byte < 4; ++byte) {
        const int64_t g = 4 * j + byte;
        uint32_t e = 0xFF;  // NaN in slots past sf_k: they must never be read
        if (g < s.sf_k) {
          e = uint32_t(127 + rng.uniform_int(-4, 2));
          s.values[size_t(r * s.sf_k + g)] = std::ldexp(1.0, int(e) - 127);
        }
        word |= e << (8 * byte);
      }
      store(&s.storage, r * sr + j * sk, word);
    }
  s.view = oriented(s.storage.data(), DType::kI32, s.sf_rows, packed, sr, sk, rows_first);
  return s;
}

double Matrix::get(int64_t r, int64_t c) const {
  const size_t at = size_t(r * ld + c);
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, storage.data() + at * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, storage.data() + at * 2, 2);
  return bf16_to_f32(h);
}

Matrix make_poisoned_matrix(DType dtype, int64_t rows, int64_t cols, int64_t pad) {
  Matrix m;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  m.ld = cols + pad;
  m.storage.assign(size_t(std::max<int64_t>(rows * m.ld, 1) * dtype_storage_bytes(dtype)), 0);
  fill_poison(&m.storage, dtype);
  m.view = TensorView(m.storage.data(), dtype, {rows, cols}, {m.ld, 1});
  return m;
}

Matrix make_random_matrix(DType dtype, int64_t rows, int64_t cols, int64_t pad, Rng& rng) {
  Matrix m = make_poisoned_matrix(dtype, rows, cols, pad);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = float(4 * rng.normal());
      if (dtype == DType::kF32) {
        store(&m.storage, r * m.ld + c, v);
      } else {
        store(&m.storage, r * m.ld + c, f32_to_bf16(v));
      }
    }
  return m;
}

std::string describe(const GemmShape& s) {
  std::ostringstream os;
  os << "m=" << s.m << " n=" << s.n << " k=" << s.k << " a=" << (s.a_major == Major::kK ? "K" : "MN")
     << "-major b=" << (s.b_major == Major::kK ? "K" : "MN") << "-major pad=" << s.pad << " d=" << dtype_name(s.d_dtype)
     << " c="
     << (s.c_mode == CMode::kNone       ? "none"
         : s.c_mode == CMode::kSeparate ? "separate"
                                        : "d");
  return os.str();
}

void call_plain(Family family, Layout layout, const TensorView& a, const TensorView& b, const TensorView& d,
                const TensorView* c) {
  using namespace gemm;
  using Fn = void (*)(const TensorView&, const TensorView&, const TensorView&, const TensorView*);
  static const Fn kBf16[4] = {bf16_gemm_nt, bf16_gemm_nn, bf16_gemm_tn, bf16_gemm_tt};
  static const Fn kLt[4] = {cublaslt_gemm_nt, cublaslt_gemm_nn, cublaslt_gemm_tn, cublaslt_gemm_tt};
  (family == Family::kBf16 ? kBf16 : kLt)[int(layout)](a, b, d, c);
}

void call_scaled(Layout layout, const gemm::ScaledTensor& a, const gemm::ScaledTensor& b, const TensorView& d,
                 const TensorView* c, const gemm::Recipe& recipe) {
  using namespace gemm;
  using Fn = void (*)(const ScaledTensor&, const ScaledTensor&, const TensorView&, const TensorView*, const Recipe&);
  static const Fn kFns[4] = {fp8_fp4_gemm_nt, fp8_fp4_gemm_nn, fp8_fp4_gemm_tn, fp8_fp4_gemm_tt};
  kFns[int(layout)](a, b, d, c, recipe);
}

PreparedGemm prepare_plain(Family family, DType operand_type, Layout layout, const GemmShape& s, Rng& rng) {
  PreparedGemm g;
  g.family = family;
  g.layout = layout;
  g.a = make_operand(operand_type, s.m, s.k, a_rows_first(layout), s.a_major, s.pad, rng);
  g.b = make_operand(operand_type, s.n, s.k, b_rows_first(layout), s.b_major, s.pad, rng);
  g.diff_threshold = operand_type == DType::kBF16 ? 1e-5 : 1e-3;  // spec: BF16 GEMMs / FP8xFP8
  finish(&g, s, rng);
  return g;
}

PreparedGemm prepare_scaled(const ScaleRecipe& r, Layout layout, const GemmShape& s, Rng& rng) {
  PreparedGemm g;
  g.family = Family::kFp8Fp4;
  g.layout = layout;
  // Packed FP4 operands here are packed along K; fp4_mn_packed_test.cc covers packing along M/N.
  g.a = make_operand(r.a_type, s.m, s.k, a_rows_first(layout), is_fp4(r.a_type) ? Major::kK : s.a_major, s.pad, rng);
  g.b = make_operand(r.b_type, s.n, s.k, b_rows_first(layout), is_fp4(r.b_type) ? Major::kK : s.b_major, s.pad, rng);
  g.sa = make_scales(r.sfa, s.m, s.k, r.gran_mn_a, r.gran_k_a, a_rows_first(layout), rng);
  g.sb = make_scales(r.sfb, s.n, s.k, r.gran_mn_b, r.gran_k_b, b_rows_first(layout), rng);
  if (r.arg == RecipeArg::kRecipe) {
    g.recipe.recipe = std::array<int, 3>{r.gran_mn_a, r.gran_mn_b, r.gran_k_a};
  } else if (r.arg == RecipeArg::kPerOperand) {
    g.recipe.recipe_a = std::array<int, 2>{r.gran_mn_a, r.gran_k_a};
    g.recipe.recipe_b = std::array<int, 2>{r.gran_mn_b, r.gran_k_b};
  }
  g.diff_threshold = r.diff_threshold;
  std::ostringstream os;
  os << " scales=" << r.name << " (sfa " << sf_style_name(r.sfa) << " (" << r.gran_mn_a << "," << r.gran_k_a << ") "
     << g.sa->view.shape_str() << g.sa->view.strides_str() << ", sfb " << sf_style_name(r.sfb) << " (" << r.gran_mn_b
     << "," << r.gran_k_b << ") " << g.sb->view.shape_str() << g.sb->view.strides_str() << ", passed as "
     << (r.arg == RecipeArg::kDefault  ? "defaults"
         : r.arg == RecipeArg::kRecipe ? "recipe"
                                       : "recipe_a/recipe_b")
     << ")";
  g.what = os.str();
  finish(&g, s, rng);
  return g;
}

void PreparedGemm::run() {
  std::copy(d_initial.begin(), d_initial.end(), d.storage.begin());
  const TensorView* cv = c_mode == CMode::kNone ? nullptr : c_mode == CMode::kInPlace ? &d.view : &c->view;
  if (family == Family::kFp8Fp4) {
    call_scaled(layout, {a.view, sa->view}, {b.view, sb->view}, d.view, cv, recipe);
  } else {
    call_plain(family, layout, a.view, b.view, d.view, cv);
  }
}

::testing::AssertionResult run_and_check(PreparedGemm& g) {
  try {
    g.run();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << g.what << "\n  threw: " << e.what();
  }
  return g.check();
}

void IsaLayoutTest::SetUp() {
  if (!isa_supported(isa())) GTEST_SKIP() << "this CPU lacks " << isa_name(isa());
  if (const char* lower = emulated() ? same_kernels_as_lower_level(isa(), gemm_slots()) : nullptr)
    GTEST_SKIP() << "emulated run: " << isa_name(isa()) << " runs the GEMM kernels of " << lower;
  cap_.emplace(isa());
}

std::string isa_layout_name(const ::testing::TestParamInfo<std::tuple<Isa, Layout>>& info) {
  return std::string(isa_name(std::get<0>(info.param))) + "_" + layout_name(std::get<1>(info.param));
}

::testing::AssertionResult PreparedGemm::check() const {
  const int64_t m = d.rows, n = d.cols, es = dtype_storage_bytes(d.dtype);
  // 1. Nothing outside D's view changed (padding columns keep their poison).
  for (size_t i = 0; i < d.storage.size(); ++i) {
    const int64_t elem = int64_t(i) / es, r = elem / d.ld, col = elem % d.ld;
    const bool inside = r < m && col < n;
    if (!inside && d.storage[i] != d_initial[i])
      return ::testing::AssertionFailure()
             << what << "\n  byte " << i << " outside d's view (row " << r << ", col " << col << ") was modified";
  }
  // 2. Every element written and within the error bound; 3. calc_diff below the spec threshold.
  const int64_t k = a.k;
  const double acc_rel = (4 * std::sqrt(double(k)) + 8) * std::ldexp(1.0, -24);
  int64_t bad = 0, first = -1;
  double worst_ratio = 0, first_bound = 0;
  std::vector<double> got(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = size_t(i * n + j);
      const double v = d.get(i, j), r = ref[at];
      got[at] = v;
      const double mag = std::max(std::fabs(r), std::fabs(v));
      const double bound = (d.dtype == DType::kBF16 ? bf16_ulp(mag) : f32_ulp(mag)) + acc_rel * ref_abs[at];
      const double err = std::fabs(v - r);
      const bool ok = std::isfinite(v) && err <= bound;
      if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
      if (!ok && bad++ == 0) {
        first = int64_t(at);
        first_bound = bound;
      }
    }
  const double diff = calc_diff(got, ref);
  std::printf("  %s -> worst err/bound %.3f, calc_diff %.2e\n", what.c_str(), worst_ratio, diff);
  if (bad) {
    const int64_t i = first / n, j = first % n;
    return ::testing::AssertionFailure() << what << "\n  " << bad << " of " << m * n << " elements wrong; first at ("
                                         << i << ", " << j << "): expected " << ref[size_t(first)] << ", got "
                                         << got[size_t(first)] << " (bound " << first_bound << ", sum|terms| "
                                         << ref_abs[size_t(first)] << ")";
  }
  if (!(diff < diff_threshold))
    return ::testing::AssertionFailure() << what << "\n  calc_diff " << diff << " >= " << diff_threshold;
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::test
