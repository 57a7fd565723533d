// The avx512bf16 MLA kernel set: bf16 K rows and queries, fp32 accumulation with vdpbf16ps.
// One attend_tile = scores (mla_scores_bf16.cc) -> online softmax (mla_softmax_bf16.cc) -> p.v with the
// rescale folded in (mla_pv_bf16.cc). Tiles hold up to 96 tokens: divisible by every scores register tile
// (6, 8, 12 tokens), so a partial tile is padded with a zero row instead of needing edge kernels.
//
// Scratch layout (64-byte aligned pieces): s [96][mp] fp32 | p pairs [48][mp][2] bf16 | alpha [mp] fp32 |
// v pairs of one 64-column block [48][64][2] bf16 | 96 row pointers | one zero row of d_qk bf16.
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/mla_kernel_set.h"

namespace tessera::cpu {
namespace {

constexpr int kTileTokens = 96;

size_t align64(size_t x) {
  return (x + 63) & ~size_t(63);
}
int round16(int m) {
  return (m + 15) & ~15;
}

struct Scratch {
  float* s;
  uint16_t* p_pairs;
  float* alpha;
  uint16_t* v_pack;
  const void** rows;
  uint16_t* zero_row;
  size_t bytes;
};

Scratch carve(void* base, int m, int d_qk, int d_v) {
  const int mp = round16(m);
  char* p = static_cast<char*>(base);
  Scratch sc;
  size_t off = 0;
  sc.s = reinterpret_cast<float*>(p + off);
  off += align64(size_t(kTileTokens) * mp * 4);
  sc.p_pairs = reinterpret_cast<uint16_t*>(p + off);
  off += align64(size_t(kTileTokens / 2) * mp * 4);
  sc.alpha = reinterpret_cast<float*>(p + off);
  off += align64(size_t(mp) * 4);
  sc.v_pack = reinterpret_cast<uint16_t*>(p + off);
  off += align64(size_t(kTileTokens / 2) * 64 * 4);
  sc.rows = reinterpret_cast<const void**>(p + off);
  off += align64(kTileTokens * sizeof(void*));
  sc.zero_row = reinterpret_cast<uint16_t*>(p + off);
  off += align64(size_t(d_qk) * 2);
  sc.bytes = off;
  return sc;
}

size_t q_packed_bytes(int m, int d_qk) {
  return size_t(round16(m)) * size_t(d_qk) * 2;
}

// q [m][d_qk] -> [d_qk/2][mp][2]: element (row c, k) at (k/2)*mp*2 + c*2 + k%2; rows >= m are zero.
// One dword gather collects a K-pair from 16 rows.
void pack_q(const void* q, int m, int d_qk, void* packed) {
  const int mp = round16(m), kpairs = d_qk / 2;
  const __m512i row_offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                 _mm512_set1_epi32(kpairs));
  uint32_t* dst = static_cast<uint32_t*>(packed);
  for (int c = 0; c < mp; c += 16) {
    const __mmask16 rows = m - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (m > c ? m - c : 0)) - 1);
    const int* src = static_cast<const int*>(q) + int64_t(c) * kpairs;
    for (int kp = 0; kp < kpairs; ++kp) {
      const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), rows, row_offsets, src + kp, 4);
      _mm512_storeu_si512(dst + int64_t(kp) * mp + c, v);
    }
  }
}

size_t scratch_bytes(int m, int d_qk, int d_v) {
  return carve(nullptr, m, d_qk, d_v).bytes;
}

void attend_tile(const MlaTileArgs& a) {
  const Scratch sc = carve(a.scratch, a.m, a.d_qk, a.d_v);
  const int mp = round16(a.m);
  memset(sc.zero_row, 0, size_t(a.d_qk) * 2);
  for (int t = 0; t < kTileTokens; ++t) sc.rows[t] = t < a.nt ? a.k_rows[t] : sc.zero_row;
  mla_scores_avx512bf16(sc.rows, a.nt, a.q_packed, mp, a.d_qk, sc.s, mp);
  mla_softmax_avx512bf16(sc.s, a.nt, a.m, mp, a.scale, a.visible, a.row_max, a.row_sum, sc.alpha, sc.p_pairs);
  mla_pv_avx512bf16(a.v_rows ? a.v_rows : sc.rows, a.nt, sc.p_pairs, sc.alpha, a.m, mp, a.d_v, a.o, sc.v_pack,
                    a.progress, a.progress_ctx);
}

const MlaKernelSet kSet = {
    "avx512bf16",
    MlaElem::kBF16,
    kTileTokens,
    2,
    32,
    q_packed_bytes,
    pack_q,
    scratch_bytes,
    attend_tile,
    mla_o_to_natural_avx512bf16,
    mla_dequant_v32_avx512bf16,
    mla_dequant_model1_avx512bf16,
    nullptr,
    false,
};

}  // namespace

const MlaKernelSet* mla_kernels_avx512bf16() {
  return &kSet;
}

}  // namespace tessera::cpu
