// fp8_fp4_paged_mqa_logits and its schedule metadata. Work items are runs of kPagesPerItem pages of
// one request; an item converts each page once (values are token-major, scales follow them) and runs
// the kernel for every next_n query of the request on the page's rows below that query's length.
#include <algorithm>
#include <array>
#include <climits>
#include <vector>

#include "attention/mqa_logits/mqa_common.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/mqa_logits.h"

namespace tessera::attention {
namespace {

using detail::is_packed_fp4;

constexpr const char* kFn = "fp8_fp4_paged_mqa_logits";
constexpr const char* kMetaFn = "get_paged_mqa_logits_metadata";
constexpr int64_t kPagesPerItem = 8;

// Token counts per query (b, j): context_lens [B, next_n] directly, or [B] as the causal last next_n
// positions: len[b] - next_n + j + 1, floored at 0.
std::vector<int64_t> query_lengths(const char* fn, const TensorView& lens, int64_t batch, int64_t next_n) {
  check_defined(fn, "context_lens", lens);
  check_dtype(fn, "context_lens", lens, {DType::kI32});
  check_ndim(fn, "context_lens", lens, {1, 2});
  check_dim(fn, "context_lens", lens, 0, batch, "batch_size");
  if (lens.ndim == 2) check_dim(fn, "context_lens", lens, 1, next_n, "next_n");
  TESSERA_CHECK(batch * next_n <= (int64_t(1) << 24), fn,
                ": argument 'context_lens' must cover at most 2^24 queries, "
                "got shape ",
                lens.shape_str());
  std::vector<int64_t> out(static_cast<size_t>(batch * next_n));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < next_n; ++j) {
      const int32_t* p = lens.ptr<const int32_t>();
      const int64_t v = lens.ndim == 2 ? p[b * lens.stride(0) + j * lens.stride(1)] : p[b * lens.stride(0)];
      TESSERA_CHECK(v >= 0, fn, ": argument 'context_lens' must hold lengths >= 0, got ", v, " for batch ", b);
      out[size_t(b * next_n + j)] = lens.ndim == 2 ? v : std::max<int64_t>(0, v - next_n + j + 1);
    }
  return out;
}

// Pages request b must read: ceil(max_j len(b, j) / block_kv).
std::vector<int64_t> request_pages(const std::vector<int64_t>& len, int64_t batch, int64_t next_n, int64_t block_kv) {
  std::vector<int64_t> pages(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t m = 0;
    for (int64_t j = 0; j < next_n; ++j) m = std::max(m, len[size_t(b * next_n + j)]);
    pages[size_t(b)] = (m + block_kv - 1) / block_kv;
  }
  return pages;
}

// Pages sit at random places (the block table), so the hardware prefetchers cannot see the next one
// coming: ask for its value rows and scales while the current page is computed. Measured (one thread,
// 64 requests x 4096 tokens, cache in DRAM): without this the kernel waited on every page. Kernel sets
// with rows_prefetch get the page two ahead instead, spread over their tile steps.
void prefetch_page(const uint8_t* page, int64_t rows, int64_t block_kv, int64_t row_bytes) {
  for (int64_t off = 0; off < rows * row_bytes; off += 64) __builtin_prefetch(page + off);
  for (int64_t off = 0; off < rows * 4; off += 64) __builtin_prefetch(page + block_kv * row_bytes + off);
}

// The schedule DeepGEMM's paged kernel reads: entry t of num_sms + 1 = (request, page within it) where
// worker t starts when all pages are split into num_sms equal shares; the last is (batch_size, 0).
std::vector<std::array<int32_t, 2>> schedule_entries(const std::vector<int64_t>& pages, int64_t num_sms) {
  const int64_t batch = int64_t(pages.size());
  int64_t total = 0;
  for (int64_t p : pages) total += p;
  std::vector<std::array<int32_t, 2>> entries(size_t(num_sms + 1));
  int64_t b = 0, before = 0;  // before = pages of requests < b
  for (int64_t t = 0; t <= num_sms; ++t) {
    const int64_t start = total / num_sms * t + total % num_sms * t / num_sms;
    while (b < batch && before + pages[size_t(b)] <= start) before += pages[size_t(b++)];
    entries[size_t(t)] = {int32_t(b), int32_t(b < batch ? start - before : 0)};
  }
  return entries;
}

}  // namespace

