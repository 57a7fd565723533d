// Row-level helpers shared by the MLA tasks: kernel-set choice, row conversion into the kernels' element
// type, output rows, attention-sink factors and the FP8 cache geometry.
#pragma once

#include <cstdint>

#include "backends/cpu/mla_kernel_set.h"
#include "tessera/core/tensor.h"
#include "tessera/flash_mla.h"

namespace tessera::flash_mla {

// The registry's MLA set for the active level (kernel slot kMla): the first one whose element type takes
// the inputs (bf16 sets: bf16 only) and whose alignment takes d_qk and d_v; the scalar set at the end.
const cpu::MlaKernelSet* choose_kernels(bool bf16_inputs, int64_t d_qk, int64_t d_v);

// n elements of a bf16|fp16 row (element stride `stride`) into dst as the element type of the set `ks`.
void load_row(const void* src, DType type, int64_t stride, int64_t n, const cpu::MlaKernelSet& ks, void* dst);

// dst[c] = o[c] * factor as bf16|fp16|fp32 (dst contiguous).
void store_row(const float* o, int64_t n, float factor, DType type, void* dst);

// exp(lse) / (exp(lse) + exp(sink)) = 1 / (1 + exp(sink - lse)); 1 when no sink; 0 when lse = +inf.
float sink_factor(const float* sink, float lse);

// Byte geometry of one FP8 cache (main or extra) of the sparse decode.
struct Fp8Cache {
  const uint8_t* base = nullptr;
  KvCacheLayout layout = KvCacheLayout::kV32;
  int64_t num_blocks = 0, block_size = 0;
  int64_t block_stride = 0;  // bytes
  int64_t token_stride = 0;  // bytes (V32: tokens of a block; MODEL1: 576 within the data area)
  int block_shift = -1;      // log2(block_size) when it is a power of two (slot -> block without a division)
  int64_t slots() const { return num_blocks * block_size; }
  // Token data (V32: all 656 bytes; MODEL1: 576 data bytes) and, for MODEL1, its 8 scale bytes.
  const uint8_t* token(int64_t slot) const;
  const uint8_t* model1_scales(int64_t slot) const;
};

// Splits a flat slot into (block, offset within the block).
inline void split_slot(int64_t slot, int64_t block_size, int block_shift, int64_t* block, int64_t* off) {
  if (block_shift >= 0) {
    *block = slot >> block_shift;
    *off = slot & (block_size - 1);
  } else {
    *block = slot / block_size;
    *off = slot % block_size;
  }
}
// log2(n) for a power of two, else -1.
int power_of_two_shift(int64_t n);

// Validates an FP8 cache view ([blocks, block_size, 1, 656|584] bytes) and returns its geometry.
Fp8Cache check_fp8_cache(const char* fn, const char* arg, const TensorView& cache);

}  // namespace tessera::flash_mla
