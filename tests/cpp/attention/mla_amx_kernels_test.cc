// The AMX MLA kernel set called directly, tile by tile, against the avx512bf16 set on the same bf16 inputs
// (both round p to bf16 and accumulate in fp32; only the summation order differs): odd query-row counts
// (partial 16-row tiles, which keep o row-major), token tiles of 1 to 256 tokens (partial 16- and 32-token
// groups), rows that see nothing, separate V rows, and K rows both evenly spaced (read in place) and
// scattered (staged). The first tile with o_fresh (o poisoned with NaN, written not accumulated) gives the
// same values as zeroed o accumulated. Skipped on CPUs without AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

struct Case {
  int m, d_qk, d_v;
  std::vector<int> tiles;
  bool separate_v, scattered;
};

struct Result {
  std::vector<float> o, row_max, row_sum;
};

Result run(const cpu::MlaKernelSet& ks, const Case& c, const std::vector<uint16_t>& q,
           const std::vector<const void*>& k, const std::vector<const void*>& v,
           const std::vector<std::vector<int>>& visible, bool fresh_first = false) {
  Buffer packed(ks.q_packed_bytes(c.m, c.d_qk)), scratch(ks.scratch_bytes(c.m, c.d_qk, c.d_v));
  Buffer o_buf(size_t(c.m) * c.d_v * 4);
  ks.pack_q(q.data(), c.m, c.d_qk, packed.p);
  float* o = static_cast<float*>(o_buf.p);
  std::fill(o, o + size_t(c.m) * c.d_v, fresh_first ? NAN : 0.0f);
  Result r;
  r.row_max.assign(size_t(c.m), -INFINITY);
  r.row_sum.assign(size_t(c.m), 0.0f);
  // A tile longer than the set takes (the avx512bf16 set: 96 tokens) is split, its rows' visible prefixes
  // cut to the pieces.
  int first = 0;
  std::vector<int> vis(size_t(c.m));
  for (size_t i = 0; i < c.tiles.size(); ++i) {
    for (int p0 = 0; p0 < c.tiles[i]; p0 += ks.tile_tokens) {
      const int nt = std::min(ks.tile_tokens, c.tiles[i] - p0);
      for (int row = 0; row < c.m; ++row) vis[size_t(row)] = std::clamp(visible[i][size_t(row)] - p0, 0, nt);
      cpu::MlaTileArgs a{};
      a.q_packed = packed.p;
      a.m = c.m;
      a.d_qk = c.d_qk;
      a.d_v = c.d_v;
      a.scale = float(1.0 / std::sqrt(double(c.d_qk)));
      a.k_rows = k.data() + first + p0;
      a.v_rows = c.separate_v ? v.data() + first + p0 : nullptr;
      a.nt = nt;
      a.visible = vis.data();
      a.o = o;
      a.row_max = r.row_max.data();
      a.row_sum = r.row_sum.data();
      a.scratch = scratch.p;
      a.o_fresh = fresh_first && i == 0 && p0 == 0;
      ks.attend_tile(a);
    }
    first += c.tiles[i];
  }
  if (ks.o_to_natural) ks.o_to_natural(o, c.m, c.d_v);
  r.o.assign(o, o + size_t(c.m) * c.d_v);
  return r;
}

