// Inputs, our call, the plain gather and the float64 check of one FlashMLA benchmark case.
#include "attention/mla_problem.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "random_fill.h"
#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"

namespace tessera::bench {
namespace {

constexpr int kBlock = 64;         // page block size (FlashMLA's)
constexpr int kSourceRows = 4096;  // distinct random K rows, repeated through large caches
constexpr int kChecked = 2;        // groups checked against float64
constexpr int64_t kMaxCopies = 64;

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool is_sparse(MlaOp op) {
  return op == MlaOp::kSparseV32 || op == MlaOp::kSparseModel1;
}
int bytes_per_token(MlaOp op) {
  return op == MlaOp::kSparseV32 ? 656 : op == MlaOp::kSparseModel1 ? 584 : 576 * 2;
}

// Enough input copies that the KV bytes read by `copies` consecutive calls exceed 4x L3.
int copies_for(double bytes_per_call, int64_t l3) {
  return int(std::clamp<int64_t>(int64_t(4.0 * double(l3) / bytes_per_call) + 1, 1, kMaxCopies));
}

AlignedPtr<uint16_t> random_bf16(int64_t rows, int64_t cols, uint64_t seed) {
  auto a = aligned_array<uint16_t>(size_t(rows * cols));
  for_random_normal_blocks(rows, cols, 64, seed, [&](int64_t r0, int64_t nr, const float* v) {
    for (int64_t i = 0; i < nr * cols; ++i) a[size_t(r0 * cols + i)] = f32_to_bf16(v[i]);
  });
  return a;
}

// KV caches live on 2 MiB transparent huge pages, as a serving system's would: with 4 KiB pages every
// randomly gathered token costs a page walk, and the prefetches stall on them (measured, one thread,
// V32 b=8 h_q=64 over a 131 MB cache: 6.2 ms on huge pages, 7.0 ms on 4 KiB pages).
AlignedPtr<uint8_t> huge_page_bytes(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
  if (!p) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);
  return AlignedPtr<uint8_t>(static_cast<uint8_t*>(p));
}

}  // namespace

const char* mla_op_name(MlaOp op) {
  switch (op) {
    case MlaOp::kSparseV32:
      return "mla_sparse_v32";
    case MlaOp::kSparseModel1:
      return "mla_sparse_model1";
    case MlaOp::kDense:
      return "mla_dense";
    case MlaOp::kPrefill:
      return "mla_prefill";
  }
  return "?";
}

