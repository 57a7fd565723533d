// Pieces of the AMX MLA kernel set (mla_kernels_amx.cc), one file each, private to this folder.
// Shapes: mp = query rows rounded up to 16, ntp = tokens rounded up to 32; every tile is 16 rows x 64
// bytes (the folder's full configuration, set by the caller).
#pragma once

#include <stdint.h>

namespace tessera::cpu {

// q [m][d_qk] bf16 -> 1 KiB b-tiles in tile order (see mla_scores_amx.cc); mp * d_qk * 2 bytes, 64-aligned.
void mla_pack_q_amx(const void* q, int m, int d_qk, void* packed);

// s[t * mp + c] = k_t . q_c for t < ntp, c < mp (rows t >= nt score 0), q from mla_pack_q_amx.
// A 16-token group whose rows are evenly spaced is read in place; any other group (and the zero padding)
// is copied to k_stage ([ntp][d_qk] bf16).
void mla_scores_amx(const void* const* k_rows, int nt, const void* q_packed, int mp, int d_qk, float* s,
                    uint16_t* k_stage);

// o[r][:] = o[r][:] * alpha[r] + sum_t p[t][r] * v_t for r < m (fresh: o[r][:] = sum_t p[t][r] * v_t, o's
// old contents ignored), columns in the avx512bf16 set's order and
// the rows of full 16-row tiles in tile order (see mla_pv_amx.cc; mla_o_to_natural_amx undoes both).
// p_pairs: [ceil(nt/2)][mp][2] bf16 (the softmax's output). Scratch: p_tiles mp * ntp bf16, v_pairs
// d_v / 16 * mla_v_pairs_ct_stride(nt) bf16, c_tmp 1024 floats. progress (may be null) runs as
// (ctx, i, n), i = 0..n-1 in order.
void mla_pv_amx(const void* const* v_rows, int nt, const uint16_t* p_pairs, const float* alpha, int m, int mp, int d_v,
                bool fresh, float* o, uint16_t* p_tiles, uint16_t* v_pairs, float* c_tmp,
                void (*progress)(void*, int, int), void* progress_ctx);

void mla_o_to_natural_amx(float* o, int m, int d_v);

// Values between column tiles of mla_pv_amx's V pairs for a tile of nt tokens (its v_pairs scratch holds
// d_v / 16 of them).
int64_t mla_v_pairs_ct_stride(int nt);

}  // namespace tessera::cpu
