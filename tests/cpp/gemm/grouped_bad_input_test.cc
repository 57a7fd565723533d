// Bad input to the M-grouped GEMMs throws tessera::Error (kInvalidArgument) naming the function and the
// argument, before d is touched: misaligned segments, group ids out of range, layout lengths and group
// counts that disagree, psum ends decreasing / past the rows / inside an alignment gap, wrong scale
// shapes, a non-bf16 output, masked_m out of range, expected_m <= 0.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "gemm/grouped_harness.h"

namespace tessera::test {
namespace {

constexpr const char* kContiguous = "m_grouped_fp8_fp4_gemm_nt_contiguous";
constexpr const char* kMasked = "m_grouped_bf16_gemm_nt_masked";

// Expects the call to throw kInvalidArgument mentioning every needle, and d's bytes to be unchanged.
void expect_rejected(const std::function<void()>& call, const Buffer& d, std::initializer_list<std::string> needles) {
  const std::vector<uint8_t> before = d.bytes;
  EXPECT_TRUE(throws_invalid(call, needles));
  EXPECT_TRUE(before == d.bytes) << "d was modified by a rejected call";
}

struct ContiguousCase {
  GroupedRows rows;
  Fp8Operand a, b;
  int64_t n = 32, k = 256;
};

ContiguousCase make_case(Rng& rng) {
  ContiguousCase c;
  c.rows = grouped_rows({5, 16, 9}, 16, false);
  c.a = quantised_fp8(0, c.rows.m_sum, c.k, 1, rng, c.rows.row_group);
  c.b = quantised_fp8(3, c.n, c.k, 128, rng);
  return c;
}

void call_contiguous(const ContiguousCase& c, const TensorView& sfa, const TensorView& sfb, const Buffer& layout,
                     bool psum, const Buffer& d, int alignment = 16) {
  gemm::ContiguousLayout l;
  l.grouped_layout = layout.view;
  l.use_psum_layout = psum;
  l.mk_alignment = alignment;
  gemm::m_grouped_fp8_fp4_gemm_nt_contiguous({c.a.data.view, sfa}, {c.b.data.view, sfb}, d.view, l);
}

TEST(GroupedBadInput, ContiguousLayouts) {
  Rng rng = Rng::for_current_test();
  const ContiguousCase c = make_case(rng);
  const TensorView sfa = c.a.scale.view, sfb = c.b.scale.view;
  Buffer d = poisoned_bf16({c.rows.m_sum, c.n});
  auto run = [&](const std::vector<int32_t>& layout, bool psum) {
    const Buffer ids = int32_buffer(layout);
    call_contiguous(c, sfa, sfb, ids, psum, d);
  };

  std::vector<int32_t> misaligned(size_t(c.rows.m_sum), -1);
  for (int r = 0; r < 5; ++r) misaligned[size_t(r)] = 0;
  for (int r = 5; r < 21; ++r) misaligned[size_t(r)] = 1;  // group 1 starts at row 5
  expect_rejected([&] { run(misaligned, false); }, d, {kContiguous, "grouped_layout", "row 5", "alignment 16"});
  {
    const Buffer ids = int32_buffer(misaligned);  // the same layout is valid with alignment 1
    call_contiguous(c, sfa, sfb, ids, false, d, 1);
  }
  d = poisoned_bf16({c.rows.m_sum, c.n});

  for (const int32_t bad : {3, -2}) {
    std::vector<int32_t> ids = c.rows.layout;
    ids[32] = bad;
    expect_rejected([&] { run(ids, false); }, d, {kContiguous, "grouped_layout", std::to_string(bad)});
  }
  std::vector<int32_t> short_ids(c.rows.layout.begin(), c.rows.layout.end() - 1);
  expect_rejected([&] { run(short_ids, false); }, d, {kContiguous, "grouped_layout"});

  expect_rejected([&] { run({5, 21, 41, 41}, true); }, d, {kContiguous, "grouped_layout", "G"});  // 4 ends, 3 groups
  expect_rejected([&] { run({5, 3, 41}, true); }, d, {kContiguous, "grouped_layout"});            // decreasing
  expect_rejected([&] { run({5, 21, 49}, true); }, d, {kContiguous, "grouped_layout", "48"});     // past M_sum
  expect_rejected([&] { run({5, 10, 41}, true); }, d, {kContiguous, "grouped_layout", "gap"});    // inside [5, 16)
}

TEST(GroupedBadInput, ContiguousScalesAndOutput) {
  Rng rng = Rng::for_current_test();
  const ContiguousCase c = make_case(rng);
  const Buffer ids = int32_buffer(c.rows.layout);
  Buffer d = poisoned_bf16({c.rows.m_sum, c.n});
  TensorView short_sfa = c.a.scale.view, short_sfb_groups = c.b.scale.view, short_sfb_k = c.b.scale.view;
  short_sfa.shape[0] -= 1;
  short_sfb_groups.shape[0] -= 1;
  short_sfb_k.shape[2] -= 1;
  expect_rejected([&] { call_contiguous(c, short_sfa, c.b.scale.view, ids, false, d); }, d, {kContiguous, "a.scale"});
  expect_rejected([&] { call_contiguous(c, c.a.scale.view, short_sfb_groups, ids, false, d); }, d,
                  {kContiguous, "b.scale"});
  expect_rejected([&] { call_contiguous(c, c.a.scale.view, short_sfb_k, ids, false, d); }, d, {kContiguous, "b.scale"});
  Buffer d32 = poisoned_f32({c.rows.m_sum, c.n});
  expect_rejected([&] { call_contiguous(c, c.a.scale.view, c.b.scale.view, ids, false, d32); }, d32,
                  {kContiguous, "'d'", "bfloat16"});
}

TEST(GroupedBadInput, MaskedCountsAndHints) {
  Rng rng = Rng::for_current_test();
  Bf16Operand a = random_bf16({2, 8, 64}, rng);
  Bf16Operand b = random_bf16({2, 16, 64}, rng);
  Buffer d = poisoned_bf16({2, 8, 16});
  auto run = [&](const std::vector<int32_t>& masked_m, int64_t expected_m) {
    const Buffer m = int32_buffer(masked_m);
    gemm::m_grouped_bf16_gemm_nt_masked(a.buf.view, b.buf.view, d.view, m.view, expected_m);
  };
  expect_rejected([&] { run({9, 1}, 4); }, d, {kMasked, "masked_m", "9"});
  expect_rejected([&] { run({-1, 1}, 4); }, d, {kMasked, "masked_m"});
  expect_rejected([&] { run({1, 1, 1}, 4); }, d, {kMasked, "masked_m"});
  expect_rejected([&] { run({1, 1}, 0); }, d, {kMasked, "expected_m"});
  Bf16Operand b3 = random_bf16({3, 16, 64}, rng);
  const Buffer m = int32_buffer({1, 1});
  expect_rejected([&] { gemm::m_grouped_bf16_gemm_nt_masked(a.buf.view, b3.buf.view, d.view, m.view, 4); }, d,
                  {kMasked, "'b'"});
}

}  // namespace
}  // namespace tessera::test
