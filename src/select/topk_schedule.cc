// Spreads a top-k call over the thread pool. Many rows: each thread takes whole rows. Few long rows
// (fewer rows than threads): each row is cut into parts, every part keeps its own top k, and the parts'
// survivors are merged. The selected set is defined by a total order, so both schedules (and any
// number of parts) give the same bits.
#include <algorithm>
#include <atomic>
#include <climits>
#include <numeric>
#include <vector>

#include "select/radix_select.h"
#include "select/topk_job.h"
#include "select/topk_row.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::select::detail {
namespace {

// Rows shorter than this are never split: the merge would cost more than the parallelism saves.
constexpr int64_t kMinSplitLength = 32768;
constexpr int kMaxParts = 16;

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

void run_whole_rows(const TopkJob& job, const SelectKernels& kernels, std::atomic<int64_t>* first_nan) {
  parallel_for(job.rows, [&](int64_t r0, int64_t r1) {
    const Workspace ws = thread_workspace(job.k, 0);
    for (int64_t r = r0; r < r1; ++r) {
      const RowRef row{job.row_data(r), job.bf16};
      const int64_t lo = job.row_begin(r), hi = job.row_end(r);
      if (hi - lo <= job.k) {
        finish_row(job, r, ws, collect_all(row, lo, hi, ws), false, first_nan);
        continue;
      }
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

  parallel_for(units, [&](int64_t u0, int64_t u1) {
    const Workspace ws = thread_workspace(job.k, 0);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t r = u / parts, p = u % parts;
      const int64_t lo = job.row_begin(r), len = job.row_end(r) - lo;
      const int64_t b = lo + len * p / parts, e = lo + len * (p + 1) / parts;
      if (len <= k || e == b) continue;
      const PartTopk part = collect_topk(kernels, RowRef{job.row_data(r), job.bf16}, b, e, job.k, ws);
      std::copy_n(ws.keys, part.count, keys.get() + u * k);
      std::copy_n(ws.index, part.count, index.get() + u * k);
      counts[size_t(u)] = part.count;
      nans[size_t(u)] = part.nan;
    }
  });

  parallel_for(job.rows, [&](int64_t r0, int64_t r1) {
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
  if (job.rows < threads && job.cols >= kMinSplitLength) {
    // Enough parts that rows x parts is a multiple of the thread count, so every thread gets the same
    // share; each part still long enough to amortise its own selection.
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
