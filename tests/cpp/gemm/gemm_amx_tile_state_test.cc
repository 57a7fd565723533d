// AMX kernels trust the tile configuration they loaded for the rest of a parallel region
// (backends/cpu/amx/tile_config.cc). Other code on the calling thread (oneDNN, say) may configure or
// release the tiles between two calls; the next call must notice and give the same bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

// What another library might leave behind: every tile 1 row x 4 bytes, or no configuration at all.
void foreign_tile_config() {
  alignas(64) uint8_t cfg[64];
  std::memset(cfg, 0, sizeof(cfg));
  cfg[0] = 1;  // palette 1
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 4;  // colsb
    cfg[48 + t] = 1;      // rows
  }
  asm volatile("ldtilecfg %0" : : "m"(cfg));
}

void foreign_tile_release() {
  asm volatile("tilerelease");
}

struct TileStateCase {
  const char* name;
  Family family;
  DType operand_type;
  const char* recipe;
  GemmShape shape;
};

// clang-format off
const TileStateCase kCases[] = {
    {"bf16 packed (AMX micro-kernel)", Family::kBf16, kBf16, nullptr, {129, 200, 576, kKm, kKm, 0, kF32, CMode::kNone}},
    {"bf16 decode gemv M=2 (AMX tiles)", Family::kBf16, kBf16, nullptr, {2, 61, 1000, kKm, kKm, 0, kF32, CMode::kNone}},
    {"fp8 decode gemv M=5 (AMX tiles)", Family::kFp8Fp4, kE4m3, "fp8 token(1,128) x block(128,128) f32",
     {5, 77, 576, kKm, kKm, 0, kBf16, CMode::kNone}},
};
// clang-format on

TEST(GemmAmxTileState, ForeignTileConfigurationOrReleaseBetweenCalls) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "this CPU lacks AMX";
  IsaCapScope cap(Isa::kAmx);
  Rng rng = Rng::for_current_test();
  for (const TileStateCase& tc : kCases) {
    PreparedGemm g = tc.recipe ? prepare_scaled(scale_recipe(tc.recipe), Layout::kNT, tc.shape, rng)
                               : prepare_plain(tc.family, tc.operand_type, Layout::kNT, tc.shape, rng);
    const int es = dtype_storage_bytes(g.d.dtype);
    for (int threads : {1, 2}) {
      NumThreadsScope scope(threads);
      g.run();
      ASSERT_TRUE(g.check()) << tc.name;
      const std::vector<uint8_t> first = g.d.storage;
      foreign_tile_config();
      g.run();
      EXPECT_TRUE(bitwise_equal(first, g.d.storage, g.d.rows, g.d.cols, g.d.ld, es))
          << tc.name << ", " << threads << " threads: after another configuration\n  " << g.what;
      foreign_tile_release();
      g.run();
      EXPECT_TRUE(bitwise_equal(first, g.d.storage, g.d.rows, g.d.cols, g.d.ld, es))
          << tc.name << ", " << threads << " threads: after tilerelease\n  " << g.what;
    }
  }
}

}  // namespace
}  // namespace tessera::test