MlaProblem::MlaProblem(const MlaCase& c, const MachineLimits& lim) : c_(c) {
  const uint64_t seed = uint64_t(c.b) * 7919 + uint64_t(c.s_q) * 104729 + uint64_t(c.h_q) * 31 + uint64_t(c.op);
  d_qk_ = c.op == MlaOp::kSparseModel1 ? 512 : 576;
  tokens_ = c.tokens;
  scale_ = float(1.0 / std::sqrt(double(d_qk_)));
  const int64_t bpt = bytes_per_token(c.op);
  if (c.op == MlaOp::kDense) {
    groups_ = c.b;
    rows_ = c.s_q * c.h_q;
  } else {
    groups_ = c.op == MlaOp::kPrefill ? c.s_q : int64_t(c.b) * c.s_q;
    rows_ = c.h_q;
  }
  copies_ = copies_for(double(groups_) * double(tokens_) * double(bpt), lim.l3_bytes);
  q_ = random_bf16(groups_ * rows_, d_qk_, seed);
  out_ = aligned_array<uint16_t>(size_t(groups_ * rows_ * 512));
  lse_ = aligned_array<float>(size_t(groups_ * rows_));
  max_logits_ = aligned_array<float>(size_t(groups_ * rows_));
  uint64_t state = seed ^ 0xABCDEF;
  if (is_sparse(c.op) || c.op == MlaOp::kPrefill) {
    // Random slots over a cache of at least 4x L3 (or 2x the list length).
    cache_tokens_ = std::max<int64_t>(4 * lim.l3_bytes / bpt, 2 * tokens_);
    cache_tokens_ = (cache_tokens_ + kBlock - 1) / kBlock * kBlock;
    if (c.op == MlaOp::kPrefill) {
      build_bf16_kv(seed, cache_tokens_);
    } else {
      build_fp8_cache(seed);
    }
    for (int i = 0; i < copies_; ++i) {
      indices_.push_back(aligned_array<int32_t>(size_t(groups_ * tokens_)));
      for (int64_t j = 0; j < groups_ * tokens_; ++j)
        indices_.back()[size_t(j)] = int32_t(splitmix(&state) % uint64_t(cache_tokens_));
    }
    std::vector<int32_t> lens(size_t(c.b), 0);
    const TensorView lv(lens.data(), DType::kI32, {c.b});
    schedule_ = flash_mla::get_mla_metadata(lv, int64_t(c.s_q) * c.h_q, 1, c.h_q, true, tokens_);
  } else {
    // Paged bf16 cache: each copy owns b * L / 64 blocks, in a random order.
    const int64_t per_copy = groups_ * ((tokens_ + kBlock - 1) / kBlock);
    cache_tokens_ = per_copy * copies_ * kBlock;
    build_bf16_kv(seed, cache_tokens_);
    for (int i = 0; i < copies_; ++i) {
      indices_.push_back(aligned_array<int32_t>(size_t(per_copy)));
      for (int64_t j = 0; j < per_copy; ++j) indices_.back()[size_t(j)] = int32_t(i * per_copy + j);
      for (int64_t j = per_copy - 1; j > 0; --j)
        std::swap(indices_.back()[size_t(j)], indices_.back()[size_t(splitmix(&state) % uint64_t(j + 1))]);
    }
    seqlens_ = aligned_array<int32_t>(size_t(c.b));
    std::fill_n(seqlens_.get(), c.b, int32_t(tokens_));
    const TensorView lv(seqlens_.get(), DType::kI32, {c.b});
    schedule_ = flash_mla::get_mla_metadata(lv, int64_t(c.s_q) * c.h_q, 1);
  }
}

void MlaProblem::build_fp8_cache(uint64_t seed) {
  const flash_mla::KvCacheLayout layout =
      c_.op == MlaOp::kSparseV32 ? flash_mla::KvCacheLayout::kV32 : flash_mla::KvCacheLayout::kModel1;
  const int64_t bpt = bytes_per_token(c_.op), src_blocks = kSourceRows / kBlock;
  AlignedPtr<uint16_t> src = random_bf16(kSourceRows, d_qk_, seed + 1);
  auto quant = aligned_array<uint8_t>(size_t(kSourceRows * bpt));
  flash_mla::quantize_k_cache(TensorView(src.get(), DType::kBF16, {src_blocks, kBlock, 1, d_qk_}), layout,
                              TensorView(quant.get(), DType::kU8, {src_blocks, kBlock, 1, bpt}));
  block_stride_ = kBlock * bpt;
  const int64_t blocks = cache_tokens_ / kBlock;
  cache_ = huge_page_bytes(size_t(blocks * block_stride_));
  parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      std::memcpy(cache_.get() + b * block_stride_, quant.get() + (b % src_blocks) * block_stride_,
                  size_t(block_stride_));
  });
}

void MlaProblem::build_bf16_kv(uint64_t seed, int64_t rows) {
  AlignedPtr<uint16_t> src = random_bf16(kSourceRows, d_qk_, seed + 1);
  cache_ = huge_page_bytes(size_t(rows * d_qk_ * 2));
  const size_t row_bytes = size_t(d_qk_) * 2;
  parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(cache_.get() + r * row_bytes, src.get() + (r % kSourceRows) * d_qk_, row_bytes);
  });
}

