#include "select/topk_bf16.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace tessera::select::detail {
namespace {

// Keys of the bf16 infinities: a scanned key outside [key(-inf), key(+inf)] is a NaN.
constexpr int32_t kBf16NegInf = -32641, kBf16PosInf = 32640;

// Packed candidates hold 16 bits of position: the range is collected in segments of this many elements.
constexpr int64_t kSegment = 65536;
constexpr int kMaxSegments = 32;

// Shorter ranges are cheaper on the general path (no sample to pay for).
constexpr int64_t kMinLength = 4096;

// Sample geometry: runs of one vector (32 elements) spread evenly over the range. A bigger sample
// narrows the window (fewer candidates) but costs a bisection step per key bit over all of it: a run
// per 1024 elements up to 32 runs, and for ranges beyond 256K one per 8192 up to 128 runs (their
// candidates are so sparse that the collect pass's skipped blocks pay for the sample). Measured on
// Zen 5, one thread: a run per 512 elements or up to 64 runs was 0-15% slower on 8K-128K rows.
constexpr int64_t kRunElems = 32;
constexpr int kMinRuns = 8, kMaxRuns = 128;
// Half-width of the window in sample standard deviations: the window misses the k-th key with
// probability ~1% (a miss below costs the general path, one above a second pass over the candidates),
// and its lower edge sets how many candidates the pass collects.
constexpr double kWindowSigmas = 2.5;

int sample_runs(int64_t n) {
  return int(std::max<int64_t>(std::clamp<int64_t>(n / 1024, kMinRuns, 32), std::min<int64_t>(n / 8192, kMaxRuns)));
}

int64_t run_start(int64_t begin, int64_t n, int j, int runs) {
  return begin + (n - kRunElems) * j / (runs - 1);
}

// The window's edges as sample ranks: at most hi_rank sampled keys lie above hi, more than lo_rank
// above lo, around the expected q*m above the k-th key (standard deviation sqrt(m q (1 - q))).
struct SampleRanks {
  int64_t m, hi_rank, lo_rank;
};
SampleRanks sample_ranks(int64_t n, int k) {
  const int64_t m = sample_runs(n) * kRunElems;
  const double q = double(k) / double(n), mean = q * double(m), sd = std::sqrt(double(m) * q * (1.0 - q));
  return {m, int64_t(std::floor(mean - kWindowSigmas * sd)) - 1, int64_t(std::ceil(mean + kWindowSigmas * sd)) + 1};
}

int fraction_1024(int64_t part, int64_t whole) {
  return int(std::clamp<int64_t>(1024 * part / std::max<int64_t>(whole, 1), 0, 1024));
}

// The smallest t in [-32768, 32767] with count(keys > t) <= rank[j], for two ranks at once, by
// bisection (sampled keys spread over the whole 16-bit range).
void bisect_two(cpu::SelectCount2Fn count2, const int16_t* keys, int64_t n, const int64_t rank[2], int32_t out[2]) {
  int32_t a[2] = {-32768, -32768}, b[2] = {32767, 32767};  // count(keys > 32767) == 0 <= rank
  while (a[0] < b[0] || a[1] < b[1]) {
    const int32_t t[2] = {(a[0] + b[0]) >> 1, (a[1] + b[1]) >> 1};
    int64_t c[2];
    count2(keys, n, t, c);
    for (int j = 0; j < 2; ++j) {
      if (a[j] == b[j]) continue;
      if (c[j] <= rank[j]) {
        b[j] = t[j];
      } else {
        a[j] = t[j] + 1;
      }
    }
  }
  out[0] = a[0];
  out[1] = a[1];
}

// The k-th key among the window's n keys (all in (lo, hi]): the smallest t with count(keys > t) <= r =
// need - 1, its ties being the need - count(keys > t) first keys equal to it (1 <= need <= n). Each pass
// counts at two thresholds inside the bracket [a, b]: the guesses of a linear count (a window inside
// the bulk of the values) and of a log-linear one (a window in a tail); when they agree, at the guess
// and one below it, which settles the answer when the guess is right. A pass that does not halve the
// bracket makes the next one split it in three. Measured on Zen 5: 2-4 passes instead of 7-9.
void kth_in_window(cpu::SelectCount2Fn count2, const int16_t* keys, int64_t n, int32_t lo, int32_t hi, int64_t need,
                   Bf16Selection* sel) {
  const int64_t r = need - 1;
  int32_t a = lo + 1, b = hi;        // the answer lies in [a, b]
  int64_t above_a = n, above_b = 0;  // count(keys > a - 1) > r >= count(keys > b)
  bool split = false;
  while (a < b) {
    const int32_t width = b - a;
    int32_t t[2];
    if (split) {
      t[0] = a + width / 3;
      t[1] = a + 2 * width / 3;
    } else {
      const double steps = double(width) + 1.0;
      const double lin = double(above_a - r) / double(std::max<int64_t>(above_a - above_b, 1));
      const double log_a = std::log(double(above_a + 1));
      const double lg = (log_a - std::log(double(r + 1))) / std::max(log_a - std::log(double(above_b + 1)), 1e-9);
      const int32_t g0 = a - 1 + int32_t(std::ceil(lin * steps)), g1 = a - 1 + int32_t(std::ceil(lg * steps));
      t[0] = std::min(g0, g1);
      t[1] = std::max(g0, g1);
      if (t[0] == t[1]) --t[0];
    }
    // Thresholds in [a, b - 1]: count(keys > b) is known, and every outcome then narrows the bracket.
    t[0] = std::clamp(t[0], a, b - 1);
    t[1] = std::clamp(t[1], t[0], b - 1);
    int64_t c[2];
    count2(keys, n, t, c);
    if (c[0] <= r) {
      b = t[0];
      above_b = c[0];
    } else if (c[1] <= r) {
      a = t[0] + 1;
      above_a = c[0];
      b = t[1];
      above_b = c[1];
    } else {
      a = t[1] + 1;
      above_a = c[1];
    }
    split = 2 * (b - a) > width;
  }
  sel->kth = a;
  sel->take_equal = need - above_b;
}

}  // namespace

