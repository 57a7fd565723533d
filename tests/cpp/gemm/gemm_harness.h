// Test harness for the dense GEMMs of tessera/gemm.h: builds operands in any layout (K- or MN-major,
// padded leading strides, inside poisoned buffers), scale factors in every supported style, poisoned
// outputs, computes the spec's formula in float64 and checks a call's result against it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/gemm.h"
#include "test_util.h"

namespace tessera::test {

// ---- vocabulary ----
enum class Layout { kNT, kNN, kTN, kTT };
const char* layout_name(Layout l);
inline void PrintTo(Layout l, std::ostream* os) {
  *os << layout_name(l);
}
inline std::vector<Layout> all_layouts() {
  return {Layout::kNT, Layout::kNN, Layout::kTN, Layout::kTT};
}
// A 'n' is [M, K] (rows first), 't' is [K, M]; B 't' is [N, K] (rows first), 'n' is [K, N].
inline bool a_rows_first(Layout l) {
  return l == Layout::kNT || l == Layout::kNN;
}
inline bool b_rows_first(Layout l) {
  return l == Layout::kNT || l == Layout::kTT;
}

enum class Major { kK, kMN };                     // which dimension of an operand is contiguous
enum class CMode { kNone, kSeparate, kInPlace };  // c absent, c its own buffer, c is d
enum class Family { kBf16, kCublasLt, kFp8Fp4 };

// Copying would leave views pointing into the source's buffers; moving keeps them valid.
struct MoveOnly {
  MoveOnly() = default;
  MoveOnly(const MoveOnly&) = delete;
  MoveOnly& operator=(const MoveOnly&) = delete;
  MoveOnly(MoveOnly&&) = default;
  MoveOnly& operator=(MoveOnly&&) = default;
};

// ---- operands ----
// A matrix operand as passed to the API (view in the layout letter's orientation, inside a larger
// buffer whose padding holds NaN codes) and its decoded canonical values [rows][k] in float64.
// Packed FP4 (kF4E2M1 or kI8) holds two values per byte along K; k is the logical K.
struct Operand : MoveOnly {
  std::vector<uint8_t> storage;
  TensorView view;
  int64_t rows = 0, k = 0;
  std::vector<double> values;
  double at(int64_t r, int64_t kk) const { return values[size_t(r * k + kk)]; }
};
Operand make_operand(DType dtype, int64_t rows, int64_t k, bool rows_first, Major major, int64_t pad, Rng& rng);

// ---- scale factors ----
enum class SfStyle {
  kF32KMajor,      // fp32 [sf_rows, sf_k] contiguous
  kF32MNMajor,     // fp32 [sf_rows, sf_k] with strides (1, sf_rows)
  kPackedMNMajor,  // int32 packed UE8M0 [sf_rows, ceil(sf_k/4)], strides (1, align(sf_rows, 4)) (DeepGEMM's)
  kPackedKMajor,   // int32 packed UE8M0, contiguous
};
const char* sf_style_name(SfStyle s);

struct Scales : MoveOnly {
  std::vector<uint8_t> storage;
  TensorView view;  // in the operand's orientation (transposed with its data)
  int gran_mn = 1, gran_k = 128;
  int64_t sf_rows = 0, sf_k = 0;
  std::vector<double> values;  // canonical [sf_rows][sf_k]
  double at(int64_t r, int64_t kk) const { return values[size_t((r / gran_mn) * sf_k + kk / gran_k)]; }
};
// fp32 styles get random non-power-of-two scales; packed styles random powers of two, with byte 0xFF
// (NaN) in the unused K slots of the last int32 so reading them would show.
Scales make_scales(SfStyle style, int64_t rows, int64_t k, int gran_mn, int gran_k, bool rows_first, Rng& rng);

// ---- outputs ----
// A row-major [rows, cols] bf16/fp32 matrix with leading stride cols + pad inside a buffer.
struct Matrix : MoveOnly {
  std::vector<uint8_t> storage;
  TensorView view;
  DType dtype = DType::kBF16;
  int64_t rows = 0, cols = 0, ld = 0;
  double get(int64_t r, int64_t c) const;
};
Matrix make_poisoned_matrix(DType dtype, int64_t rows, int64_t cols, int64_t pad);
// Random values (representable in dtype) in the view; padding stays poisoned.
Matrix make_random_matrix(DType dtype, int64_t rows, int64_t cols, int64_t pad, Rng& rng);

// ---- cases ----
struct GemmShape {
  int64_t m, n, k;
  Major a_major, b_major;
  int64_t pad;  // extra elements on the leading stride of a, b, c and d
  DType d_dtype;
  CMode c_mode;
};
std::string describe(const GemmShape& s);

// Scale-factor configuration of an FP8/FP4 GEMM.
enum class RecipeArg { kDefault, kRecipe, kPerOperand };
struct ScaleRecipe {
  const char* name;
  DType a_type, b_type;  // kF8E4M3, or packed FP4 (kF4E2M1 / kI8)
  int gran_mn_a, gran_k_a, gran_mn_b, gran_k_b;
  SfStyle sfa, sfb;
  RecipeArg arg;          // how the granularities are passed (kDefault: they must be the defaults)
  double diff_threshold;  // the spec's calc_diff bound for these operand types
};

// A fully built call: inputs, poisoned output, float64 reference. run() restores d's initial bytes
// (poison, or C for c-is-d) and calls the API; check() compares against the reference.
struct PreparedGemm : MoveOnly {
  std::string what;  // every parameter, for failure messages
  Family family = Family::kBf16;
  Layout layout = Layout::kNT;
  CMode c_mode = CMode::kNone;
  Operand a, b;
  std::optional<Scales> sa, sb;
  gemm::Recipe recipe;
  Matrix d;
  std::optional<Matrix> c;
  std::vector<uint8_t> d_initial;
  std::vector<double> ref, ref_abs;  // D and sum of |terms| (C included) per element
  double diff_threshold = 1e-5;

