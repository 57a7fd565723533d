// The AMX MLA kernel set: the avx512bf16 set's numerics (bf16 K rows, queries and p; fp32 accumulation)
// with both products on tiles. One attend_tile = scores S^T = K . Q^T (mla_scores_amx.cc) -> the
// avx512bf16 online softmax, unchanged -> p.v with the rescale (mla_pv_amx.cc). Query packing, FP8
// dequantisation is the avx512bf16 set's; queries are packed in tile order and o is kept in tile order.
//
// Tiles of 256 tokens: the o rescale (m * d_v multiply-adds per tile of tokens) and the per-tile
// rearrangements of p and V are then small next to the products, and the scores (128 KiB at 128 rows)
// stay in L2.
//
// Scratch (64-byte aligned pieces): s [256][mp] fp32 | p pairs [128][mp][2] bf16 | alpha [mp] |
// p a-tiles [mp][256] bf16 | V b-tiles [256][d_v] bf16 | staged K rows [256][d_qk] bf16 | c_tmp 4 KiB.
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/amx/mla_amx.h"
#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/mla_kernel_set.h"

namespace tessera::cpu {
namespace {

constexpr int kTileTokens = 256;

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
  uint16_t* p_tiles;
  uint16_t* v_pairs;
  uint16_t* k_stage;
  float* c_tmp;
  size_t bytes;
};

Scratch carve(void* base, int m, int d_qk, int d_v) {
  const size_t mp = size_t(round16(m)), nt = kTileTokens;
  char* p = static_cast<char*>(base);
  Scratch sc;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* at = p + off;
    off += align64(bytes);
    return at;
  };
  sc.s = reinterpret_cast<float*>(take(nt * mp * 4));
  sc.p_pairs = reinterpret_cast<uint16_t*>(take(nt * mp * 2));
  sc.alpha = reinterpret_cast<float*>(take(mp * 4));
  sc.p_tiles = reinterpret_cast<uint16_t*>(take(nt * mp * 2));
  sc.v_pairs = reinterpret_cast<uint16_t*>(take(size_t(d_v / 16) * size_t(mla_v_pairs_ct_stride(int(nt))) * 2));
  sc.k_stage = reinterpret_cast<uint16_t*>(take(nt * size_t(d_qk) * 2));
  sc.c_tmp = reinterpret_cast<float*>(take(4 * 256 * 4));
  sc.bytes = off;
  return sc;
}

size_t q_packed_bytes(int m, int d_qk) {
  return size_t(round16(m)) * size_t(d_qk) * 2;
}
size_t scratch_bytes(int m, int d_qk, int d_v) {
  return carve(nullptr, m, d_qk, d_v).bytes;
}

void attend_tile(const MlaTileArgs& a) {
  const Scratch sc = carve(a.scratch, a.m, a.d_qk, a.d_v);
  const int mp = round16(a.m);
  amx::use_tile_config(amx::full_tile_config());  // every tile 16 x 64 bytes
  mla_scores_amx(a.k_rows, a.nt, a.q_packed, mp, a.d_qk, sc.s, sc.k_stage);
  mla_softmax_avx512bf16(sc.s, a.nt, a.m, mp, a.scale, a.visible, a.row_max, a.row_sum, sc.alpha, sc.p_pairs);
  mla_pv_amx(a.v_rows ? a.v_rows : a.k_rows, a.nt, sc.p_pairs, sc.alpha, a.m, mp, a.d_v, a.o_fresh, a.o, sc.p_tiles,
             sc.v_pairs, sc.c_tmp, a.progress, a.progress_ctx);
}

const MlaKernelSet kSet = {
    "amx",
    MlaElem::kBF16,
    kTileTokens,
    32,
    32,
    q_packed_bytes,
    mla_pack_q_amx,
    scratch_bytes,
    attend_tile,
    mla_o_to_natural_amx,
    mla_dequant_v32_avx512bf16,
    mla_dequant_model1_avx512bf16,
    nullptr,
    true,
};

}  // namespace

const MlaKernelSet* mla_kernels_amx() {
  return &kSet;
}

}  // namespace tessera::cpu
