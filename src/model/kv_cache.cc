// Paged caches (kv_cache.h).
#include "kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
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
  // A slot's pages are consecutive: its whole pages in one call, then the used rows of the last one.
  const uint8_t* src = latent_[size_t(layer)].data() + int64_t(flat_slot(slot, 0)) * kLatentBytes;
  const int64_t pages = len / kBlock, rest = len % kBlock;
  if (pages > 0)
    flash_mla::dequantize_k_cache(TensorView(const_cast<uint8_t*>(src), DType::kU8, {pages, kBlock, 1, kLatentBytes}),
                                  flash_mla::KvCacheLayout::kV32,
                                  TensorView(out, DType::kBF16, {pages, kBlock, 1, kLatentDim}));
  if (rest > 0)
    flash_mla::dequantize_k_cache(
        TensorView(const_cast<uint8_t*>(src) + pages * kBlock * kLatentBytes, DType::kU8, {1, rest, 1, kLatentBytes}),
        flash_mla::KvCacheLayout::kV32,
        TensorView(out + pages * kBlock * kLatentDim, DType::kBF16, {1, rest, 1, kLatentDim}));
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

namespace {

// splitmix64: a cheap generator whose state is a counter, so any position's bytes can be made alone.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// n random e4m3 codes, never NaN (S.1111.111).
void random_codes(uint64_t key, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t r = mix(key + uint64_t(i));
    for (int64_t j = i; j < std::min(n, i + 8); ++j, r >>= 8) {
      const uint8_t code = uint8_t(r);
      out[j] = (code & 0x7f) == 0x7f ? uint8_t(code ^ 1) : code;
    }
  }
}

}  // namespace

void KvCache::fill_random(int64_t layer, int64_t slot, int64_t len, uint64_t seed) {
  const float scale = 1.0f / 64;  // a power of two, as the V32 quantiser's scales are
  // Each position's bytes come from its own key, so the split over threads does not change them.
  parallel_for(len, [&](int64_t p0, int64_t p1) {
    for (int64_t pos = p0; pos < p1; ++pos) {
      const uint64_t key = mix(seed ^ mix(uint64_t(layer) << 48 ^ uint64_t(slot) << 32 ^ uint64_t(pos))) << 12;
      uint8_t* tok = latent_[size_t(layer)].data() + int64_t(flat_slot(slot, pos)) * kLatentBytes;
      random_codes(key, tok, 512);
      for (int i = 0; i < 4; ++i) std::memcpy(tok + 512 + 4 * i, &scale, 4);
      for (int i = 0; i < 64; ++i) {  // the rope part: bf16 in [-1, 1)
        const float v = float(int32_t(mix(key + 1024 + uint64_t(i)) >> 41) - (1 << 22)) / float(1 << 22);
        const uint16_t b = f32_to_bf16(v);
        std::memcpy(tok + 528 + 2 * i, &b, 2);
      }
      uint8_t codes[kIndexDim];
      random_codes(key + 2048, codes, kIndexDim);
      write_index_key(layer, slot, pos, codes, scale);
    }
  });
}

TensorView KvCache::latent_view(int64_t layer) const {
  return TensorView(latent_[size_t(layer)].data(), DType::kU8, {num_blocks(), kBlock, 1, kLatentBytes});
}

TensorView KvCache::index_view(int64_t layer) const {
  return TensorView(index_[size_t(layer)].data(), DType::kU8, {num_blocks(), kBlock, 1, kIndexDim + 4},
                    {kIndexPageBytes, kIndexDim + 4, kIndexDim + 4, 1});
}

}  // namespace tessera::model
