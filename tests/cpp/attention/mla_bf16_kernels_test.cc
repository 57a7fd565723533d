// The bf16 MLA kernel sets (vdpbf16ps, AMX, BFDOT: whichever of them this CPU runs) called directly, tile by
// tile, against float64 attention over the same bf16 inputs: odd query-row counts (partial register tiles),
// tiles of 1 to 96 tokens (odd token counts leave half a token pair), rows that see nothing, separate V
// rows; and the FP8 dequantisation of every bf16 set bit for bit against the rule all of them state
// (e4m3 * scale in fp32, rounded to nearest even bf16, results below 2^-126 flushed to zero).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/mla_kernel_set.h"
#include "backends/cpu/registry.h"
#include "tessera/core/dtype.h"
#include "test_util.h"

namespace tessera::test {
namespace {

struct Buffer {
  explicit Buffer(size_t bytes) : p(std::aligned_alloc(64, (bytes + 63) & ~size_t(63))) {}
  ~Buffer() { std::free(p); }
  void* p;
};

// The bf16 sets the levels this CPU supports choose (each once).
std::vector<const cpu::MlaKernelSet*> bf16_sets() {
  std::vector<const cpu::MlaKernelSet*> sets;
  for (Isa level : all_isas()) {
    if (!isa_supported(level)) continue;
    const auto* ks = static_cast<const cpu::MlaKernelSet*>(cpu::choose_kernel_at(cpu::Slot::kMla, level, "test").table);
    if (ks && ks->elem == cpu::MlaElem::kBF16 && std::find(sets.begin(), sets.end(), ks) == sets.end())
      sets.push_back(ks);
  }
  return sets;
}

struct Case {
  int m, d_qk, d_v;
  std::vector<int> tiles;  // tokens per attend_tile call (at most 96: every bf16 set takes that many)
  bool separate_v;
};

void check_case(const cpu::MlaKernelSet& ks, const Case& c, Rng& rng, const std::string& what) {
  int total = 0;
  for (int nt : c.tiles) total += nt;
  const int k_stride = c.d_qk + 24, v_stride = c.d_v + 24;
  std::vector<uint16_t> kd(size_t(total) * k_stride), vd(size_t(total) * v_stride), q(size_t(c.m) * c.d_qk);
  for (auto& x : kd) x = f32_to_bf16(float(rng.normal()));
  for (auto& x : vd) x = f32_to_bf16(float(rng.normal()));
  for (auto& x : q) x = f32_to_bf16(float(rng.normal()));
  std::vector<const void*> k, v;
  for (int t = 0; t < total; ++t) {
    k.push_back(kd.data() + size_t(t) * k_stride);
    v.push_back(vd.data() + size_t(t) * v_stride);
  }
  std::vector<std::vector<int>> visible;
  for (int nt : c.tiles) {
    std::vector<int> vis(size_t(c.m));
    for (int r = 0; r < c.m; ++r) vis[size_t(r)] = r == 0 ? 0 : r == 1 ? nt : rng.uniform_int(0, nt);
    visible.push_back(vis);
  }
  const float scale = float(1.0 / std::sqrt(double(c.d_qk)));

  Buffer packed(ks.q_packed_bytes(c.m, c.d_qk)), scratch(ks.scratch_bytes(c.m, c.d_qk, c.d_v));
  ks.pack_q(q.data(), c.m, c.d_qk, packed.p);
  std::vector<float> o(size_t(c.m) * c.d_v, 0.0f), row_max(size_t(c.m), -INFINITY), row_sum(size_t(c.m), 0.0f);
  int first = 0;
  for (size_t i = 0; i < c.tiles.size(); ++i) {
    cpu::MlaTileArgs a{};
    a.q_packed = packed.p;
    a.m = c.m;
    a.d_qk = c.d_qk;
    a.d_v = c.d_v;
    a.scale = scale;
    a.k_rows = k.data() + first;
    a.v_rows = c.separate_v ? v.data() + first : nullptr;
    a.nt = c.tiles[i];
    a.visible = visible[i].data();
    a.o = o.data();
    a.row_max = row_max.data();
    a.row_sum = row_sum.data();
    a.scratch = scratch.p;
    ks.attend_tile(a);
    first += c.tiles[i];
  }
  if (ks.o_to_natural) ks.o_to_natural(o.data(), c.m, c.d_v);

  for (int r = 0; r < c.m; ++r) {
    std::vector<double> s;
    std::vector<const uint16_t*> vrows;
    first = 0;
    for (size_t i = 0; i < c.tiles.size(); ++i) {
      for (int t = 0; t < visible[i][size_t(r)]; ++t) {
        const uint16_t* kt = static_cast<const uint16_t*>(k[size_t(first + t)]);
        double dot = 0;
        for (int j = 0; j < c.d_qk; ++j) dot += double(bf16_to_f32(q[size_t(r) * c.d_qk + j])) * bf16_to_f32(kt[j]);
        s.push_back(dot * scale);
        vrows.push_back(c.separate_v ? static_cast<const uint16_t*>(v[size_t(first + t)]) : kt);
      }
      first += c.tiles[i];
    }
    if (s.empty()) {
      EXPECT_EQ(row_max[size_t(r)], -INFINITY) << what << " row " << r;
      EXPECT_EQ(row_sum[size_t(r)], 0.0f) << what << " row " << r;
      for (int j = 0; j < c.d_v; ++j) ASSERT_EQ(o[size_t(r) * c.d_v + j], 0.0f) << what << " row " << r;
      continue;
    }
    double mx = -INFINITY, sum = 0;
    for (double x : s) mx = std::max(mx, x);
    for (double x : s) sum += std::exp(x - mx);
    EXPECT_NEAR(row_max[size_t(r)] + std::log(double(row_sum[size_t(r)])), mx + std::log(sum), 1e-3)
        << what << " lse of row " << r;
    // Normalised outputs: averages of unit-normal V values; bf16 p gives ~2^-9 relative per term.
    for (int j = 0; j < c.d_v; ++j) {
      double ref = 0;
      for (size_t t = 0; t < s.size(); ++t) ref += std::exp(s[t] - mx) / sum * bf16_to_f32(vrows[t][j]);
      const double got = double(o[size_t(r) * c.d_v + j]) / row_sum[size_t(r)];
      ASSERT_NEAR(got, ref, 4e-3 + 8e-3 * std::fabs(ref)) << what << " row " << r << " column " << j;
    }
  }
}

TEST(MlaBf16KernelSets, AttendTilesMatchFloat64) {
  const auto sets = bf16_sets();
  if (sets.empty()) GTEST_SKIP() << "no bf16 MLA set on this CPU";
  Rng rng = Rng::for_current_test();
  const Case cases[] = {
      {16, 576, 512, {96, 96, 37}, false},  // DeepSeek dims, full and partial tiles
      {37, 576, 512, {1, 95, 24}, false},   // odd row count: row tail of every register tile
      {7, 192, 128, {50, 96}, true},        // MHA prefill dims, separate V, fewer rows than one tile
      {128, 64, 64, {13}, false},           // the most rows a unit has
      {1, 32, 16, {96, 7}, true},           // one row
      {70, 200, 40, {96, 41}, false},       // 40 columns: a partial column block everywhere
  };
  for (const cpu::MlaKernelSet* ks : sets)
    for (const Case& c : cases) {
      if (c.d_qk % ks->qk_align != 0 || c.d_v % ks->v_align != 0) continue;
      check_case(*ks, c, rng,
                 std::string(ks->name) + " m=" + std::to_string(c.m) + " d_qk=" + std::to_string(c.d_qk) +
                     " d_v=" + std::to_string(c.d_v));
    }
}

// e4m3 * scale rounded to bf16 by the sets' stated rule.
uint16_t dequant_rule(uint8_t code, float scale) {
  const float x = e4m3_to_f32(code) * scale;
  if (std::isnan(x)) return uint16_t(f32_bits(x) >> 16 | 0x40);
  if (std::fabs(x) < 0x1p-126f) return uint16_t((f32_bits(x) >> 16) & 0x8000);
  return f32_to_bf16(x);
}

TEST(MlaBf16KernelSets, DequantisationFollowsTheRoundingRule) {
  const auto sets = bf16_sets();
  if (sets.empty()) GTEST_SKIP() << "no bf16 MLA set on this CPU";
  Rng rng = Rng::for_current_test();
  // V32 tokens: 512 e4m3 values in 4 blocks, 4 fp32 scales, 64 bf16 RoPE values. Scales: powers of two
  // (the quantiser's), one making subnormal bf16 results, and arbitrary fp32 values (inexact products).
  const float scale_sets[][4] = {{1.0f, 0.5f, 0x1p-20f, 0x1p30f},
                                 {0x1p-120f, 3.0f, 0.0137f, -1.7f},
                                 {float(rng.uniform(0.1, 10)), float(rng.uniform(0.1, 10)), 1e-38f, 0x1p100f}};
  for (const cpu::MlaKernelSet* ks : sets)
    for (const auto& scales : scale_sets) {
      std::vector<uint8_t> token(656);
      for (int i = 0; i < 512; ++i) token[size_t(i)] = uint8_t(i * 37 + 11);  // every code, NaN included
      std::memcpy(token.data() + 512, scales, 16);
      for (int i = 528; i < 656; ++i) token[size_t(i)] = uint8_t(rng.bits32());
      std::vector<uint16_t> row(576, 0xAAAA);
      ks->dequant_v32(token.data(), row.data());
      for (int i = 0; i < 512; ++i) {
        const uint16_t want = dequant_rule(token[size_t(i)], scales[i / 128]);
        const bool both_nan = std::isnan(bf16_to_f32(want)) && std::isnan(bf16_to_f32(row[size_t(i)]));
        ASSERT_TRUE(both_nan || row[size_t(i)] == want)
            << ks->name << " value " << i << " code " << int(token[size_t(i)]) << " scale " << scales[i / 128]
            << ": got " << row[size_t(i)] << ", want " << want;
      }
      ASSERT_EQ(std::memcmp(row.data() + 512, token.data() + 528, 128), 0) << ks->name << ": RoPE part";
    }
}

}  // namespace
}  // namespace tessera::test
