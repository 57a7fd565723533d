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

// Rows [r0, r1) of the e4m3 copy. The packed bytes of a row (along K) or of a row pair (along rows) are
// contiguous when stride_k == 1, the layouts DeepGEMM's FP4 operands have: one lookup per packed byte
// gives both codes (element by element, with the nibble arithmetic per element, the copy took more of
// a Mega MoE step on AVX2 than its micro-kernel did).
void widen_rows(const cpu::GemmSrc& s, int64_t r0, int64_t r1, int64_t k, uint8_t* out) {
  const auto* bytes = static_cast<const uint8_t*>(s.data);
  if (s.stride_k == 1 && !s.fp4_along_r) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = bytes + r * s.stride_r;
      uint8_t* dst = out + r * k;
      for (int64_t j = 0; j < k / 2; ++j) std::memcpy(dst + 2 * j, kCodePairs.pair[src[j]], 2);
      if (k & 1) dst[k - 1] = kE2m1ToE4m3[src[k / 2] & 0xF];
    }
    return;
  }
  if (s.stride_k == 1) {  // packed along rows: byte (r / 2, j) holds rows r & ~1 (low) and r | 1 (high)
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = bytes + (r / 2) * s.stride_r;
      const int side = int(r & 1);
      uint8_t* dst = out + r * k;
      for (int64_t j = 0; j < k; ++j) dst[j] = kCodePairs.pair[src[j]][side];
    }
    return;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t v =
          s.fp4_along_r ? bytes[(r / 2) * s.stride_r + j * s.stride_k] : bytes[r * s.stride_r + (j / 2) * s.stride_k];
      const bool high = s.fp4_along_r ? (r & 1) : (j & 1);
      out[r * k + j] = kE2m1ToE4m3[high ? v >> 4 : v & 0xF];
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
