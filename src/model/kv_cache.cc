// Paged caches (kv_cache.h).
#include "kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/flash_mla.h"

namespace tessera::model {

ZeroBuffer::ZeroBuffer(size_t bytes) : bytes_(bytes) {
  void* p = ::mmap(nullptr, std::max<size_t>(bytes, 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail(ErrorCode::kRuntime, "Model: cannot map ", bytes, " bytes for the KV cache");
  data_ = static_cast<uint8_t*>(p);
}

ZeroBuffer::~ZeroBuffer() {
  if (data_) ::munmap(data_, std::max<size_t>(bytes_, 1));
}

KvCache::KvCache(int64_t layers, int64_t slots, int64_t max_seq_len)
    : slots_(slots), max_blocks_((max_seq_len + kBlock - 1) / kBlock), lens_(size_t(slots), 0) {
  block_table_.resize(size_t(slots_ * max_blocks_));
  for (size_t i = 0; i < block_table_.size(); ++i) block_table_[i] = int32_t(i);
  for (int64_t l = 0; l < layers; ++l) {
    latent_.emplace_back(size_t(num_blocks() * kBlock * kLatentBytes));
    index_.emplace_back(size_t(num_blocks() * kIndexPageBytes));
  }
}

void KvCache::write_latent(int64_t layer, int64_t slot, int64_t pos0, int64_t n, const uint16_t* rows) {
  // One quantiser call per run of positions inside one page.
  for (int64_t i = 0; i < n;) {
    const int64_t pos = pos0 + i, run = std::min(n - i, kBlock - pos % kBlock);
    uint8_t* dst = latent_[size_t(layer)].data() + int64_t(flat_slot(slot, pos)) * kLatentBytes;
    flash_mla::quantize_k_cache(
        TensorView(const_cast<uint16_t*>(rows + i * kLatentDim), DType::kBF16, {1, run, 1, kLatentDim}),
        flash_mla::KvCacheLayout::kV32, TensorView(dst, DType::kU8, {1, run, 1, kLatentBytes}));
    i += run;
  }
}

void KvCache::read_latent(int64_t layer, int64_t slot, int64_t len, uint16_t* out) const {
  const int64_t pages = (len + kBlock - 1) / kBlock;
  if (pages == 0) return;
  const uint8_t* src = latent_[size_t(layer)].data() + int64_t(flat_slot(slot, 0)) * kLatentBytes;
  flash_mla::dequantize_k_cache(TensorView(const_cast<uint8_t*>(src), DType::kU8, {pages, kBlock, 1, kLatentBytes}),
                                flash_mla::KvCacheLayout::kV32,
                                TensorView(out, DType::kBF16, {pages, kBlock, 1, kLatentDim}));
}

void KvCache::write_index_key(int64_t layer, int64_t slot, int64_t pos, const uint8_t* codes, float scale) {
  uint8_t* page = index_[size_t(layer)].data() + (slot * max_blocks_ + pos / kBlock) * kIndexPageBytes;
  std::memcpy(page + (pos % kBlock) * kIndexDim, codes, kIndexDim);
  std::memcpy(page + kBlock * kIndexDim + (pos % kBlock) * 4, &scale, 4);
}

void KvCache::read_index_keys(int64_t layer, int64_t slot, int64_t len, uint8_t* codes, float* scales) const {
  for (int64_t p0 = 0; p0 < len; p0 += kBlock) {
    const uint8_t* page = index_[size_t(layer)].data() + (slot * max_blocks_ + p0 / kBlock) * kIndexPageBytes;
    const int64_t n = std::min(kBlock, len - p0);
    std::memcpy(codes + p0 * kIndexDim, page, size_t(n * kIndexDim));
    std::memcpy(scales + p0, page + kBlock * kIndexDim, size_t(n * 4));
  }
}

TensorView KvCache::latent_view(int64_t layer) const {
  return TensorView(latent_[size_t(layer)].data(), DType::kU8, {num_blocks(), kBlock, 1, kLatentBytes});
}

TensorView KvCache::index_view(int64_t layer) const {
  return TensorView(index_[size_t(layer)].data(), DType::kU8, {num_blocks(), kBlock, 1, kIndexDim + 4},
                    {kIndexPageBytes, kIndexDim + 4, kIndexDim + 4, 1});
}

}  // namespace tessera::model