void MlaProblem::run_ours(int64_t i) {
  const int32_t* idx = indices_[size_t(i % copies_)].get();
  if (c_.op == MlaOp::kPrefill) {
    flash_mla::SparsePrefillInputs in;
    in.q = TensorView(q_.get(), DType::kBF16, {c_.s_q, c_.h_q, d_qk_});
    in.kv = TensorView(cache_.get(), DType::kBF16, {cache_tokens_, 1, d_qk_});
    in.indices = TensorView(const_cast<int32_t*>(idx), DType::kI32, {c_.s_q, 1, tokens_});
    in.sm_scale = scale_;
    flash_mla::flash_mla_sparse_fwd(in, TensorView(out_.get(), DType::kBF16, {c_.s_q, c_.h_q, 512}),
                                    TensorView(max_logits_.get(), DType::kF32, {c_.s_q, c_.h_q}),
                                    TensorView(lse_.get(), DType::kF32, {c_.s_q, c_.h_q}));
    return;
  }
  flash_mla::KvcacheInputs in;
  in.q = TensorView(q_.get(), DType::kBF16, {c_.b, c_.s_q, c_.h_q, d_qk_});
  in.head_dim_v = 512;
  TensorView indices, block_table, seqlens;
  if (c_.op == MlaOp::kDense) {
    in.k_cache = TensorView(cache_.get(), DType::kBF16, {cache_tokens_ / kBlock, kBlock, 1, d_qk_});
    block_table = TensorView(const_cast<int32_t*>(idx), DType::kI32, {c_.b, (tokens_ + kBlock - 1) / kBlock});
    seqlens = TensorView(seqlens_.get(), DType::kI32, {c_.b});
    in.block_table = &block_table;
    in.cache_seqlens = &seqlens;
    in.causal = c_.s_q > 1;
  } else {
    const int64_t bpt = bytes_per_token(c_.op);
    in.k_cache =
        TensorView(cache_.get(), DType::kU8, {cache_tokens_ / kBlock, kBlock, 1, bpt}, {block_stride_, bpt, bpt, 1});
    indices = TensorView(const_cast<int32_t*>(idx), DType::kI32, {c_.b, c_.s_q, tokens_});
    in.indices = &indices;
    in.is_fp8_kvcache = true;
  }
  flash_mla::flash_mla_with_kvcache(in, schedule_, TensorView(out_.get(), DType::kBF16, {c_.b, c_.s_q, c_.h_q, 512}),
                                    TensorView(lse_.get(), DType::kF32, {c_.b, c_.h_q, c_.s_q}));
}

const uint16_t* MlaProblem::q_row(int64_t g, int r) const {
  return q_.get() + (g * rows_ + r) * d_qk_;
}

int64_t MlaProblem::visible(int r) const {
  if (c_.op != MlaOp::kDense || c_.s_q == 1) return tokens_;
  return std::clamp<int64_t>(tokens_ - c_.s_q + r / c_.h_q + 1, 0, tokens_);
}