void get_paged_mqa_logits_metadata(const TensorView& context_lens, int block_kv, int num_sms, const TensorView& out) {
  TESSERA_CHECK(block_kv >= 1, kMetaFn, ": argument 'block_kv' must be >= 1, got ", block_kv);
  TESSERA_CHECK(num_sms >= 1 && num_sms <= (1 << 20), kMetaFn, ": argument 'num_sms' must be in [1, 2^20], got ",
                num_sms);
  check_defined(kMetaFn, "context_lens", context_lens);
  check_ndim(kMetaFn, "context_lens", context_lens, {1, 2});
  const int64_t batch = context_lens.size(0), next_n = context_lens.ndim == 2 ? context_lens.size(1) : 1;
  check_defined(kMetaFn, "out", out);
  check_dtype(kMetaFn, "out", out, {DType::kI32});
  check_ndim(kMetaFn, "out", out, {2});
  check_dim(kMetaFn, "out", out, 0, int64_t(num_sms) + 1, "num_sms + 1");
  check_dim(kMetaFn, "out", out, 1, 2, "2");
  check_row_major(kMetaFn, "out", out);
  check_no_overlap(kMetaFn, "out", out, "context_lens", context_lens);
  const std::vector<int64_t> len = query_lengths(kMetaFn, context_lens, batch, next_n);
  const std::vector<int64_t> pages = request_pages(len, batch, next_n, block_kv);
  const std::vector<std::array<int32_t, 2>> entries = schedule_entries(pages, num_sms);
  int32_t* o = out.ptr<int32_t>();
  for (int64_t t = 0; t <= num_sms; ++t) {
    o[t * out.stride(0)] = entries[size_t(t)][0];
    o[t * out.stride(0) + out.stride(1)] = entries[size_t(t)][1];
  }
}

