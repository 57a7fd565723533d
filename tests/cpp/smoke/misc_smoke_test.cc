// Dispatch smoke: top-k (bf16 and fp32 rows), the ep kernels (through the kernel table, single rank),
// a tile-language kernel compiled and run, and the bf16 peak loop of `tessera info`, once each at this
// CPU's own level (see gemm_smoke_test.cc for why). TESSERA_SMOKE_EXPECT_ISA (set by scripts/test.sh
// under QEMU) names the level the dispatcher must have chosen.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/registry.h"
#include "select/topk_harness.h"
#include "smoke_util.h"
#include "tessera/info.h"
#include "tessera/tl/builder.h"
#include "tessera/tl/kernel.h"

namespace tessera::test::smoke {
namespace {

TEST(DispatchSmoke, ExpectedIsaLevel) {
  const char* want = std::getenv("TESSERA_SMOKE_EXPECT_ISA");
  std::printf("[smoke] active ISA level: %s (CPU: %s)\n", isa_name(active_isa()), cpu_features().model_name.c_str());
  if (!want) GTEST_SKIP() << "TESSERA_SMOKE_EXPECT_ISA not set";
  EXPECT_STREQ(isa_name(active_isa()), want);
}

TEST(DispatchSmoke, TopkBf16AndFp32) {
  Rng rng(10);
  for (bool bf16 : {true, false})
    for (int k : {16, 300}) {
      TopkCase c;
      c.rows = 3;
      c.cols = 4000;
      c.k = k;
      c.bf16 = bf16;
      const TopkInputs in = make_inputs(c, rng);
      EXPECT_TRUE(check_topk(c, in, run_topk(c, in))) << c.str();
    }
}

// The ep kernel this level gets must give the portable kernel's bits (ep_kernels.h fixes the numerics).
TEST(DispatchSmoke, EpKernelsMatchPortableOnes) {
  const auto* fast = static_cast<const cpu::EpKernels*>(cpu::choose_kernel(cpu::Slot::kEp, "dispatch smoke").table);
  const cpu::EpKernels& ref = *cpu::ep_kernels_scalar();
  ASSERT_NE(fast, nullptr);
  Rng rng(11);
  const int64_t n = 1000;  // seven 128-value blocks and a tail
  std::vector<double> unused;
  std::vector<uint16_t> x = random_bf16(rng, n, &unused), y = random_bf16(rng, n, &unused);

  std::vector<uint8_t> q1(static_cast<size_t>(n)), q2(static_cast<size_t>(n)), e1(8), e2(8);
  std::vector<float> s1(8), s2(8);
  fast->cast_e4m3(q1.data(), s1.data(), e1.data(), x.data(), n, 1);
  ref.cast_e4m3(q2.data(), s2.data(), e2.data(), x.data(), n, 1);
  EXPECT_EQ(q1, q2) << fast->name << " cast_e4m3";
  EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0) << fast->name << " cast_e4m3 scales";
  EXPECT_EQ(e1, e2) << fast->name << " cast_e4m3 exponents";

  const uint16_t* rows[] = {x.data(), y.data()};
  const float weights[] = {0.75f, -1.5f};
  std::vector<uint16_t> r1(static_cast<size_t>(n)), r2(static_cast<size_t>(n));
  fast->reduce_bf16(r1.data(), rows, 2, y.data(), nullptr, n, 1);
  fast->store_fence();
  ref.reduce_bf16(r2.data(), rows, 2, y.data(), nullptr, n, 0);
  EXPECT_EQ(r1, r2) << fast->name << " reduce_bf16";
  fast->weighted_reduce_bf16(r1.data(), rows, weights, 2, n);
  ref.weighted_reduce_bf16(r2.data(), rows, weights, 2, n);
  EXPECT_EQ(r1, r2) << fast->name << " weighted_reduce_bf16";

  std::vector<uint8_t> from(4099), to(4099, 0);
  for (size_t i = 0; i < from.size(); ++i) from[i] = uint8_t(i * 31);
  fast->copy(to.data() + 1, from.data() + 3, 4096, 1);  // unaligned ends around an aligned middle
  fast->store_fence();
  EXPECT_EQ(std::memcmp(to.data() + 1, from.data() + 3, 4096), 0) << fast->name << " copy";
}

// C[M, N] = A[M, K] . B[N, K]^T in bf16 through T.gemm: one row takes the GEMV kernel, 32 the tile one.
tl::Program tl_gemm_program(int block_m) {
  using namespace tessera::tl;
  constexpr int kBlockN = 32, kBlockK = 64;
  KernelBuilder kb("smoke_gemm_" + std::to_string(block_m));
  Expr m = kb.dynamic("M"), n = kb.dynamic("N"), k = kb.dynamic("K");
  Buffer a = kb.tensor("A", {m, k}, DataType::kBFloat16), b = kb.tensor("B", {n, k}, DataType::kBFloat16);
  Buffer c = kb.tensor("C", {m, n}, DataType::kFloat32);
  kb.kernel({ceildiv(n, kBlockN), ceildiv(m, block_m)}, 128, [&](const std::vector<Expr>& block) {
    Buffer a_tile = kb.alloc("a_tile", {block_m, kBlockK}, DataType::kBFloat16, Scope::kShared);
    Buffer b_tile = kb.alloc("b_tile", {kBlockN, kBlockK}, DataType::kBFloat16, Scope::kShared);
    Buffer acc = kb.alloc("acc", {block_m, kBlockN}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(acc));
    kb.pipelined(ceildiv(k, kBlockK), 2, [&](Expr step) {
      kb.copy(corner(a, {block[1] * block_m, step * kBlockK}), whole(a_tile));
      kb.copy(corner(b, {block[0] * kBlockN, step * kBlockK}), whole(b_tile));
      kb.gemm(whole(a_tile), whole(b_tile), whole(acc), false, true);
    });
    kb.copy(whole(acc), corner(c, {block[1] * block_m, block[0] * kBlockN}));
  });
  return kb.finish();
}

TEST(DispatchSmoke, TileLanguageGemmCompilesAndRuns) {
  tl::CompileOptions options;
  options.use_cache = false;  // compile for this process's level, never a cached kernel of another CPU
  Rng rng(12);
  const int64_t n = 64, k = 192;
  for (int64_t m : {1, 32}) {
    const tl::Kernel kernel = tl::compile(tl_gemm_program(int(m)), options);
    std::vector<double> a, b;
    std::vector<uint16_t> a_bits = random_bf16(rng, m * k, &a), b_bits = random_bf16(rng, n * k, &b);
    std::vector<float> c(size_t(m * n), -1.0f);
    kernel({TensorView(a_bits.data(), DType::kBF16, {m, k}), TensorView(b_bits.data(), DType::kBF16, {n, k}),
            TensorView(c.data(), DType::kF32, {m, n})});
    std::vector<double> got(c.begin(), c.end()), ref(size_t(m * n), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t kk = 0; kk < k; ++kk) ref[size_t(i * n + j)] += a[size_t(i * k + kk)] * b[size_t(j * k + kk)];
    EXPECT_TRUE(close_to("tl gemm m=" + std::to_string(m), got, ref, 1e-5));
  }
}

// The loop behind `tessera info`'s bf16 peak (AMX, vdpbf16ps or fp32 FMA by level): a short run.
TEST(DispatchSmoke, InfoBf16PeakLoopRuns) {
  const double gflops = measure_bf16_peak_gflops();
  EXPECT_TRUE(gflops > 0 && std::isfinite(gflops)) << gflops;
}

}  // namespace
}  // namespace tessera::test::smoke