void MlaProblem::gather(int64_t g, int64_t i, uint16_t* k, uint16_t* v_t, int64_t t0, int64_t t1) const {
  static const std::vector<float> e4m3 = [] {  // e4m3 code -> fp32, the plain lookup-table dequantisation
    std::vector<float> t(256);
    for (int c = 0; c < 256; ++c) t[size_t(c)] = e4m3_to_f32(uint8_t(c));
    return t;
  }();
  const int32_t* idx = indices_[size_t(i % copies_)].get();
  for (int64_t t = t0; t < t1; ++t) {
    uint16_t* row = k + t * d_qk_;
    if (c_.op == MlaOp::kDense) {
      const int64_t block = idx[g * ((tokens_ + kBlock - 1) / kBlock) + t / kBlock];
      std::memcpy(row, cache_.get() + ((block * kBlock + t % kBlock) * d_qk_) * 2, size_t(d_qk_) * 2);
    } else if (c_.op == MlaOp::kPrefill) {
      std::memcpy(row, cache_.get() + int64_t(idx[g * tokens_ + t]) * d_qk_ * 2, size_t(d_qk_) * 2);
    } else {
      const int64_t slot = idx[g * tokens_ + t], block = slot / kBlock, off = slot % kBlock;
      const uint8_t* base = cache_.get() + block * block_stride_;
      if (c_.op == MlaOp::kSparseV32) {
        const uint8_t* tok = base + off * 656;
        float s[4];
        std::memcpy(s, tok + 512, 16);
        for (int c = 0; c < 512; ++c) row[c] = f32_to_bf16(e4m3[tok[c]] * s[c / 128]);
        std::memcpy(row + 512, tok + 528, 128);
      } else {
        const uint8_t* tok = base + off * 576;
        const uint8_t* sc = base + kBlock * 576 + off * 8;
        for (int c = 0; c < 448; ++c) row[c] = f32_to_bf16(e4m3[tok[c]] * ue8m0_to_f32(sc[c / 64]));
        std::memcpy(row + 448, tok + 448, 128);
      }
    }
  }
  if (!v_t) return;
  // V^T in 32 x 32 blocks, so both sides stay in cache lines.
  for (int64_t tb = t0; tb < t1; tb += 32)
    for (int cb = 0; cb < 512; cb += 32)
      for (int c = cb; c < cb + 32; ++c)
        for (int64_t t = tb; t < std::min(tb + 32, t1); ++t) v_t[int64_t(c) * tokens_ + t] = k[t * d_qk_ + c];
}

double MlaProblem::check(const uint16_t* out, double scale) const {
  const double abs_tol = (is_sparse(c_.op) ? 1e-3 : 8e-4) * scale;
  const double rel_tol = (c_.op == MlaOp::kPrefill ? 3.01 : 2.01) / 128 * scale;
  std::vector<uint16_t> k(size_t(tokens_ * d_qk_));
  std::vector<double> s(static_cast<size_t>(tokens_)), o(512);
  double worst = 0;
  for (int64_t g = 0; g < std::min<int64_t>(kChecked, groups_); ++g) {
    gather(g, 0, k.data(), nullptr, 0, tokens_);
    for (int r = 0; r < rows_; ++r) {
      const uint16_t* q = q_row(g, r);
      const int64_t n = visible(r);
      double mx = -INFINITY, sum = 0;
      for (int64_t t = 0; t < n; ++t) {
        double acc = 0;
        for (int c = 0; c < d_qk_; ++c) acc += double(bf16_to_f32(q[c])) * bf16_to_f32(k[size_t(t * d_qk_ + c)]);
        s[size_t(t)] = acc * scale_;
        mx = std::max(mx, s[size_t(t)]);
      }
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t t = 0; t < n; ++t) {
        const double p = std::exp(s[size_t(t)] - mx);
        sum += p;
        for (int c = 0; c < 512; ++c) o[size_t(c)] += p * bf16_to_f32(k[size_t(t * d_qk_ + c)]);
      }
      for (int c = 0; c < 512; ++c) {
        const double ref = n ? o[size_t(c)] / sum : 0.0, got = bf16_to_f32(out[(g * rows_ + r) * 512 + c]);
        const double err = std::fabs(got - ref);
        worst = std::max(
            worst, std::isfinite(got) ? std::min(err / abs_tol, err / (rel_tol * (std::fabs(ref) + 1e-6))) : INFINITY);
      }
    }
  }
  return worst;
}

double MlaProblem::flops() const {
  double attended = 0;
  for (int r = 0; r < rows_; ++r) attended += double(visible(r));
  return 2.0 * double(groups_) * attended * double(d_qk_ + 512);
}

double MlaProblem::bytes_read() const {
  const double q = double(groups_) * rows_ * d_qk_ * 2, o = double(groups_) * rows_ * 512 * 2;
  return double(groups_) * double(tokens_) * bytes_per_token(c_.op) + q + o;
}

}  // namespace tessera::bench
