// The fp32 MLA kernel sets (the scalar reference and the Highway set at every vector level this CPU has)
// called directly, tile by tile, against float64: odd query-row counts and d_qk, d_v tails, partial tiles,
// per-row visibility (including rows that see nothing), separate V rows, rows followed by NaN so any read
// past a row's end shows; plus the row conversions (bf16/fp16 widening, FP8 dequantisation) bit for bit
// against the scalar set, and the registry's choice per level.
#include "backends/cpu/mla_kernel_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/registry.h"
#include "test_util.h"

namespace tessera::test {
namespace {

struct SetAtLevel {
  const cpu::MlaKernelSet* set;
  std::string name;
};

// The scalar set and the Highway set at each vector level this CPU supports.
std::vector<SetAtLevel> fp32_sets() {
  std::vector<SetAtLevel> sets{{cpu::mla_kernels_scalar(), "scalar"}};
  for (Isa l : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(l) && cpu::mla_kernels_hwy(l)) sets.push_back({cpu::mla_kernels_hwy(l), isa_name(l)});
  return sets;
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) : p(std::aligned_alloc(64, (bytes + 63) & ~size_t(63))) {}
  ~AlignedBuffer() { std::free(p); }
  void* p;
};

// Rows of `n` floats at stride n + 16, the 16 floats after each row NaN.
struct PoisonedRows {
  PoisonedRows(int rows, int n, Rng& rng) : stride(n + 16), data(size_t(rows) * size_t(n + 16)) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < stride; ++c)
        data[size_t(r) * stride + c] = c < n ? float(rng.normal()) : std::numeric_limits<float>::quiet_NaN();
    for (int r = 0; r < rows; ++r) ptrs.push_back(data.data() + size_t(r) * stride);
  }
  int stride;
  std::vector<float> data;
  std::vector<const void*> ptrs;
};

struct TileCase {
  int m, d_qk, d_v;
  std::vector<int> tiles;  // tokens per attend_tile call
  bool separate_v;
};

void progress_check(void* ctx, int part, int parts) {
  EXPECT_GE(part, 0);
  EXPECT_LT(part, parts);
  ++*static_cast<int*>(ctx);
}

