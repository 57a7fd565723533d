// The model's small element-wise and row-wise operations (docs/model.md "Numerics"), plain C++ loops.
// Row-parallel ones split rows over tessera's thread pool; every output element is computed by one
// thread in a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/model.h"

namespace tessera::model {

// fn(r0, r1) over rows [0, rows) split over the pool, or on this thread alone when rows * work_per_row
// (values touched) is below 16384: tiny problems cost more to hand out than to run.
void for_rows(int64_t rows, int64_t work_per_row, const std::function<void(int64_t, int64_t)>& fn);

// y = x * rsqrt(mean(x^2) + 1e-6) * w, rows of n (y may be x).
void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float* y);
// The same over the first n values of rows ld apart (x and y alike).
void rms_norm_strided(const float* x, int64_t ld, const float* w, int64_t rows, int64_t n, float* y);
// y = (x - mean) * rsqrt(var + 1e-6) * w + b, rows of n (y may be x).
void layer_norm(const float* x, const float* w, const float* b, int64_t rows, int64_t n, float* y);

// YaRN rotary tables (DeepSeek's precompute_freqs_cis) for positions [0, positions): cos/sin [pos, rope_dim/2].
struct RopeTable {
  int64_t half = 0;
  std::vector<float> cos, sin;
};
RopeTable make_rope_table(const Config& c, int64_t positions);
// Rotates x[0 .. 2*half) at position pos: pairs (2i, 2i+1) (MLA) or (i, i+half) (indexer).
void rope_interleaved(float* x, const RopeTable& t, int64_t pos);
void rope_halves(float* x, const RopeTable& t, int64_t pos);

// x <- (H / sqrt(128)) x with H the 128-point Sylvester Hadamard matrix.
void hadamard128(float* x);

// q8: each consecutive 128 values of a row -> e4m3 codes and one f32 scale (amax / 448, or its power of
// two rounded up with ue8m0; 1 for an all-zero block). k % 128 == 0.
void q8_row(const float* x, int64_t k, bool ue8m0, uint8_t* codes, float* scales);
void q8_rows(const float* x, int64_t rows, int64_t k, bool ue8m0, uint8_t* codes, float* scales);
float q8_scale(float amax, bool ue8m0);

// out[r, j] = sum_i bf16(x[r, i]) * w[j, i], accumulated in f32 on the bf16 GEMM; w bf16 [n, k] (the
// head, the MoE gate, the indexer's weights_proj).
void matmul_bf16_f32(const float* x, int64_t rows, const uint16_t* w, int64_t n, int64_t k, float* out);

// y[i] = f32_to_bf16(x[i]), n values (the ep slot's round_bf16: the same bits at every ISA level).
void f32_to_bf16_row(const float* x, int64_t n, uint16_t* y);

// out[i] = silu(g[i]) * u[i].
void silu_mul(const float* g, const float* u, int64_t n, float* out);

// Rows of a bf16 table [vocab, dim] as f32; errors name a token outside [0, vocab).
void embed_tokens(const uint16_t* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t n, float* out);

}  // namespace tessera::model
