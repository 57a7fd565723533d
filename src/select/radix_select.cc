#include "select/radix_select.h"

#include <algorithm>
#include <cstring>

namespace tessera::select::detail {
namespace {

constexpr int kDigitBits = 11;
constexpr int kMaxBins = 1 << kDigitBits;

// Keys as unsigned numbers in the same order.
inline uint32_t biased(int32_t key) {
  return uint32_t(key) ^ 0x80000000u;
}
inline int32_t unbiased(uint32_t u) {
  return int32_t(u ^ 0x80000000u);
}

int bit_length(uint32_t v) {
  return v ? 32 - __builtin_clz(v) : 0;
}

}  // namespace

namespace {

// Min and max of the biased keys, four independent chains (a single cmov chain costs 2 cycles a key).
void key_bounds(const int32_t* keys, int64_t n, uint32_t* lo, uint32_t* hi) {
  uint32_t mn[4] = {~0u, ~0u, ~0u, ~0u}, mx[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int c = 0; c < 4; ++c) {
      const uint32_t u = biased(keys[i + c]);
      mn[c] = std::min(mn[c], u);
      mx[c] = std::max(mx[c], u);
    }
  for (; i < n; ++i) {
    mn[0] = std::min(mn[0], biased(keys[i]));
    mx[0] = std::max(mx[0], biased(keys[i]));
  }
  *lo = std::min({mn[0], mn[1], mn[2], mn[3]});
  *hi = std::max({mx[0], mx[1], mx[2], mx[3]});
}

}  // namespace

KthKey kth_largest(const int32_t* keys, int64_t n, int64_t k, int32_t* scratch, int32_t lo_key, int32_t hi_key) {
  uint32_t lo, hi;
  if (lo_key == INT32_MIN && hi_key == INT32_MAX) {
    key_bounds(keys, n, &lo, &hi);
  } else {
    lo = biased(lo_key);
    hi = biased(hi_key);
  }
  // Few keys: fewer bins (clearing and scanning them costs more than the keys); many keys per bin:
  // four interleaved histograms so that repeated bins do not serialise on one counter.
  const int digit_bits = std::clamp(bit_length(uint32_t(n)), 6, kDigitBits);
  uint32_t hist[4][kMaxBins];
  const int32_t* cur = keys;
  int64_t m = n, need = k;
  bool filter = false;  // level 0 sees every key in [lo, hi]; later levels only their bucket's keys
  for (;;) {
    if (lo == hi) return {unbiased(lo), need};
    const uint32_t span = hi - lo;
    if (filter) {  // keep the previous level's bucket (branch-free: the bucket is a small fraction)
      int64_t j = 0;
      for (int64_t i = 0; i < m; ++i) {
        scratch[j] = cur[i];
        j += biased(cur[i]) - lo <= span;
      }
      cur = scratch;
      m = j;
    }
    const int shift = std::max(0, bit_length(span) - digit_bits);
    const uint32_t bins = (span >> shift) + 1;
    const int copies = m >= 2 * int64_t(bins) ? 4 : 1;
    for (int c = 0; c < copies; ++c) std::memset(hist[c], 0, bins * sizeof(uint32_t));
    if (copies == 4) {
      int64_t i = 0;
      for (; i + 4 <= m; i += 4)
        for (int c = 0; c < 4; ++c) ++hist[c][(biased(cur[i + c]) - lo) >> shift];
      for (; i < m; ++i) ++hist[0][(biased(cur[i]) - lo) >> shift];
      for (uint32_t b = 0; b < bins; ++b) hist[0][b] += hist[1][b] + hist[2][b] + hist[3][b];
    } else {
      for (int64_t i = 0; i < m; ++i) ++hist[0][(biased(cur[i]) - lo) >> shift];
    }
    uint32_t b = bins - 1;
    int64_t above = 0;
    while (above + hist[0][b] < need) above += hist[0][b--];
    need -= above;
    const uint32_t new_lo = lo + (b << shift);
    if (shift == 0) return {unbiased(new_lo), need};
    hi = uint32_t(std::min<uint64_t>(hi, uint64_t(new_lo) + ((uint64_t(1) << shift) - 1)));  // no wrap at the top
    lo = new_lo;
    filter = true;
  }
}

int64_t reduce_to_top(int32_t* keys, int32_t* index, int64_t n, int64_t k, int32_t* scratch,
                      cpu::SelectCompactFn compact, int32_t lo, int32_t hi) {
  if (n <= k) return n;
  const KthKey kth = kth_largest(keys, n, k, scratch, lo, hi);
  return compact(keys, index, n, kth.key, kth.take_equal);
}

void sort_desc_stable(int32_t* keys, int32_t* index, int64_t n, int32_t* tmp_keys, int32_t* tmp_index) {
  if (n < 2) return;
  // Descending by key = ascending by ~biased(key); only the bits where the keys differ need passes.
  uint32_t all_and = ~0u, all_or = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t d = ~biased(keys[i]);
    all_and &= d;
    all_or |= d;
  }
  const int bits = bit_length(all_and ^ all_or);
  // Digits of about log2(n) bits: clearing and scanning the counts costs about as much as the entries.
  const int digit = std::clamp(bit_length(uint32_t(n)), 6, kDigitBits);
  int32_t *src_k = keys, *src_i = index, *dst_k = tmp_keys, *dst_i = tmp_index;
  uint32_t count[kMaxBins];
  for (int shift = 0; shift < bits; shift += digit) {
    const uint32_t mask = (1u << std::min(digit, bits - shift)) - 1;
    std::memset(count, 0, (mask + 1) * sizeof(uint32_t));
    for (int64_t i = 0; i < n; ++i) ++count[(~biased(src_k[i]) >> shift) & mask];
    uint32_t sum = 0;
    for (uint32_t b = 0; b <= mask; ++b) {
      const uint32_t c = count[b];
      count[b] = sum;
      sum += c;
    }
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t slot = count[(~biased(src_k[i]) >> shift) & mask]++;
      dst_k[slot] = src_k[i];
      dst_i[slot] = src_i[i];
    }
    std::swap(src_k, dst_k);
    std::swap(src_i, dst_i);
  }
  if (src_k != keys) {
    std::memcpy(keys, src_k, size_t(n) * sizeof(int32_t));
    std::memcpy(index, src_i, size_t(n) * sizeof(int32_t));
  }
}

}  // namespace tessera::select::detail