  void run();
  ::testing::AssertionResult check() const;
};

// g's float64 reference (ref, ref_abs) from its operands' values, scales and C; call it again after
// editing operand values, before run() (an in-place C is read from d).
void compute_reference(PreparedGemm* g, const GemmShape& s);

// run() then check(); an exception from the call is a failure that names the case.
::testing::AssertionResult run_and_check(PreparedGemm& g);

PreparedGemm prepare_plain(Family family, DType operand_type, Layout layout, const GemmShape& s, Rng& rng);
PreparedGemm prepare_scaled(const ScaleRecipe& r, Layout layout, const GemmShape& s, Rng& rng);

// Calls the public function of a family/layout with raw views (for the bad-input tests).
void call_plain(Family family, Layout layout, const TensorView& a, const TensorView& b, const TensorView& d,
                const TensorView* c);
void call_scaled(Layout layout, const gemm::ScaledTensor& a, const gemm::ScaledTensor& b, const TensorView& d,
                 const TensorView* c, const gemm::Recipe& recipe);

// The transposed view of a 2-D view (no data movement).
TensorView transposed(const TensorView& t);

// ---- (ISA level, layout) parametrised fixture ----
// SetUp skips levels this CPU lacks (with a message) and caps the ISA for the test; TearDown restores it.
class IsaLayoutTest : public ::testing::TestWithParam<std::tuple<Isa, Layout>> {
 protected:
  void SetUp() override;
  void TearDown() override { cap_.reset(); }
  Isa isa() const { return std::get<0>(GetParam()); }
  Layout layout() const { return std::get<1>(GetParam()); }

 private:
  std::optional<IsaCapScope> cap_;
};
std::string isa_layout_name(const ::testing::TestParamInfo<std::tuple<Isa, Layout>>& info);

#define TESSERA_INSTANTIATE_ISA_LAYOUT(Suite)                                                       \
  INSTANTIATE_TEST_SUITE_P(AllIsas, Suite,                                                          \
                           ::testing::Combine(::testing::ValuesIn(::tessera::test::all_isas()),     \
                                              ::testing::ValuesIn(::tessera::test::all_layouts())), \
                           ::tessera::test::isa_layout_name)

}  // namespace tessera::test
