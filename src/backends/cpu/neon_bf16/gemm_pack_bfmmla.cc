// Packing for the neon_bf16 kernel set (BFMMLA, gemm_ukr_bfmmla.cc) and the set itself.
//
// BFMMLA multiplies a 2 x 4 bf16 block (one q register: row 0's four K values, then row 1's) by a
// 4 x 2 block (column 0's four K values, then column 1's) into a 2 x 2 fp32 tile. Both operands are
// therefore packed as "quads": two rows (a-side) or two columns (b-side) of four consecutive K values,
// 8 bf16 = 16 bytes each, K padded with zeros to a multiple of 4 (k_align).
//   a-panel block (prepare_a, always a copy): rows 2i and 2i+1 occupy 2*kc values from buf + 2i*kc,
//     quad q (K values 4q..4q+3) at offset 8q; lda = kc, so the driver's `block + ir * lda` (ir even)
//     is the pair's start. An odd last row has no partner: its kc values are stored plainly (K
//     contiguous) at its pair's start, so the block never needs more than rows * kc values.
//   b-panel (pack_b): panel of nr columns, quad q of column pair j at panel[q*4*nr + 8j].
// bf16 is copied; e4m3 is converted exactly (every e4m3 value is a bf16 value) through a 256-entry
// table. Other source types are refused (accepts): fp32 runs on the neon fp32 set.
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/neon_bf16/e4m3_bf16.h"

namespace tessera::cpu {
namespace {

// Four bf16 values (r, k..k+3) of a source row, zeros at or beyond k_total and for rows that do not
// exist (valid == false).
struct QuadReader {
  const GemmSrc& s;
  const uint16_t* e4m3;  // table bits, or nullptr for bf16 sources
  int64_t k_total;

  void read(int64_t r, int64_t k, bool valid, uint16_t out[4]) const {
    if (!valid || k >= k_total) {
      memset(out, 0, 8);
      return;
    }
    const int64_t n = k_total - k < 4 ? k_total - k : 4;
    if (s.stride_k == 1 && n == 4) {  // K-contiguous and whole: one 8- or 4-byte read
      if (!e4m3) {
        memcpy(out, static_cast<const uint16_t*>(s.data) + r * s.stride_r + k, 8);
      } else {
        const uint8_t* b = static_cast<const uint8_t*>(s.data) + r * s.stride_r + k;
        for (int i = 0; i < 4; ++i) out[i] = e4m3[b[i]];
      }
      return;
    }
    for (int i = 0; i < 4; ++i) {
      if (i >= n) {
        out[i] = 0;
        continue;
      }
      const int64_t off = r * s.stride_r + (k + i) * s.stride_k;
      out[i] = e4m3 ? e4m3[static_cast<const uint8_t*>(s.data)[off]] : static_cast<const uint16_t*>(s.data)[off];
    }
  }
};

QuadReader reader(const GemmSrc& s, int64_t k_total) {
  return {s, s.type == GemmSrcType::kE4M3 ? code_bits().bits : nullptr, k_total};
}

const void* prepare_a(const GemmSrc& s, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                      int64_t* lda) {
  const QuadReader rd = reader(s, k_total);
  uint16_t* out = static_cast<uint16_t*>(buf);
  *lda = kc;
  for (int i = 0; i + 1 < rows; i += 2) {
    uint16_t* pair = out + int64_t(i) * kc;
    for (int q = 0; q < kc / 4; ++q) {
      rd.read(r0 + i, k0 + 4 * q, true, pair + 8 * q);
      rd.read(r0 + i + 1, k0 + 4 * q, true, pair + 8 * q + 4);
    }
  }
  if (rows % 2) {  // the lone last row, K contiguous
    uint16_t* row = out + int64_t(rows - 1) * kc;
    for (int q = 0; q < kc / 4; ++q) rd.read(r0 + rows - 1, k0 + 4 * q, true, row + 4 * q);
  }
  return out;
}

void pack_b(const GemmSrc& s, int64_t r0, int rows, int64_t r_total, int64_t k0, int kc, int64_t k_total, int nr,
            void* dst) {
  const QuadReader rd = reader(s, k_total);
  const int64_t r_end = r0 + rows < r_total ? r0 + rows : r_total;
  const int panels = (rows + nr - 1) / nr;
  for (int p = 0; p < panels; ++p) {
    uint16_t* panel = static_cast<uint16_t*>(dst) + int64_t(p) * kc * nr;
    for (int j = 0; j < nr / 2; ++j) {
      const int64_t c0 = r0 + int64_t(p) * nr + 2 * j;
      for (int q = 0; q < kc / 4; ++q) {
        uint16_t* quad = panel + int64_t(q) * 4 * nr + 8 * j;
        rd.read(c0, k0 + 4 * q, c0 < r_end, quad);
        rd.read(c0 + 1, k0 + 4 * q, c0 + 1 < r_end, quad + 4);
      }
    }
  }
}

bool accepts(GemmSrcType t) {
  return t == GemmSrcType::kBF16 || t == GemmSrcType::kE4M3;
}

}  // namespace

void gemm_ukr_neon_bf16_8x12(const UkrArgs& p);

const GemmKernelSet* gemm_kernels_neon_bf16() {
  // kc = 512: a 512 x 12 b-panel (12 KiB) and an 8-row a-panel (8 KiB) stay inside a 64 KiB L1
  // (Neoverse V1/V2); not tuned on hardware (only emulated so far).
  static const GemmKernelSet set = {
      "neon_bf16",
      /*k_align=*/4,
      /*elem_bytes=*/2,
      /*kc=*/512,
      {{8, 12, gemm_ukr_neon_bf16_8x12, 0.0f}},
      /*num_tiles=*/1,
      accepts,
      prepare_a,
      pack_b,
      /*n_step=*/0,
      /*tail_dot=*/nullptr,
      /*tail_dot_cols=*/0,
      /*fuses_e4m3_convert=*/false,
      /*kc_scaled=*/0,
      /*copies_a=*/true,  // quads of row pairs: every a-panel is a copy, bf16 included
  };
  return &set;
}

}  // namespace tessera::cpu
