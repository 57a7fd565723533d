// Public dense GEMMs: bf16_gemm_*, cublaslt_gemm_*, fp8_fp4_gemm_* (DeepGEMM's API, docs/gemm.md).
#include <utility>

#include "gemm/operands.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm.h"

namespace tessera::gemm {
namespace {

// Layout letters: A 'n' = [M,K] (rows first), 't' = [K,M]; B 't' = [N,K] (rows first), 'n' = [K,N].
struct Layout {
  bool a_rows_first, b_rows_first;
};
constexpr Layout kNT{true, true}, kNN{true, false}, kTN{false, false}, kTT{false, true};

void plain_gemm(const char* fn, Layout lay, const TensorView& a, const TensorView& b, const TensorView& d,
                const TensorView* c, std::initializer_list<DType> operand_types) {
  const OperandInfo ai = check_operand(fn, "a", a, lay.a_rows_first, operand_types);
  const OperandInfo bi = check_operand(fn, "b", b, lay.b_rows_first, operand_types);
  TESSERA_CHECK(!ai.fp4 && !bi.fp4, fn, ": packed FP4 operands need scale factors (use fp8_fp4_gemm_*)");
  TESSERA_CHECK(a.dtype == b.dtype, fn, ": arguments 'a' and 'b' must have the same dtype, got ", dtype_name(a.dtype),
                " and ", dtype_name(b.dtype));
  TESSERA_CHECK(ai.k == bi.k, fn, ": 'a' and 'b' must share K, got ", ai.k, " (a shape ", a.shape_str(), ") and ", bi.k,
                " (b shape ", b.shape_str(), ")");
  GemmProblem p;
  p.fn = fn;
  p.m = ai.rows;
  p.n = bi.rows;
  p.k = ai.k;
  p.a = ai.src;
  p.b = bi.src;
  check_output(fn, d, c, p.m, p.n, {{"a", &a}, {"b", &b}}, &p);
  if (p.m == 0 || p.n == 0 || handle_empty_k(p)) return;
  run_gemm(p);
}

void scaled_gemm(const char* fn, Layout lay, const ScaledTensor& a, const ScaledTensor& b, const TensorView& d,
                 const TensorView* c, const Recipe& recipe) {
  static constexpr std::initializer_list<DType> kTypes = {DType::kF8E4M3, DType::kF4E2M1, DType::kI8, DType::kU8};
  const OperandInfo ai = check_operand(fn, "a", a.data, lay.a_rows_first, kTypes);
  const OperandInfo bi = check_operand(fn, "b", b.data, lay.b_rows_first, kTypes);
  TESSERA_CHECK(ai.k == bi.k, fn, ": 'a' and 'b' must share K, got ", ai.k, " (a shape ", a.data.shape_str(), ") and ",
                bi.k, " (b shape ", b.data.shape_str(), ")");
  GemmProblem p;
  p.fn = fn;
  p.m = ai.rows;
  p.n = bi.rows;
  p.k = ai.k;
  p.a = ai.src;
  p.b = bi.src;

  ScaleInput sa{"a.scale", lay.a_rows_first ? a.scale : transpose_last2(a.scale), p.m, p.k};
  ScaleInput sb{"b.scale", lay.b_rows_first ? b.scale : transpose_last2(b.scale), p.n, p.k};
  sa.transposed = !lay.a_rows_first;
  sb.transposed = !lay.b_rows_first;
  resolve_recipe(fn, recipe, ai.fp4, bi.fp4, b.scale.dtype, &sa, &sb);
  p.group = std::min(sa.gran_k, sb.gran_k);
  AlignedPtr<float> sa_store, sb_store;
  p.sa = make_scale_table(fn, sa, p.group, &sa_store);
  p.sb = make_scale_table(fn, sb, p.group, &sb_store);
  check_output(fn, d, c, p.m, p.n, {{"a", &a.data}, {"b", &b.data}, {"a.scale", &a.scale}, {"b.scale", &b.scale}}, &p);
  if (p.m == 0 || p.n == 0 || handle_empty_k(p)) return;
  run_gemm(p);
}

constexpr std::initializer_list<DType> kBf16Only = {DType::kBF16};
constexpr std::initializer_list<DType> kLtTypes = {DType::kBF16, DType::kF8E4M3};

}  // namespace

void bf16_gemm_nt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("bf16_gemm_nt", kNT, a, b, d, c, kBf16Only);
}
void bf16_gemm_nn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("bf16_gemm_nn", kNN, a, b, d, c, kBf16Only);
}
void bf16_gemm_tn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("bf16_gemm_tn", kTN, a, b, d, c, kBf16Only);
}
void bf16_gemm_tt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("bf16_gemm_tt", kTT, a, b, d, c, kBf16Only);
}

void cublaslt_gemm_nt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("cublaslt_gemm_nt", kNT, a, b, d, c, kLtTypes);
}
void cublaslt_gemm_nn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("cublaslt_gemm_nn", kNN, a, b, d, c, kLtTypes);
}
void cublaslt_gemm_tn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("cublaslt_gemm_tn", kTN, a, b, d, c, kLtTypes);
}
void cublaslt_gemm_tt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c) {
  plain_gemm("cublaslt_gemm_tt", kTT, a, b, d, c, kLtTypes);
}

void fp8_fp4_gemm_nt(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c,
                     const Recipe& r) {
  scaled_gemm("fp8_fp4_gemm_nt", kNT, a, b, d, c, r);
}
void fp8_fp4_gemm_nn(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c,
                     const Recipe& r) {
  scaled_gemm("fp8_fp4_gemm_nn", kNN, a, b, d, c, r);
}
void fp8_fp4_gemm_tn(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c,
                     const Recipe& r) {
  scaled_gemm("fp8_fp4_gemm_tn", kTN, a, b, d, c, r);
}
void fp8_fp4_gemm_tt(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c,
                     const Recipe& r) {
  scaled_gemm("fp8_fp4_gemm_tt", kTT, a, b, d, c, r);
}

void set_num_sms(int n) {
  set_num_threads(n);
}
int get_num_sms() {
  return num_threads();
}

}  // namespace tessera::gemm
