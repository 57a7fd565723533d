// Every SIMD finalize in the registry (D = round(C + tile)) against the same arithmetic done one value at a
// time: natural and transposed tiles, odd sizes, fp32/bf16 D, no C / fp32 C / bf16 C / C in place,
// streamed and not, NaN and rounding ties. Bits must match exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/registry.h"
#include "tessera/core/dtype.h"
#include "test_util.h"

namespace tessera {
namespace {

enum class CKind { kNone, kF32, kBf16, kInPlace };

struct Case {
  int64_t rows, cols;
  bool transposed, d_bf16, stream;
  CKind c;
};

float rand_value(std::mt19937& rng) {
  const uint32_t pick = rng() % 64;
  if (pick == 0) return std::nanf("");
  if (pick == 1) return -std::nanf("");
  if (pick == 2) return bf16_to_f32(0x3F81) + bf16_to_f32(0x3F81) * 0x1p-8f;  // a rounding tie for bf16
  return std::ldexp(float(int32_t(rng() % 2000001) - 1000000), -int(rng() % 30));
}

void check(cpu::FinalizeFn fn, const Case& k, std::mt19937& rng) {
  const int64_t ldt = (k.transposed ? k.rows : k.cols) + 3, ldd = k.cols + 5;
  const int64_t tile_rows = k.transposed ? k.cols : k.rows;
  std::vector<float> tile(size_t(tile_rows * ldt));
  for (float& v : tile) v = rand_value(rng);
  const size_t d_elems = size_t(k.rows * ldd) + 16;
  std::vector<float> c32(d_elems);
  std::vector<uint16_t> c16(d_elems);
  for (size_t i = 0; i < d_elems; ++i) {
    c32[i] = rand_value(rng);
    c16[i] = f32_to_bf16(rand_value(rng));
  }
  // D storage 64-byte aligned plus a 16-byte offset, so streamed rows start inside a line.
  std::vector<uint8_t> got_raw((d_elems + 32) * 4, 0xA5), want_raw = got_raw;
  uint8_t* got = got_raw.data() + (64 - reinterpret_cast<uintptr_t>(got_raw.data()) % 64) % 64 + 16;
  uint8_t* want = want_raw.data() + (got - got_raw.data());
  const int es = k.d_bf16 ? 2 : 4;
  if (k.c == CKind::kInPlace) {  // C is D's own contents
    for (int64_t i = 0; i < k.rows * ldd; ++i) {
      if (k.d_bf16) {
        std::memcpy(got + i * 2, &c16[size_t(i)], 2);
      } else {
        std::memcpy(got + i * 4, &c32[size_t(i)], 4);
      }
    }
    std::memcpy(want, got, size_t(k.rows * ldd * es));
  }
  cpu::FinalizeArgs a;
  a.tile = tile.data();
  a.ldt = ldt;
  a.transposed = k.transposed;
  a.d = got;
  a.d_bf16 = k.d_bf16;
  a.ldd = ldd;
  a.c = k.c == CKind::kNone      ? nullptr
        : k.c == CKind::kInPlace ? static_cast<const void*>(got)
        : k.c == CKind::kF32     ? static_cast<const void*>(c32.data())
                                 : static_cast<const void*>(c16.data());
  a.c_bf16 = k.c == CKind::kBf16 || (k.c == CKind::kInPlace && k.d_bf16);
  a.ldc = ldd;
  a.rows = k.rows;
  a.cols = k.cols;
  a.stream = k.stream;
  fn(a);
  for (int64_t i = 0; i < k.rows; ++i)
    for (int64_t j = 0; j < k.cols; ++j) {
      float c = 0.0f;
      if (k.c == CKind::kF32 || (k.c == CKind::kInPlace && !k.d_bf16)) c = c32[size_t(i * ldd + j)];
      if (k.c == CKind::kBf16 || (k.c == CKind::kInPlace && k.d_bf16)) c = bf16_to_f32(c16[size_t(i * ldd + j)]);
      const float t = k.transposed ? tile[size_t(j * ldt + i)] : tile[size_t(i * ldt + j)];
      const float v = c + t;
      if (std::isnan(c) && std::isnan(t)) {  // which NaN an addition keeps is up to the compiler
        const int64_t at = (i * ldd + j) * es;
        uint32_t bits = 0;
        std::memcpy(&bits, got + at, size_t(es));
        const bool nan = k.d_bf16 ? (bits & 0x7FFF) > 0x7F80 : (bits & 0x7FFFFFFF) > 0x7F800000;
        EXPECT_TRUE(nan) << "NaN + NaN gave no NaN at row " << i << " column " << j;
        std::memcpy(want + at, got + at, size_t(es));
        continue;
      }
      if (k.d_bf16) {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(want + (i * ldd + j) * 2, &h, 2);
      } else {
        std::memcpy(want + (i * ldd + j) * 4, &v, 4);
      }
    }
  for (size_t i = 0; i < got_raw.size(); ++i)
    if (got_raw[i] != want_raw[i]) {
      const int64_t at = int64_t(i) - (got - got_raw.data());
      ADD_FAILURE() << "first difference at D byte " << at << " (row " << at / es / ldd << ", column " << at / es % ldd
                    << "): " << int(got_raw[i]) << " vs " << int(want_raw[i]);
      break;
    }
  ASSERT_EQ(0, std::memcmp(got_raw.data(), want_raw.data(), got_raw.size()))
      << "rows " << k.rows << " cols " << k.cols << " transposed " << k.transposed << " bf16 D " << k.d_bf16
      << " stream " << k.stream << " c " << int(k.c);
}

TEST(GemmFinalizeKernels, EverySimdFinalizeMatchesTheScalarRule) {
  int tested = 0;
  for (Isa level : test::all_isas()) {
    if (level == Isa::kScalar || !test::isa_supported(level)) continue;
    const cpu::KernelChoice choice = cpu::choose_kernel_at(cpu::Slot::kGemmFinalize, level, "finalize test");
    ASSERT_NE(choice.impl, nullptr);
    ASSERT_NE(choice.table, nullptr) << "level " << isa_name(level) << " has no SIMD finalize";
    const auto fn = reinterpret_cast<cpu::FinalizeFn>(choice.table);
    SCOPED_TRACE(::testing::Message() << choice.impl->name << " at " << isa_name(level));
    std::mt19937 rng(11);
    for (int64_t rows : {1, 7, 16, 37})
      for (int64_t cols : {1, 9, 32, 45})
        for (bool transposed : {false, true})
          for (bool d_bf16 : {false, true})
            for (bool stream : {false, true})
              for (CKind c : {CKind::kNone, CKind::kF32, CKind::kBf16, CKind::kInPlace})
                check(fn, {rows, cols, transposed, d_bf16, stream, c}, rng);
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no SIMD level on this CPU";
}

}  // namespace
}  // namespace tessera