bool prefetched_whole_by_collect(int64_t len) {
  return len <= kSegment;
}

bool bf16_path_fits(int64_t len, int k) {
  return len >= kMinLength && len <= kSegment * kMaxSegments && len > int64_t(k);
}

int64_t bf16_candidate_capacity(int64_t len, int k) {
  // lo is the (lo_rank + 1)-th largest of m sampled keys: about a fraction (lo_rank + 1) / m of the
  // range lies above it, with standard deviation sqrt(lo_rank + 1) / m; room for four of those.
  const SampleRanks r = sample_ranks(len, k);
  const double above = double(std::min(r.lo_rank + 1, r.m));
  return std::min<int64_t>(len, int64_t(double(len) * (above + 4.0 * std::sqrt(above)) / double(r.m))) + 256;
}

void prefetch_bf16_sample(const RowRef& row, int64_t begin, int64_t end, int64_t head_elements) {
  const int64_t n = end - begin;
  const int runs = sample_runs(n);
  const char* base = static_cast<const char*>(row.data);
  for (int j = 0; j < runs; ++j) __builtin_prefetch(base + 2 * run_start(begin, n, j, runs), 0, 3);
  for (int64_t i = begin; i < std::min(end, begin + head_elements); i += 32) __builtin_prefetch(base + 2 * i, 0, 3);
}

