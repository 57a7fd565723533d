// Spreads a top-k call over the thread pool. Many rows: threads take whole rows, a few at a time from a
// shared counter. Few long rows (fewer than the threads, or a count that would leave a thread a row
// short): each row is cut into parts, every part keeps its own top k, and the parts' survivors are
// merged. The selected set is defined by a total order, so every schedule (and any number of parts)
// gives the same bits.
#include <algorithm>
#include <atomic>
#include <climits>
#include <functional>
#include <numeric>
#include <vector>

#include "select/radix_select.h"
#include "select/topk_bf16.h"
#include "select/topk_job.h"
#include "select/topk_row.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::select::detail {
namespace {

// Rows shorter than this are never split: the merge would cost more than the parallelism saves.
constexpr int64_t kMinSplitLength = 32768;
constexpr int kMaxParts = 16;

// Runs fn(i0, i1) over [0, n) in chunks taken from a shared counter rather than a static split: a
// thread slowed by other load on the machine then simply takes fewer chunks, where a static split
// waits for it. (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
void for_each_chunk(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t chunk = std::clamp<int64_t>(n / (8 * num_threads()), 1, 16);
  std::atomic<int64_t> next{0};
  parallel_shares([&](int, int) {
    for (int64_t i0; (i0 = next.fetch_add(chunk, std::memory_order_relaxed)) < n;) fn(i0, std::min(n, i0 + chunk));
  });
}

// Keeps the lowest NaN row index seen.
void note_nan_row(std::atomic<int64_t>* first, int64_t r) {
  int64_t cur = first->load(std::memory_order_relaxed);
  while (r < cur && !first->compare_exchange_weak(cur, r, std::memory_order_relaxed)) {
  }
}

// Orders (if asked), writes, or marks the row; count entries sit in ws.keys / ws.index in index order.
void finish_row(const TopkJob& job, int64_t r, const Workspace& ws, int64_t count, bool nan_row,
                std::atomic<int64_t>* first_nan) {
  if (nan_row) {
    if (job.options.abort_when_nan_found) {
      note_nan_row(first_nan, r);
    } else {
      write_nan_row(job, r);
    }
    return;
  }
  if (job.options.sorted) sort_desc_stable(ws.keys, ws.index, count, ws.sort_keys, ws.sort_index);
  write_row(job, r, ws.keys, ws.index, count);
}

// A bf16 row by the bf16 path (topk_bf16.h): without a sort the selection goes straight to the
// outputs. False when the row needs the general path.
bool run_bf16_row(const TopkJob& job, const SelectKernels& kernels, int64_t r, int64_t next, const Workspace& ws,
                  std::atomic<int64_t>* first_nan) {
  const RowRef row{job.row_data(r), true};
  const int64_t lo = job.row_begin(r), hi = job.row_end(r);
  Bf16Selection sel;
  NextRange next_range;
  if (next >= 0) next_range = {job.row_data(next), job.row_begin(next), job.row_end(next)};
  const bool fetch_whole = next >= 0 && prefetched_whole_by_collect(hi - lo) &&
                           prefetched_whole_by_collect(next_range.end - next_range.begin);
  const bool ok = select_bf16(kernels, row, lo, hi, job.k, ws, &sel, fetch_whole ? next_range : NextRange{});
  // Longer rows: the next row's sample is scattered over it: fetch it while this row finishes (after the
  // pass over this row, whose own prefetches would otherwise hold the memory queues).
  if (next >= 0 && !fetch_whole && bf16_path_fits(next_range.end - next_range.begin, job.k))
    prefetch_bf16_sample(RowRef{next_range.data, true}, next_range.begin, next_range.end, 8192);
  if (!ok) return false;
  if (sel.nan || job.options.sorted) {
    if (!sel.nan) emit_bf16(kernels, sel, job.k, 0, ws.index, nullptr, nullptr, ws.keys);
    finish_row(job, r, ws, sel.nan ? 0 : job.k, sel.nan, first_nan);
  } else {
    emit_row_bf16(job, r, kernels, sel);
  }
  return true;
}

void run_whole_rows(const TopkJob& job, const SelectKernels& kernels, std::atomic<int64_t>* first_nan) {
  for_each_chunk(job.rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const RowRef row{job.row_data(r), job.bf16};
      const int64_t lo = job.row_begin(r), hi = job.row_end(r);
      const bool bf16_path = job.bf16 && bf16_path_fits(hi - lo, job.k);
      // Per row: the bf16 path's workspace depends on the row length (the scratch only grows).
      const Workspace ws = thread_workspace(job.k, bf16_path ? bf16_candidate_capacity(hi - lo, job.k) : 0);
      if (hi - lo <= job.k) {
        finish_row(job, r, ws, collect_all(row, lo, hi, ws), false, first_nan);
        continue;
      }
      if (bf16_path && run_bf16_row(job, kernels, r, r + 1 < r1 ? r + 1 : -1, ws, first_nan)) continue;
      const PartTopk part = collect_topk(kernels, row, lo, hi, job.k, ws);
      finish_row(job, r, ws, part.count, part.nan, first_nan);
    }
  });
}

