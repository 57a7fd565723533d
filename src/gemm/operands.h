// Validation of public GEMM arguments and their reduction to a GemmProblem (shared by every dense and
// grouped entry point).
#pragma once

#include <string>
#include <vector>

#include "gemm/gemm_problem.h"
#include "tessera/core/memory.h"
#include "tessera/core/tensor.h"
#include "tessera/gemm.h"

namespace tessera::gemm {

// Groups of one grouped GEMM call: bounds the per-group work lists before they are built (a stride-0
// view makes any count free to pass; DeepGEMM's callers use at most a few hundred).
constexpr int64_t kMaxGroups = int64_t(1) << 20;
void check_group_count(const char* fn, const char* arg, int64_t groups);

// Swaps the last two dimensions of a view (no data movement).
TensorView transpose_last2(const TensorView& t);

// True for the dtypes that hold packed FP4 (two e2m1 per byte).
bool is_packed_fp4(DType t);

// Checks a 2-D operand given in the layout letter's orientation ('n' or 't'), returns it as
// [rows, K] in logical elements. For packed FP4 the contiguous dimension holds two values per byte.
//   operand 'a': 'n' = [M, K], 't' = [K, M];  operand 'b': 't' = [N, K], 'n' = [K, N].
struct OperandInfo {
  cpu::GemmSrc src;
  int64_t rows = 0, k = 0;  // logical sizes
  bool fp4 = false;
};
OperandInfo check_operand(const char* fn, const char* arg, const TensorView& t, bool rows_first,
                          std::initializer_list<DType> allowed);

// Checks d ([M, N] row-major, bf16/f32) and c (same shape/dtype as d, row-major, or c == d) and that
// d overlaps neither input; fills the output part of p.
void check_output(const char* fn, const TensorView& d, const TensorView* c, int64_t m, int64_t n,
                  std::initializer_list<const std::pair<const char*, const TensorView*>> inputs, GemmProblem* p);

// K == 0: d = c (or zeros). Returns true if it handled the call.
bool handle_empty_k(const GemmProblem& p);

// Scale factors of one operand in canonical orientation ([rows, sf_k] or packed [rows, ceil(sf_k/4)]),
// converted to a compact fp32 table (kept in `storage`, or referenced in place when already compact).
struct ScaleInput {
  const char* arg;  // "a.scale" / "b.scale"
  TensorView sf;    // in canonical orientation
  int64_t rows = 0, k = 0;
  int gran_mn = 1, gran_k = 128;
  bool transposed = false;  // the caller passed the SF K-first (nn/tn/tt layouts); for messages
};
ScaleTable make_scale_table(const char* fn, const ScaleInput& in, int group, AlignedPtr<float>* storage);

// Resolves (gran_mn, gran_k) of both operands from the recipe arguments (gemm.h's Recipe) and the
// operand/SF types, and checks them.
void resolve_recipe(const char* fn, const Recipe& r, bool a_fp4, bool b_fp4, DType sfb_type, ScaleInput* sa,
                    ScaleInput* sb);

// View of t[i] (drops the first dimension) and of rows [r0, r0 + rows) of the first dimension.
TensorView slice0(const TensorView& t, int64_t i);
TensorView slice_rows(const TensorView& t, int64_t r0, int64_t rows);

}  // namespace tessera::gemm
