// FP4 -> e4m3 operand widening (fp4_widen.h). Without it, an ISA whose packed kernels take e4m3 but not
// e2m1 (AVX2) ran FP4-weight GEMMs on the scalar reference, far slower than the same problem in e4m3.
// The copy costs one pass over the FP4 operand.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include "gemm/fp4_widen.h"

#include <cstring>

#include "backends/cpu/gemm_kernel_set.h"
#include "tessera/core/thread_pool.h"

namespace tessera::gemm {
namespace {

// e4m3fn bytes of the 16 e2m1 codes (sign, 2 exponent bits, 1 mantissa bit; bias 1): 0, .5, 1, 1.5, 2,
// 3, 4, 6 and their negatives (code 8 is -0).
constexpr uint8_t kE2m1ToE4m3[16] = {0x00, 0x30, 0x38, 0x3C, 0x40, 0x44, 0x48, 0x4C,
                                     0x80, 0xB0, 0xB8, 0xBC, 0xC0, 0xC4, 0xC8, 0xCC};

// The e4m3 bytes of both codes of a packed byte, low nibble first.
struct CodePairs {
  uint8_t pair[256][2];
};
constexpr CodePairs make_code_pairs() {
  CodePairs t{};
  for (int b = 0; b < 256; ++b) {
    t.pair[b][0] = kE2m1ToE4m3[b & 0xF];
    t.pair[b][1] = kE2m1ToE4m3[b >> 4];
  }
  return t;
}
constexpr CodePairs kCodePairs = make_code_pairs();

// Rows [r0, r1) of the e4m3 copy, one table lookup per packed byte (element by element, with the
// nibble arithmetic per value, the copy took more of a Mega MoE step on AVX2 than its micro-kernel did).
// Packed along K a row's bytes are contiguous (operands.cc takes that layout only when stride_k == 1,
// and K is twice the bytes); packed along rows, byte (r / 2, j) holds row r & ~1 in its low nibble and
// r | 1 in its high one, at any stride_k.
void widen_rows(const cpu::GemmSrc& s, int64_t r0, int64_t r1, int64_t k, uint8_t* out) {
  const auto* bytes = static_cast<const uint8_t*>(s.data);
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* dst = out + r * k;
    if (!s.fp4_along_r) {
      const uint8_t* src = bytes + r * s.stride_r;
      for (int64_t j = 0; j < k / 2; ++j) std::memcpy(dst + 2 * j, kCodePairs.pair[src[j]], 2);
    } else {
      const uint8_t* src = bytes + (r / 2) * s.stride_r;
      const int side = int(r & 1);
      for (int64_t j = 0; j < k; ++j) dst[j] = kCodePairs.pair[src[j * s.stride_k]][side];
    }
  }
}

cpu::GemmSrc widen(const cpu::GemmSrc& s, int64_t rows, int64_t k, std::vector<std::vector<uint8_t>>* storage) {
  storage->emplace_back(size_t(rows * k));
  uint8_t* out = storage->back().data();
  parallel_for(rows, [&](int64_t r0, int64_t r1) { widen_rows(s, r0, r1, k, out); });
  cpu::GemmSrc w = s;
  w.data = out;
  w.type = cpu::GemmSrcType::kE4M3;
  w.stride_r = k;
  w.stride_k = 1;
  w.fp4_along_r = false;
  return w;
}

}  // namespace

GemmProblem widen_fp4_operands(const GemmProblem& p, std::vector<std::vector<uint8_t>>* storage) {
  GemmProblem q = p;
  if (p.a.type == cpu::GemmSrcType::kE2M1) q.a = widen(p.a, p.m, p.k, storage);
  if (p.b.type == cpu::GemmSrcType::kE2M1) q.b = widen(p.b, p.n, p.k, storage);
  return q;
}

}  // namespace tessera::gemm
