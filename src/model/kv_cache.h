// The paged caches of every layer: FlashMLA's V32 FP8 latent cache (656 bytes per token) and the
// indexer's FP8 key cache (per 64-token page: 64 x 128 e4m3 keys, then 64 f32 scales). Slot s owns pages
// [s * max_blocks, (s + 1) * max_blocks) in order, so its block table is static and its pages are
// contiguous. Memory is an anonymous mapping: pages never written cost nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::model {

class ZeroBuffer {  // anonymous zero-filled mapping
 public:
  explicit ZeroBuffer(size_t bytes);
  ~ZeroBuffer();
  ZeroBuffer(ZeroBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  ZeroBuffer(const ZeroBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

class KvCache {
 public:
  static constexpr int64_t kBlock = 64, kLatentBytes = 656, kLatentDim = 576, kIndexDim = 128;
  static constexpr int64_t kIndexPageBytes = kBlock * (kIndexDim + 4);

  KvCache(int64_t layers, int64_t slots, int64_t max_seq_len);

  int64_t slots() const { return slots_; }
  int64_t max_blocks() const { return max_blocks_; }
  int64_t num_blocks() const { return slots_ * max_blocks_; }
  int64_t capacity() const { return max_blocks_ * kBlock; }
  int64_t len(int64_t slot) const { return lens_[size_t(slot)]; }
  void set_len(int64_t slot, int64_t n) { lens_[size_t(slot)] = n; }
  int32_t flat_slot(int64_t slot, int64_t pos) const { return int32_t(slot * max_blocks_ * kBlock + pos); }
  const int32_t* block_row(int64_t slot) const { return block_table_.data() + slot * max_blocks_; }

  // Quantises latent rows [n, 576] bf16 (512 latent, 64 rope) of positions pos0.. into the cache.
  void write_latent(int64_t layer, int64_t slot, int64_t pos0, int64_t n, const uint16_t* rows);
  // The dequantised latent rows of positions [0, len): [len, 576] bf16.
  void read_latent(int64_t layer, int64_t slot, int64_t len, uint16_t* out) const;
  // One indexer key: 128 e4m3 codes and its scale.
  void write_index_key(int64_t layer, int64_t slot, int64_t pos, const uint8_t* codes, float scale);
  // Keys [len, 128] and scales [len] of positions [0, len), contiguous.
  void read_index_keys(int64_t layer, int64_t slot, int64_t len, uint8_t* codes, float* scales) const;
  // Positions [0, len) of slot get random valid entries in both caches (benchmarks).
  void fill_random(int64_t layer, int64_t slot, int64_t len, uint64_t seed);

  TensorView latent_view(int64_t layer) const;  // uint8 [num_blocks, 64, 1, 656]
  TensorView index_view(int64_t layer) const;   // uint8 [num_blocks, 64, 1, 132]

 private:
  int64_t slots_, max_blocks_;
  std::vector<int64_t> lens_;
  std::vector<int32_t> block_table_;
  std::vector<ZeroBuffer> latent_, index_;
};

}  // namespace tessera::model