KeyWindow sample_window(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                        const Workspace& ws) {
  const int64_t n = end - begin;
  const int runs = sample_runs(n);
  int64_t starts[kMaxRuns];
  for (int j = 0; j < runs; ++j) starts[j] = run_start(begin, n, j, runs);
  auto* sample = reinterpret_cast<int16_t*>(ws.sort_keys);
  kernels.bf16.sample(row.data, starts, runs, sample);
  const SampleRanks r = sample_ranks(n, k);
  if (r.lo_rank >= r.m) return {-32769, 32767, 1024};
  const int64_t ranks[2] = {std::max<int64_t>(r.hi_rank, 0), r.lo_rank};
  int32_t t[2];
  bisect_two(kernels.bf16.count2, sample, r.m, ranks, t);
  return {t[1] - 1, r.hi_rank < 0 ? 32767 : t[0], fraction_1024(r.lo_rank, r.m)};
}

bool select_bf16_in_window(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                           const KeyWindow& window, const Workspace& ws, Bf16Selection* sel, const NextRange& next) {
  sel->packed = ws.scratch;
  sel->begin = begin;
  sel->end = end;
  cpu::SelectCollectArgs a{row.data,
                           begin,
                           begin,
                           begin,
                           window.lo,
                           ws.scratch,
                           0,
                           ws.capacity,
                           INT_MAX,
                           INT_MIN,
                           window.expected_hits_per_1024};
  // Ranges of one segment prefetch the next range whole during their collect pass.
  if (next.data && prefetched_whole_by_collect(end - begin)) {
    a.next = static_cast<const char*>(next.data) + 2 * next.begin;
    a.next_bytes = 2 * (next.end - next.begin);
  }
  for (int s = 0; a.pos < end; ++s) {
    a.base = a.pos;
    a.end = std::min(end, a.pos + kSegment);
    kernels.bf16.collect(&a);
    if (a.pos != a.end) return false;  // more candidates than the workspace holds
    sel->segment_end[s] = a.count;
  }
  sel->count = a.count;
  sel->nan = a.min_key < kBf16NegInf || a.max_key > kBf16PosInf;
  if (sel->nan) return true;
  if (a.count < k) return false;  // lo was too high

  // Every candidate is > lo: the k-th key is in (lo, hi] unless k or more are above hi.
  auto* keys = reinterpret_cast<int16_t*>(ws.sort_index);
  int64_t above;
  int32_t lo = window.lo, hi = window.hi;
  int64_t n = kernels.bf16.window_keys(ws.scratch, a.count, lo, hi, keys, &above);
  if (above >= k) {
    lo = hi;
    hi = a.max_key;
    n = kernels.bf16.window_keys(ws.scratch, a.count, lo, hi, keys, &above);
  }
  kth_in_window(kernels.bf16.count2, keys, n, lo, hi, k - above, sel);
  return true;
}

bool select_bf16(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                 const Workspace& ws, Bf16Selection* sel, const NextRange& next) {
  return select_bf16_in_window(kernels, row, begin, end, k, sample_window(kernels, row, begin, end, k, ws), ws, sel,
                               next);
}

void emit_bf16(const SelectKernels& kernels, const Bf16Selection& sel, int k, int64_t offset, int32_t* index32,
               int64_t* index64, uint16_t* values, int32_t* keys) {
  cpu::SelectEmitArgs e{sel.packed, 0,      sel.begin, sel.kth, sel.take_equal, 0,
                        k,          offset, index32,   index64, values,         keys};
  for (int s = 0; e.base < sel.end; ++s, e.base += kSegment) {
    const int64_t first = s ? sel.segment_end[s - 1] : 0;
    e.packed = sel.packed + first;
    e.n = sel.segment_end[s] - first;
    kernels.bf16.emit(&e);
  }
}

PartTopk collect_topk_bf16(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                           const Workspace& ws) {
  Bf16Selection sel;
  if (bf16_path_fits(end - begin, k) && select_bf16(kernels, row, begin, end, k, ws, &sel)) {
    if (sel.nan) return {0, true};
    emit_bf16(kernels, sel, k, 0, ws.index, nullptr, nullptr, ws.keys);
    return {k, false};
  }
  return collect_topk(kernels, row, begin, end, k, ws);
}

}  // namespace tessera::select::detail
