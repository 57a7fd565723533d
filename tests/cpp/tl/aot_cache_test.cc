// The kernel cache (memory, then disk) and the AOT path: a library written by compile_to_library is
// loaded and called by this C++ program through Kernel::load, with no Python involved.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tessera/tl/expr_ops.h"
#include "tl_test_util.h"

namespace tessera::test {
namespace {

using namespace tessera::tl;

Program saxpy(float alpha) {
  KernelBuilder kb("saxpy");
  Expr n = kb.dynamic("N");
  Buffer x = kb.tensor("X", {n}, DataType::kFloat32), y = kb.tensor("Y", {n}, DataType::kFloat32);
  Expr s = kb.scalar("scale", DataType::kFloat32);
  kb.kernel({ceildiv(n, 64)}, 128, [&](const std::vector<Expr>& b) {
    kb.parallel({lift(64)}, [&](const std::vector<Expr>& i) {
      Expr idx = b[0] * 64 + i[0];
      kb.store(y, {idx}, kb.load(y, {idx}) + kb.load(x, {idx}) * s * alpha);
    });
  });
  return kb.finish();
}

std::string fresh_dir(const std::string& tag) {
  const std::string dir = std::string(TESSERA_TL_TEST_CACHE) + "/" + tag + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(TlCache, MemoryThenDisk) {
  CompileOptions o;
  o.cache_dir = fresh_dir("cache");
  const Kernel cold = compile(saxpy(1.25f), o);
  EXPECT_FALSE(cold.stats().disk_cache_hit);
  EXPECT_FALSE(cold.stats().memory_cache_hit);
  EXPECT_GT(cold.stats().compile_ms, 0.0);
  const Kernel mem = compile(saxpy(1.25f), o);
  EXPECT_TRUE(mem.stats().memory_cache_hit);
  o.memory_cache = false;
  const Kernel disk = compile(saxpy(1.25f), o);
  EXPECT_TRUE(disk.stats().disk_cache_hit);
  EXPECT_EQ(disk.library_path(), cold.library_path());
  const Kernel other = compile(saxpy(2.0f), o);  // a different program: a different library
  EXPECT_NE(other.library_path(), cold.library_path());
  o.extra_flags = {"-fno-unroll-loops"};  // different flags: a different key
  EXPECT_NE(compile(saxpy(1.25f), o).library_path(), cold.library_path());
  std::filesystem::remove_all(o.cache_dir);
}

TEST(TlAot, LibraryLoadsAndRunsWithoutThePythonFrontend) {
  const std::string dir = fresh_dir("aot");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/libsaxpy.so";
  compile_to_library(saxpy(0.5f), path, tl_options());
  const Kernel k = Kernel::load(path);
  EXPECT_EQ(k.name(), "saxpy");
  EXPECT_EQ(k.param_names(), (std::vector<std::string>{"X", "Y", "scale"}));
  EXPECT_TRUE(k.source().empty());
  for (int64_t n : {1, 63, 64, 1000}) {
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i), y[size_t(i)] = 1.0f;
    k({TensorView(x.data(), DType::kF32, {n}), TensorView(y.data(), DType::kF32, {n}), 4.0});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[size_t(i)], 1.0f + float(i) * 4.0f * 0.5f) << "n=" << n << " i=" << i;
  }
  EXPECT_TRUE(
      throws_error([&] { Kernel::load(dir + "/missing.so"); }, ErrorCode::kRuntime, {"cannot load", "missing.so"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::test