void fp8_fp4_paged_mqa_logits(const TensorView& q, const TensorView* q_sf, const TensorView& kv_cache,
                              const TensorView& weights, const TensorView& context_lens, const TensorView& block_table,
                              const TensorView& schedule_meta, const TensorView& logits, int64_t max_context_len,
                              bool clean_logits, const TensorView* indices) {
  if (indices) TESSERA_NOT_IMPLEMENTED(kFn, ": argument 'indices' (varlen paged logits) is not supported on the CPU");
  check_defined(kFn, "q", q);
  check_dtype(kFn, "q", q, {DType::kF8E4M3, DType::kF4E2M1, DType::kI8, DType::kU8});
  check_ndim(kFn, "q", q, {4});
  const bool fp4 = is_packed_fp4(q.dtype);
  const int64_t batch = q.size(0), next_n = q.size(1), h = q.size(2), d = detail::logical_dim(q.dtype, q.size(3));
  TESSERA_CHECK(next_n >= 1, kFn, ": argument 'q' must have next_n >= 1, got shape ", q.shape_str());
  TESSERA_CHECK(h >= 1 && h <= 128, kFn, ": argument 'q' must have 1 to 128 heads, got ", h);
  detail::check_head_dim(kFn, d, fp4);
  TESSERA_CHECK(!fp4 || q.stride(3) == 1, kFn, ": argument 'q' in packed FP4 must have stride(3) == 1, got strides ",
                q.strides_str());
  detail::check_q_sf(kFn, q_sf, fp4, {batch, next_n, h});

  const int64_t row_bytes = fp4 ? d / 2 : d, token_bytes = row_bytes + 4;
  check_defined(kFn, "kv_cache", kv_cache);
  check_dtype(kFn, "kv_cache", kv_cache, {DType::kU8, DType::kI8});
  check_ndim(kFn, "kv_cache", kv_cache, {4});
  const int64_t num_blocks = kv_cache.size(0), block_kv = kv_cache.size(1);
  check_dim(kFn, "kv_cache", kv_cache, 2, 1, "1 (one kv head)");
  check_dim(kFn, "kv_cache", kv_cache, 3, token_bytes, "head_dim bytes + 4 (its scale)");
  TESSERA_CHECK(block_kv >= 1, kFn, ": argument 'kv_cache' must have block_kv >= 1, got shape ", kv_cache.shape_str());
  TESSERA_CHECK(kv_cache.stride(3) == 1 && (kv_cache.stride(1) == token_bytes || block_kv == 1), kFn,
                ": argument 'kv_cache' must have stride(3) == 1 and stride(1) == head_dim bytes + 4 (one page is "
                "block_kv * head_dim value bytes then block_kv scales), got strides ",
                kv_cache.strides_str());

  check_defined(kFn, "weights", weights);
  check_ndim(kFn, "weights", weights, {2});
  check_dim(kFn, "weights", weights, 0, batch * next_n, "batch_size * next_n");
  check_dim(kFn, "weights", weights, 1, h, "num_heads");
  check_dtype(kFn, "weights", weights, {DType::kF32, DType::kBF16});
  TESSERA_CHECK(weights.stride(1) == 1 || h == 1, kFn, ": argument 'weights' must have stride(1) == 1, got strides ",
                weights.strides_str());
  const std::vector<int64_t> len = query_lengths(kFn, context_lens, batch, next_n);

  check_defined(kFn, "block_table", block_table);
  check_dtype(kFn, "block_table", block_table, {DType::kI32});
  check_ndim(kFn, "block_table", block_table, {2});
  check_dim(kFn, "block_table", block_table, 0, batch, "batch_size");
  const std::vector<int64_t> pages = request_pages(len, batch, next_n, block_kv);
  const int32_t* table = block_table.ptr<const int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    TESSERA_CHECK(pages[size_t(b)] <= block_table.size(1), kFn, ": argument 'block_table' has ", block_table.size(1),
                  " columns but request ", b, " needs ", pages[size_t(b)], " pages (block_kv ", block_kv, ")");
    for (int64_t p = 0; p < pages[size_t(b)]; ++p) {
      const int64_t page = table[b * block_table.stride(0) + p * block_table.stride(1)];
      TESSERA_CHECK(page >= 0 && page < num_blocks, kFn, ": argument 'block_table' entry [", b, ", ", p, "] = ", page,
                    " is outside [0, num_blocks = ", num_blocks, ")");
    }
  }

  check_defined(kFn, "schedule_meta", schedule_meta);
  check_dtype(kFn, "schedule_meta", schedule_meta, {DType::kI32});
  check_ndim(kFn, "schedule_meta", schedule_meta, {2});
  TESSERA_CHECK(schedule_meta.size(0) >= 2 && schedule_meta.size(1) == 2, kFn,
                ": argument 'schedule_meta' must be [num_sms + 1, 2] from get_paged_mqa_logits_metadata, got shape ",
                schedule_meta.shape_str());
  // The CPU schedules by itself, but a schedule_meta that does not belong to these lengths is a caller's
  // bug the GPU would turn into wrong logits: refuse it.
  TESSERA_CHECK(schedule_meta.size(0) - 1 <= (int64_t(1) << 20), kFn,
                ": argument 'schedule_meta' must have at most 2^20 + 1 rows (num_sms + 1), got shape ",
                schedule_meta.shape_str());
  {
    const int64_t num_sms = schedule_meta.size(0) - 1;
    const std::vector<std::array<int32_t, 2>> want = schedule_entries(pages, num_sms);
    const int32_t* m = schedule_meta.ptr<const int32_t>();
    for (int64_t t = 0; t <= num_sms; ++t) {
      const int32_t r = m[t * schedule_meta.stride(0)], pg = m[t * schedule_meta.stride(0) + schedule_meta.stride(1)];
      TESSERA_CHECK(r == want[size_t(t)][0] && pg == want[size_t(t)][1], kFn,
                    ": argument 'schedule_meta' does not match get_paged_mqa_logits_metadata(context_lens, block_kv=",
                    block_kv, ", num_sms=", num_sms, "): entry ", t, " is (", r, ", ", pg, "), expected (",
                    want[size_t(t)][0], ", ", want[size_t(t)][1], ")");
    }
  }

  TESSERA_CHECK(max_context_len >= 0, kFn, ": argument 'max_context_len' must be >= 0, got ", max_context_len);
  TESSERA_CHECK(max_context_len <= block_table.size(1) * block_kv, kFn, ": argument 'max_context_len' (",
                max_context_len, ") must not exceed the tokens a block_table row addresses (max_blocks * block_kv = ",
                block_table.size(1), " * ", block_kv, ")");
  for (int64_t i = 0; i < batch * next_n; ++i)
    TESSERA_CHECK(len[size_t(i)] <= max_context_len, kFn, ": argument 'context_lens' gives query ", i, " length ",
                  len[size_t(i)], " above max_context_len = ", max_context_len);
  check_defined(kFn, "logits", logits);
  check_dtype(kFn, "logits", logits, {DType::kF32, DType::kBF16});
  TESSERA_CHECK(weights.dtype != DType::kBF16 || logits.dtype == DType::kBF16, kFn,
                ": argument 'weights' may be bfloat16 only with bfloat16 logits");
  check_ndim(kFn, "logits", logits, {2});
  check_dim(kFn, "logits", logits, 0, batch * next_n, "batch_size * next_n");
  check_dim(kFn, "logits", logits, 1, max_context_len, "max_context_len");
  check_row_major(kFn, "logits", logits);
  const TensorView* inputs[] = {&q, q_sf, &kv_cache, &weights, &context_lens, &block_table, &schedule_meta};
  const char* names[] = {"q", "q_sf", "kv_cache", "weights", "context_lens", "block_table", "schedule_meta"};
  for (int i = 0; i < 7; ++i)
    if (inputs[i]) check_no_overlap(kFn, "logits", logits, names[i], *inputs[i]);
  if (batch == 0) return;

  detail::QuerySource qs{};
  qs.data = static_cast<const uint8_t*>(q.data);
  qs.stride_outer = q.stride(0);
  qs.stride_inner = q.stride(1);
  qs.inner = next_n;
  qs.stride_head = q.stride(2);
  qs.stride_d = q.stride(3);
  qs.fp4 = fp4;
  qs.sf = q_sf ? q_sf->ptr<const int32_t>() : nullptr;
  qs.sf_outer = q_sf ? q_sf->stride(0) : 0;
  qs.sf_inner = q_sf ? q_sf->stride(1) : 0;
  qs.sf_head = q_sf ? q_sf->stride(2) : 0;
  qs.weights = weights.data;
  qs.weights_bf16 = weights.dtype == DType::kBF16;
  qs.w_stride = weights.stride(0);
  qs.heads = int(h);
  qs.dim = int(d);
  const detail::KeyFormat kf{fp4, q_sf != nullptr, int(d)};
  const detail::LogitsOut out{static_cast<char*>(logits.data), logits.stride(0) * dtype_storage_bytes(logits.dtype),
                              logits.dtype == DType::kBF16};
  if (clean_logits) {
    parallel_for(batch * next_n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out.fill_neg_inf(i, len[size_t(i)], max_context_len);
    });
  }

  struct Item {
    int64_t b, p0, p1;
  };
  std::vector<Item> items;
  std::vector<int64_t> cost;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p0 = 0; p0 < pages[size_t(b)]; p0 += kPagesPerItem) {
      items.push_back({b, p0, std::min(pages[size_t(b)], p0 + kPagesPerItem)});
      cost.push_back((items.back().p1 - p0) * block_kv * (next_n * 8 + 1));
    }
  if (items.empty()) return;

  const cpu::MqaLogitsKernels& kernels = detail::mqa_kernels(kFn);
  const detail::QueryPanels panels = detail::build_query_panels(kernels, qs, batch * next_n);
  const uint8_t* cache = static_cast<const uint8_t*>(kv_cache.data);
  const int64_t page_stride = kv_cache.stride(0), page_bytes = block_kv * token_bytes;
  // The page `ahead` pages after page p of request b in the order a thread runs them (its share is a
  // run of consecutive items: the request's next pages, then the next request's), nullptr past the end.
  auto page_ahead = [&](int64_t b, int64_t p, int64_t ahead) -> const uint8_t* {
    p += ahead;
    while (b < batch && p >= pages[size_t(b)]) p -= pages[size_t(b++)];
    return b < batch ? cache + table[b * block_table.stride(0) + p * block_table.stride(1)] * page_stride : nullptr;
  };
  detail::run_items_balanced(cost, [&](int64_t n) {
    const Item& it = items[size_t(n)];
    void* tile = thread_scratch(0, size_t(block_kv * d) * size_t(kernels.key_bytes));
    auto* scale = static_cast<float*>(thread_scratch(1, size_t(block_kv) * 4));
    auto* tmp = static_cast<float*>(thread_scratch(2, size_t(block_kv) * 4));
    int64_t need = 0;  // tokens the longest query of the request sees
    for (int64_t j = 0; j < next_n; ++j) need = std::max(need, len[size_t(it.b * next_n + j)]);
    for (int64_t p = it.p0; p < it.p1; ++p) {
      const int64_t page = table[it.b * block_table.stride(0) + p * block_table.stride(1)];
      const uint8_t* base = cache + page * page_stride;
      const int rows = int(std::min(block_kv, need - p * block_kv));
      const uint8_t* ahead = kernels.rows_prefetch ? page_ahead(it.b, p, 2) : nullptr;
      if (!kernels.rows_prefetch && p + 1 < it.p1)
        prefetch_page(cache + table[it.b * block_table.stride(0) + (p + 1) * block_table.stride(1)] * page_stride,
                      std::min(block_kv, need - (p + 1) * block_kv), block_kv, row_bytes);
      detail::convert_key_rows(kernels, kf, base, row_bytes, base + block_kv * row_bytes, 4, rows, tile, scale);
      for (int64_t j = 0; j < next_n; ++j) {
        const int64_t i = it.b * next_n + j;
        const int64_t r1 = std::min<int64_t>(rows, len[size_t(i)] - p * block_kv);
        if (r1 <= 0) continue;
        float* direct = out.direct(i, p * block_kv);
        cpu::MqaRowsArgs a{
            panels.panel(i), panels.weight(i),     qs.heads, qs.head_vectors(), int(d), tile, int64_t(d), scale,
            int(r1),         direct ? direct : tmp};
        if (ahead) {  // the next_n queries share the page's lines
          a.prefetch = ahead + page_bytes * j / next_n;
          a.prefetch_bytes = page_bytes * (j + 1) / next_n - page_bytes * j / next_n;
        }
        kernels.rows(a);
        if (!direct) out.store(i, p * block_kv, tmp, r1);
      }
    }
  });
}

}  // namespace tessera::attention