void run_split_rows(const TopkJob& job, int parts, const SelectKernels& kernels, std::atomic<int64_t>* first_nan) {
  const int64_t units = job.rows * parts, k = job.k;
  std::vector<int64_t> counts(size_t(units), 0);
  std::vector<char> nans(size_t(units), 0);
  auto keys = aligned_array<int32_t>(size_t(units * k));
  auto index = aligned_array<int32_t>(size_t(units * k));

  for_each_chunk(units, [&](int64_t u0, int64_t u1) {
    const int64_t part_len = job.cols / parts + 1;
    const Workspace ws = thread_workspace(job.k, job.bf16 ? bf16_candidate_capacity(part_len, job.k) : 0);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t r = u / parts, p = u % parts;
      const int64_t lo = job.row_begin(r), len = job.row_end(r) - lo;
      const int64_t b = lo + len * p / parts, e = lo + len * (p + 1) / parts;
      if (len <= k || e == b) continue;
      const RowRef row{job.row_data(r), job.bf16};
      const PartTopk part =
          job.bf16 ? collect_topk_bf16(kernels, row, b, e, job.k, ws) : collect_topk(kernels, row, b, e, job.k, ws);
      std::copy_n(ws.keys, part.count, keys.get() + u * k);
      std::copy_n(ws.index, part.count, index.get() + u * k);
      counts[size_t(u)] = part.count;
      nans[size_t(u)] = part.nan;
    }
  });

  for_each_chunk(job.rows, [&](int64_t r0, int64_t r1) {
    const Workspace ws = thread_workspace(job.k, parts * k);
    for (int64_t r = r0; r < r1; ++r) {
      const RowRef row{job.row_data(r), job.bf16};
      const int64_t lo = job.row_begin(r), hi = job.row_end(r);
      if (hi - lo <= k) {
        finish_row(job, r, ws, collect_all(row, lo, hi, ws), false, first_nan);
        continue;
      }
      // Parts in order keep the merged entries in index order.
      int64_t n = 0;
      bool nan = false;
      for (int p = 0; p < parts; ++p) {
        const int64_t u = r * parts + p;
        std::copy_n(keys.get() + u * k, counts[size_t(u)], ws.keys + n);
        std::copy_n(index.get() + u * k, counts[size_t(u)], ws.index + n);
        n += counts[size_t(u)];
        nan |= nans[size_t(u)] != 0;
      }
      finish_row(job, r, ws, reduce_to_top(ws.keys, ws.index, n, k, ws.scratch, kernels.compact), nan, first_nan);
    }
  });
}

}  // namespace

int64_t run_topk(const TopkJob& job) {
  std::atomic<int64_t> first_nan{INT64_MAX};
  const SelectKernels kernels = select_kernels();
  const int threads = num_threads();
  int parts = 1;
  if (job.rows % threads != 0 && job.rows < 4 * threads && job.cols >= kMinSplitLength) {
    // Enough parts that rows x parts is a multiple of the thread count, so every thread gets the same
    // share; each part still long enough to amortise its own selection. (With four or more rows per
    // thread, whole rows balance well enough.)
    parts = threads / std::gcd(int(job.rows), threads);
    parts = int(std::min<int64_t>({parts, kMaxParts, job.cols / (kMinSplitLength / 2)}));
  }
  if (parts > 1) {
    run_split_rows(job, parts, kernels, &first_nan);
  } else {
    run_whole_rows(job, kernels, &first_nan);
  }
  const int64_t first = first_nan.load();
  return first == INT64_MAX ? -1 : first;
}

}  // namespace tessera::select::detail