void compare(const Case& c, Rng& rng, const std::string& what) {
  int total = 0;
  for (int nt : c.tiles) total += nt;
  // K (and V) rows: 64-byte aligned, evenly spaced, or visited in a shuffled order.
  const int k_stride = c.d_qk + 32, v_stride = c.d_v + 32;
  Buffer k_buf(size_t(total) * k_stride * 2), v_buf(size_t(total) * v_stride * 2);
  uint16_t* kd = static_cast<uint16_t*>(k_buf.p);
  uint16_t* vd = static_cast<uint16_t*>(v_buf.p);
  for (size_t i = 0; i < size_t(total) * k_stride; ++i) kd[i] = f32_to_bf16(float(rng.normal()));
  for (size_t i = 0; i < size_t(total) * v_stride; ++i) vd[i] = f32_to_bf16(float(rng.normal()));
  std::vector<int> order(static_cast<size_t>(total));
  for (int t = 0; t < total; ++t) order[size_t(t)] = t;
  if (c.scattered)
    for (int t = total - 1; t > 0; --t) std::swap(order[size_t(t)], order[size_t(rng.uniform_int(0, t))]);
  std::vector<const void*> k, v;
  for (int t : order) {
    k.push_back(kd + size_t(t) * k_stride);
    v.push_back(vd + size_t(t) * v_stride);
  }
  std::vector<uint16_t> q(size_t(c.m) * c.d_qk);
  for (uint16_t& x : q) x = f32_to_bf16(float(rng.normal()));
  std::vector<std::vector<int>> visible;
  for (int nt : c.tiles) {
    std::vector<int> vis(size_t(c.m));
    for (int r = 0; r < c.m; ++r) vis[size_t(r)] = r == 0 ? 0 : r == 1 ? nt : rng.uniform_int(0, nt);
    visible.push_back(vis);
  }
  const Result want = run(*cpu::mla_kernels_avx512bf16(), c, q, k, v, visible);
  const Result got = run(*cpu::mla_kernels_amx(), c, q, k, v, visible);
  ASSERT_TRUE(cpu::mla_kernels_amx()->fresh_o);
  const Result fresh = run(*cpu::mla_kernels_amx(), c, q, k, v, visible, true);
  for (size_t i = 0; i < got.o.size(); ++i) ASSERT_EQ(fresh.o[i], got.o[i]) << what << " o_fresh, element " << i;
  EXPECT_EQ(fresh.row_max, got.row_max) << what;
  EXPECT_EQ(fresh.row_sum, got.row_sum) << what;
  for (int r = 0; r < c.m; ++r) {
    if (want.row_sum[size_t(r)] == 0.0f) {
      EXPECT_EQ(got.row_sum[size_t(r)], 0.0f) << what << " row " << r;
      EXPECT_EQ(got.row_max[size_t(r)], -INFINITY) << what << " row " << r;
      for (int j = 0; j < c.d_v; ++j) ASSERT_EQ(got.o[size_t(r) * c.d_v + j], 0.0f) << what << " row " << r;
      continue;
    }
    const double lse_want = want.row_max[size_t(r)] + std::log(double(want.row_sum[size_t(r)]));
    const double lse_got = got.row_max[size_t(r)] + std::log(double(got.row_sum[size_t(r)]));
    EXPECT_NEAR(lse_got, lse_want, 1e-3) << what << " lse of row " << r;
    // Normalised outputs: averages of unit-normal V values; bf16 p gives ~2^-9 relative per term.
    for (int j = 0; j < c.d_v; ++j) {
      const double w = want.o[size_t(r) * c.d_v + j] / want.row_sum[size_t(r)];
      const double g = got.o[size_t(r) * c.d_v + j] / got.row_sum[size_t(r)];
      ASSERT_NEAR(g, w, 4e-3 + 8e-3 * std::fabs(w)) << what << " row " << r << " column " << j;
    }
  }
}

TEST(MlaAmxKernels, MatchTheAvx512Bf16Set) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "this CPU lacks amx";
  Rng rng = Rng::for_current_test();
  const Case cases[] = {
      {128, 576, 512, {256, 256, 100}, false, false},  // DeepSeek decode: full tiles, in place
      {64, 576, 512, {256, 37}, false, true},          // scattered rows (sparse prefill): staged
      {37, 576, 512, {1, 255, 24}, false, false},      // partial query tile, partial token groups
      {7, 192, 128, {33, 256}, true, true},            // MHA prefill dims, separate V, fewer than 16 rows
      {16, 64, 64, {16, 17, 31, 32}, true, false},     // one query tile, short tiles
      {100, 96, 32, {200}, false, true},               // one column pair, odd query-tile count
  };
  for (const Case& c : cases) {
    const std::string what = "m=" + std::to_string(c.m) + " d_qk=" + std::to_string(c.d_qk) +
                             " d_v=" + std::to_string(c.d_v) + (c.scattered ? " scattered" : " in place");
    compare(c, rng, what);
  }
}

TEST(MlaAmxKernels, RegistryGivesTheAmxSetOnlyAtTheAmxLevel) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "this CPU lacks amx";
  EXPECT_STREQ(cpu::choose_kernel_at(cpu::Slot::kMla, Isa::kAmx, "test").impl->name, "mla_amx");
  EXPECT_STREQ(cpu::choose_kernel_at(cpu::Slot::kMla, Isa::kAvx512Bf16, "test").impl->name, "mla_avx512bf16");
}

}  // namespace
}  // namespace tessera::test
