// tessera/gemm.h - DeepGEMM's dense GEMMs on the CPU.
//
// Every function computes D = C + A.B in place into d (DeepGEMM semantics, DeepGEMM's API, docs/gemm.md):
//  - suffix nt/nn/tn/tt: first letter A ('n': [M,K], 't': [K,M]), second letter B ('t': [N,K],
//    'n': [K,N]); every variant is the nt GEMM on transposed views, scale factors transposed with their data;
//  - each operand may be K-major (stride(-1) == 1) or MN-major (stride(-2) == 1), leading strides free;
//  - d is row-major [M,N], bfloat16 or float32; c is optional, same shape and dtype as d; c may be d;
//  - M == 0 or N == 0: nothing happens; K == 0: d = c, or zeros without c.
// Accumulation is fp32 with one rounding to d's dtype; results are bitwise identical for any thread
// count. Invalid arguments throw tessera::Error naming the argument and the rule, before d is touched.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "tessera/core/tensor.h"

namespace tessera::gemm {

// ---- BF16 ----
void bf16_gemm_nt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);
void bf16_gemm_nn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);
void bf16_gemm_tn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);
void bf16_gemm_tt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);

// ---- cuBLASLt-compatible plain GEMM: bf16 or raw float8_e4m3fn operands, no scale factors ----
void cublaslt_gemm_nt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);
void cublaslt_gemm_nn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);
void cublaslt_gemm_tn(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);
void cublaslt_gemm_tt(const TensorView& a, const TensorView& b, const TensorView& d, const TensorView* c = nullptr);

// ---- FP8 / FP4 with block scale factors ----
// An operand with its scale factors (SF). data: float8_e4m3fn, or packed FP4 (dtype float4_e2m1fn_x2,
// int8 or uint8: two e2m1 per byte along the contiguous dimension, which then counts half the logical
// size). scale: float32 [ceil(MN/gran_mn), ceil(K/gran_k)] (any strides), or int32 packed UE8M0
// [ceil(MN/gran_mn), ceil(ceil(K/gran_k)/4)] (four K-consecutive exponents per int32, little-endian).
struct ScaledTensor {
  TensorView data;
  TensorView scale;
};

// Scale granularities. Either `recipe` = (gran_m, gran_n, gran_k) or the per-operand pairs
// recipe_a = (gran_mn_a, gran_k_a), recipe_b = (gran_mn_b, gran_k_b) - never both. Defaults
// (DeepGEMM SM100 personality): fp32 SFB -> (1, 128, 128); int32 SFB -> (1, 1, 128); an FP4 operand
// defaults to gran_k 32.
struct Recipe {
  std::optional<std::array<int, 3>> recipe;
  std::optional<std::array<int, 2>> recipe_a, recipe_b;
  bool disable_ue8m0_cast = false;  // accepted for compatibility; no effect on CPU
};

void fp8_fp4_gemm_nt(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c = nullptr,
                     const Recipe& recipe = {});
void fp8_fp4_gemm_nn(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c = nullptr,
                     const Recipe& recipe = {});
void fp8_fp4_gemm_tn(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c = nullptr,
                     const Recipe& recipe = {});
void fp8_fp4_gemm_tt(const ScaledTensor& a, const ScaledTensor& b, const TensorView& d, const TensorView* c = nullptr,
                     const Recipe& recipe = {});

// ---- layout utilities (exact DeepGEMM shapes and strides; see DeepGEMM's API, docs/gemm.md) ----
// align(x, 16 / element_size)
int64_t get_tma_aligned_size(int64_t x, int64_t element_size);
// Copies fp32 SF [(G,) MN, SFK] into dst, whose strides must be (1, align(MN, 4)) or
// (align(MN,4)*SFK, 1, align(MN,4)) - the MN-major TMA-aligned layout.
void copy_to_mn_major_tma_aligned(const TensorView& sf, const TensorView& dst);
// Packs fp32 SF [(G,) MN, SFK] (powers of two; else an error) into int32 dst [(G,) MN, ceil(SFK/4)]
// with MN-major aligned strides; missing K entries get exponent byte 0.
void pack_ue8m0_mn_major(const TensorView& sf, const TensorView& dst);

// Runtime knob shared with the Python layer: worker threads (0 = all). set_num_sms maps here.
void set_num_sms(int n);
int get_num_sms();

}  // namespace tessera::gemm