// Runs the tiles of `c` through `ks` and compares normalised outputs and lse with float64 attention.
void check_case(const cpu::MlaKernelSet& ks, const TileCase& c, Rng& rng, const std::string& what) {
  int total = 0;
  for (int nt : c.tiles) total += nt;
  PoisonedRows k(total, c.d_qk, rng), v(total, c.d_v, rng);
  std::vector<float> q(size_t(c.m) * c.d_qk);
  for (float& x : q) x = float(rng.normal());
  // Row visibility per tile: row 0 sees nothing, row 1 everything, the others a random prefix of each tile.
  std::vector<std::vector<int>> visible;
  for (int nt : c.tiles) {
    std::vector<int> vis(size_t(c.m));
    for (int r = 0; r < c.m; ++r) vis[size_t(r)] = r == 0 ? 0 : r == 1 ? nt : rng.uniform_int(0, nt);
    visible.push_back(vis);
  }
  const float scale = float(1.0 / std::sqrt(double(c.d_qk)));

  AlignedBuffer packed(ks.q_packed_bytes(c.m, c.d_qk)), scratch(ks.scratch_bytes(c.m, c.d_qk, c.d_v));
  ks.pack_q(q.data(), c.m, c.d_qk, packed.p);
  std::vector<float> o(size_t(c.m) * c.d_v, 0.0f), row_max(size_t(c.m), -INFINITY), row_sum(size_t(c.m), 0.0f);
  int first = 0;
  for (size_t i = 0; i < c.tiles.size(); ++i) {
    const int nt = c.tiles[i];
    ASSERT_LE(nt, ks.tile_tokens);
    int calls = 0;
    cpu::MlaTileArgs a{};
    a.q_packed = packed.p;
    a.m = c.m;
    a.d_qk = c.d_qk;
    a.d_v = c.d_v;
    a.scale = scale;
    a.k_rows = k.ptrs.data() + first;
    a.v_rows = c.separate_v ? v.ptrs.data() + first : nullptr;
    a.nt = nt;
    a.visible = visible[i].data();
    a.o = o.data();
    a.row_max = row_max.data();
    a.row_sum = row_sum.data();
    a.scratch = scratch.p;
    a.progress = progress_check;
    a.progress_ctx = &calls;
    ks.attend_tile(a);
    EXPECT_GE(calls, 1) << what << ": progress never called";
    first += nt;
  }
  if (ks.o_to_natural) ks.o_to_natural(o.data(), c.m, c.d_v);

  for (int r = 0; r < c.m; ++r) {
    // float64 reference over the tokens row r saw.
    std::vector<double> s;
    std::vector<const float*> vrows;
    first = 0;
    for (size_t i = 0; i < c.tiles.size(); ++i) {
      for (int t = 0; t < visible[i][size_t(r)]; ++t) {
        const float* kt = static_cast<const float*>(k.ptrs[size_t(first + t)]);
        double dot = 0;
        for (int j = 0; j < c.d_qk; ++j) dot += double(q[size_t(r) * c.d_qk + j]) * kt[j];
        s.push_back(dot * scale);
        vrows.push_back(c.separate_v ? static_cast<const float*>(v.ptrs[size_t(first + t)]) : kt);
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
    EXPECT_NEAR(row_max[size_t(r)] + std::log(double(row_sum[size_t(r)])), mx + std::log(sum), 2e-5)
        << what << " lse of row " << r;
    for (int j = 0; j < c.d_v; ++j) {
      double ref = 0;
      for (size_t t = 0; t < s.size(); ++t) ref += std::exp(s[t] - mx) / sum * vrows[t][j];
      const double got = double(o[size_t(r) * c.d_v + j]) / row_sum[size_t(r)];
      ASSERT_NEAR(got, ref, 2e-5 + 2e-5 * std::fabs(ref)) << what << " row " << r << " column " << j;
    }
  }
}

TEST(MlaKernelSets, AttendTilesMatchFloat64) {
  Rng rng = Rng::for_current_test();
  const TileCase cases[] = {
      {16, 576, 512, {96, 96, 37}, false},  // DeepSeek dims, full and partial tiles
      {37, 576, 512, {1, 95, 24}, false},   // odd row count: row tail of every register tile
      {7, 75, 48, {50, 96}, true},          // odd d_qk, a d_v of three AVX2 / AVX-512 vectors, separate V
      {128, 64, 64, {13}, false},           // the most rows a unit has
      {1, 33, 16, {96, 7}, true},           // one row
      {70, 200, 80, {96, 41}, false},       // 80 columns: an AVX-512 block of 4 vectors + 1
  };
  for (const SetAtLevel& s : fp32_sets()) {
    for (const TileCase& c : cases) {
      if (c.d_v % s.set->v_align != 0 || c.d_qk % s.set->qk_align != 0) continue;
      TileCase fitted = c;
      for (int& nt : fitted.tiles) nt = std::min(nt, s.set->tile_tokens);
      check_case(
          *s.set, fitted, rng,
          s.name + " m=" + std::to_string(c.m) + " d_qk=" + std::to_string(c.d_qk) + " d_v=" + std::to_string(c.d_v));
    }
  }
}

// A NaN in the RoPE part of a K row (scores only) reaches exactly the rows that see that token; one in
// its V part reaches at least those rows (the vector sets share p.v over a tile's rows: p = 0 times NaN
// is NaN for a row that does not see the token, as in the avx512bf16 set).
void run_nan_tile(const cpu::MlaKernelSet& ks, int nan_column, std::vector<float>* o) {
  Rng rng = Rng::for_current_test();
  const int m = 9, d_qk = 64, d_v = 32, nt = 30;
  PoisonedRows k(nt, d_qk, rng);
  const_cast<float*>(static_cast<const float*>(k.ptrs[20]))[nan_column] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> q(size_t(m) * d_qk);
  for (float& x : q) x = float(rng.normal());
  std::vector<int> vis(size_t(m), nt);
  vis[3] = 20;  // row 3 stops before the NaN token
  AlignedBuffer packed(ks.q_packed_bytes(m, d_qk)), scratch(ks.scratch_bytes(m, d_qk, d_v));
  ks.pack_q(q.data(), m, d_qk, packed.p);
  o->assign(size_t(m) * d_v, 0.0f);
  std::vector<float> mx(size_t(m), -INFINITY), sum(size_t(m), 0.0f);
  cpu::MlaTileArgs a{};
  a.q_packed = packed.p;
  a.m = m;
  a.d_qk = d_qk;
  a.d_v = d_v;
  a.scale = 0.125f;
  a.k_rows = k.ptrs.data();
  a.nt = nt;
  a.visible = vis.data();
  a.o = o->data();
  a.row_max = mx.data();
  a.row_sum = sum.data();
  a.scratch = scratch.p;
  ks.attend_tile(a);
  if (ks.o_to_natural) ks.o_to_natural(o->data(), m, d_v);
}

bool row_has_nan(const std::vector<float>& o, int r, int d_v) {
  for (int j = 0; j < d_v; ++j)
    if (std::isnan(o[size_t(r) * d_v + j])) return true;
  return false;
}

TEST(MlaKernelSets, NaNInAKeyReachesTheRowsThatSeeIt) {
  for (const SetAtLevel& s : fp32_sets()) {
    std::vector<float> o;
    run_nan_tile(*s.set, 40, &o);  // RoPE part
    for (int r = 0; r < 9; ++r) EXPECT_EQ(row_has_nan(o, r, 32), r != 3) << s.name << " row " << r;
    run_nan_tile(*s.set, 5, &o);  // V part
    for (int r = 0; r < 9; ++r) {
      if (r == 3) continue;
      EXPECT_TRUE(row_has_nan(o, r, 32)) << s.name << " row " << r;
    }
  }
}

TEST(MlaKernelSets, WidenRowIsExact) {
  // Every fp16 and bf16 code, at odd lengths so the tail path runs too.
  std::vector<uint16_t> codes(65536 + 7);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint16_t(i * 40503u);
  for (const SetAtLevel& s : fp32_sets()) {
    if (!s.set->widen_row) continue;
    for (int n : {1, 7, 17, 575, int(codes.size())}) {
      for (bool fp16 : {false, true}) {
        std::vector<float> got(size_t(n) + 1, 12345.0f);
        s.set->widen_row(codes.data(), n, fp16, got.data());
        EXPECT_EQ(got[size_t(n)], 12345.0f) << s.name << ": wrote past the row";
        for (int i = 0; i < n; ++i) {
          const float ref = fp16 ? f16_to_f32(codes[size_t(i)]) : bf16_to_f32(codes[size_t(i)]);
          if (std::isnan(ref)) {
            ASSERT_TRUE(std::isnan(got[size_t(i)])) << s.name << " code " << hex(codes[size_t(i)]);
          } else {
            ASSERT_EQ(f32_bits(got[size_t(i)]), f32_bits(ref))
                << s.name << (fp16 ? " fp16" : " bf16") << " code " << hex(codes[size_t(i)]);
          }
        }
      }
    }
  }
}

TEST(MlaKernelSets, DequantisationMatchesTheScalarSet) {
  Rng rng = Rng::for_current_test();
  const cpu::MlaKernelSet* scalar = cpu::mla_kernels_scalar();
  std::vector<uint8_t> token(656 + 1);  // + 1: the token starts at an odd address
  uint8_t* tok = token.data() + 1;
  for (int i = 0; i < 512; ++i) tok[i] = uint8_t(i < 256 ? i : rng.bits32());  // every e4m3 code
  const float v32_scales[] = {0x1p-13f, 3.0f, 0x1p5f, 0.3f};
  std::memcpy(tok + 512, v32_scales, 16);
  for (int i = 528; i < 656; ++i) tok[i] = uint8_t(rng.bits32());
  const uint8_t model1_scales[8] = {127 - 13, 127, 0xFF, 130, 0, 127 + 20, 1, 0};
  for (const SetAtLevel& s : fp32_sets()) {
    for (bool v32 : {true, false}) {
      const int d = v32 ? 576 : 512;
      std::vector<float> ref(static_cast<size_t>(d)), got(static_cast<size_t>(d));
      if (v32) {
        scalar->dequant_v32(tok, ref.data());
        s.set->dequant_v32(tok, got.data());
      } else {
        scalar->dequant_model1(tok, model1_scales, ref.data());
        s.set->dequant_model1(tok, model1_scales, got.data());
      }
      for (int i = 0; i < d; ++i) {
        if (std::isnan(ref[size_t(i)])) {
          EXPECT_TRUE(std::isnan(got[size_t(i)])) << s.name << " element " << i;
        } else {
          EXPECT_EQ(f32_bits(got[size_t(i)]), f32_bits(ref[size_t(i)]))
              << s.name << (v32 ? " V32" : " MODEL1") << " element " << i;
        }
      }
    }
  }
}

// Power-of-two scales at and past the range where the vector sets skip the rounding to bf16 (every
// product exact: 2^-100 .. 2^100), on every e4m3 code.
TEST(MlaKernelSets, DequantisationAtTheExactScaleBoundaries) {
  const cpu::MlaKernelSet* scalar = cpu::mla_kernels_scalar();
  std::vector<uint8_t> tok(656, 0);
  for (int i = 0; i < 512; ++i) tok[size_t(i)] = uint8_t(i);
  for (const float edge : {0x1p100f, 0x1p-100f, 0x1p101f, 0x1p-101f, 0x1p127f, 0x1p-126f}) {
    const float scales[] = {edge, edge, edge, edge};
    std::memcpy(tok.data() + 512, scales, 16);
    std::vector<float> ref(576), got(576);
    scalar->dequant_v32(tok.data(), ref.data());
    for (const SetAtLevel& s : fp32_sets()) {
      s.set->dequant_v32(tok.data(), got.data());
      for (int i = 0; i < 512; ++i) {
        if (!std::isnan(ref[size_t(i)])) {
          EXPECT_EQ(f32_bits(got[size_t(i)]), f32_bits(ref[size_t(i)]))
              << s.name << " scale " << edge << " code " << i % 256;
        }
      }
    }
  }
}

TEST(MlaKernelSets, RegistryGivesTheVectorSetsTheirLevels) {
  for (Isa l : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(l)) {
      EXPECT_STREQ(cpu::choose_kernel_at(cpu::Slot::kMla, l, "test").impl->name, "mla_hwy") << isa_name(l);
    }
  }
  EXPECT_STREQ(cpu::choose_kernel_at(cpu::Slot::kMla, Isa::kScalar, "test").impl->name, "mla_scalar");
}

}  // namespace
}  // namespace tessera::test
