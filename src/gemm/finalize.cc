// D = round(C + acc): the one rounding of every GEMM path.
#include <algorithm>
#include <array>
#include <cstring>

#include "backends/cpu/registry.h"
#include "gemm/gemm_problem.h"
#include "tessera/core/cpu.h"

namespace tessera::gemm {
namespace {

inline float load_c(const GemmProblem& p, int64_t r, int64_t c) {
  if (!p.c) return 0.0f;
  if (p.c_type == DType::kF32) return static_cast<const float*>(p.c)[r * p.ldc + c];
  return bf16_to_f32(static_cast<const uint16_t*>(p.c)[r * p.ldc + c]);
}

template <bool kTransposed>
void finalize_impl(const GemmProblem& p, const float* tile, int64_t ldt, int64_t r0, int64_t rows, int64_t c0,
                   int64_t cols) {
  // Transposed tiles are walked in 16 x 16 blocks so both the tile and D are read along cache lines.
  constexpr int64_t kB = kTransposed ? 16 : 1 << 30;
  for (int64_t ib = 0; ib < rows; ib += kB)
    for (int64_t jb = 0; jb < cols; jb += kB) {
      const int64_t ie = std::min(rows, ib + kB), je = std::min(cols, jb + kB);
      for (int64_t i = ib; i < ie; ++i) {
        const int64_t r = r0 + i;
        if (p.d_type == DType::kF32) {
          float* d = static_cast<float*>(p.d) + r * p.ldd + c0;
          for (int64_t j = jb; j < je; ++j)
            d[j] = load_c(p, r, c0 + j) + (kTransposed ? tile[j * ldt + i] : tile[i * ldt + j]);
        } else {
          uint16_t* d = static_cast<uint16_t*>(p.d) + r * p.ldd + c0;
          for (int64_t j = jb; j < je; ++j)
            d[j] = f32_to_bf16(load_c(p, r, c0 + j) + (kTransposed ? tile[j * ldt + i] : tile[i * ldt + j]));
        }
      }
    }
}

// The SIMD finalize the registry gives the active level (nullptr: the portable loops above).
cpu::FinalizeFn finalize_kernel() {
  return reinterpret_cast<cpu::FinalizeFn>(cpu::cached_kernel(cpu::Slot::kGemmFinalize, "gemm finalize"));
}

}  // namespace

void finalize_tile(const GemmProblem& p, const float* tile, int64_t ldt, bool transposed, int64_t r0, int64_t rows,
                   int64_t c0, int64_t cols) {
  if (const cpu::FinalizeFn simd = finalize_kernel()) {
    const int64_t es = dtype_storage_bytes(p.d_type), ces = p.c ? dtype_storage_bytes(p.c_type) : 0;
    cpu::FinalizeArgs a;
    a.tile = tile;
    a.ldt = ldt;
    a.transposed = transposed;
    a.d = static_cast<char*>(p.d) + (r0 * p.ldd + c0) * es;
    a.d_bf16 = p.d_type == DType::kBF16;
    a.ldd = p.ldd;
    a.c = p.c ? static_cast<const char*>(p.c) + (r0 * p.ldc + c0) * ces : nullptr;
    a.c_bf16 = p.c_type == DType::kBF16;
    a.ldc = p.ldc;
    a.rows = rows;
    a.cols = cols;
    a.stream = p.stream_d;
    return simd(a);
  }
  if (transposed) {
    finalize_impl<true>(p, tile, ldt, r0, rows, c0, cols);
  } else {
    finalize_impl<false>(p, tile, ldt, r0, rows, c0, cols);
  }
}

void expand_scales(const ScaleTable& t, int64_t g0, int64_t ng, int64_t r0, int64_t nr, float* out,
                   int64_t out_stride) {
  for (int64_t g = 0; g < ng; ++g) {
    float* o = out + g * out_stride;
    if (t.data && t.r_div == 1) {
      const float* src = t.data + ((g0 + g) / t.g_div) * t.stride_g;
      std::copy(src + r0, src + r0 + nr, o);
    } else if (t.ue8m0 && t.r_div == 1) {
      // Packed UE8M0 scales, one per row (per-32 MX weights): walked down the group's byte column. The
      // lookup per row (two divisions) was 29% of a Mega MoE prefill call; a table of the 256 values
      // halves the conversion's instructions again (6% -> 3% of that call).
      static const std::array<float, 256> kValues = [] {
        std::array<float, 256> v{};
        for (int e = 0; e < 256; ++e) v[size_t(e)] = ue8m0_to_f32(uint8_t(e));
        return v;
      }();
      const int64_t kb = (g0 + g) / t.g_div;
      const uint8_t* col = t.ue8m0 + (kb / 4) * t.word_bytes + kb % 4 + r0 * t.row_bytes;
      for (int64_t r = 0; r < nr; ++r) o[r] = kValues[col[r * t.row_bytes]];
    } else {
      // One lookup per run of r_div rows sharing a scale: a lookup (two divisions) per row was 2% of an
      // fp8 GEMM's time with (128,128) weight scales (M=128, N=576, K=7168).
      for (int64_t r = 0; r < nr;) {
        const int64_t run_end = std::min(nr, ((r0 + r) / t.r_div + 1) * t.r_div - r0);
        std::fill(o + r, o + run_end, t.at(g0 + g, r0 + r));
        r = run_end;
      }
    }
    std::fill(o + nr, o + out_stride, 0.0f);
  }
}

int64_t scale_groups(const GemmProblem& p) {
  if (p.group <= 0) return 1;
  return (p.k + p.group - 1) / p.group;
}

bool scales_are_powers_of_two(const ScaleTable& t, int64_t rows, int64_t groups, int lo, int hi) {
  if (!t.ue8m0 && !t.data) return false;  // no table (a plan asked about a problem without data)
  const int64_t table_rows = (rows + t.r_div - 1) / t.r_div, table_groups = (groups + t.g_div - 1) / t.g_div;
  if (t.ue8m0) {  // every entry is a power of two (0xFF is NaN): only the exponent range is checked
    const int byte_lo = 127 + lo, byte_hi = 127 + hi;
    for (int64_t r = 0; r < table_rows; ++r) {
      const uint8_t* row = t.ue8m0 + r * t.row_bytes;
      bool ok = true;
      if (t.word_bytes == 4) {  // a row's bytes are contiguous: blocks of 16 the compiler vectorises
        const uint8_t range = uint8_t(byte_hi - byte_lo);
        int64_t kb = 0;
        for (; kb + 16 <= table_groups && ok; kb += 16) {
          uint8_t bad = 0;
          for (int i = 0; i < 16; ++i) bad |= uint8_t(uint8_t(row[kb + i] - byte_lo) > range);
          ok = bad == 0;
        }
        for (; kb < table_groups; ++kb) ok &= uint8_t(row[kb] - byte_lo) <= range;
      } else {
        for (int64_t kb = 0; kb < table_groups; ++kb) {
          const int e = row[(kb / 4) * t.word_bytes + kb % 4];
          ok &= e >= byte_lo && e <= byte_hi;
        }
      }
      if (!ok) return false;
    }
    return true;
  }
  for (int64_t kb = 0; kb < table_groups; ++kb) {
    const float* col = t.data + kb * t.stride_g;
    bool ok = true;
    for (int64_t r = 0; r < table_rows; ++r) {
      uint32_t u;
      std::memcpy(&u, col + r, 4);
      const int e = int(u >> 23) - 127;  // sign bit set: e is out of range
      ok &= (u & 0x7FFFFFu) == 0 && e >= lo && e <= hi;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace tessera::gemm
