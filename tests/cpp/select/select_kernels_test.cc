// Every vector implementation of the select slot (each registry entry, at each level this CPU has:
// hand-written AVX-512, Highway AVX2 and AVX-512) against the scalar reference, kernel by kernel: the
// same entries in the same order, the same stop positions and key ranges, and no store past the limits.
#include "backends/cpu/select_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/registry.h"
#include "test_util.h"

namespace tessera::test {
namespace {

using cpu::SelectKernelTable;

struct NamedSet {
  std::string name;
  const SelectKernelTable* table;
};

std::vector<NamedSet> vector_sets() {
  const cpu::SlotInfo& info = cpu::slot_info(cpu::Slot::kSelect);
  const SelectKernelTable* scalar = cpu::select_kernels_scalar();
  std::vector<NamedSet> out;
  for (int i = 0; i < info.count; ++i) {
    const cpu::KernelImpl& impl = info.impls[i];
    for (Isa level : all_isas()) {
      if (!isa_supported(level) || !isa_includes(level, impl.need) || !impl.get) continue;
      const auto* table = static_cast<const SelectKernelTable*>(impl.get(level));
      if (!table || table == scalar) continue;
      if (std::any_of(out.begin(), out.end(), [&](const NamedSet& s) { return s.table == table; })) continue;
      out.push_back({std::string(impl.name) + "@" + isa_name(level), table});
    }
  }
  return out;
}

// No vector level runs the scalar set, and each vector implementation is compared below.
TEST(SelectKernels, VectorLevelsHaveVectorSets) {
  const std::vector<NamedSet> sets = vector_sets();
  std::string names;
  for (const NamedSet& s : sets) names += s.name + " ";
  for (Isa level : all_isas()) {
    if (level == Isa::kScalar || !isa_supported(level)) continue;
    const cpu::KernelChoice c = cpu::choose_kernel_at(cpu::Slot::kSelect, level, "select_kernels_test");
    EXPECT_NE(c.table, static_cast<const void*>(cpu::select_kernels_scalar())) << isa_name(level);
  }
  if (isa_supported(Isa::kAvx2)) {
    EXPECT_NE(names.find("select_hwy@avx2"), std::string::npos) << names;
  }
  if (isa_supported(Isa::kAvx512)) {
    EXPECT_NE(names.find("select_hwy@avx512"), std::string::npos) << names;
  }
  std::printf("vector sets: %s\n", names.c_str());
}

// Raw element bits; `ties` draws from few values (dense hits, equal keys), otherwise any bits (NaNs too).
std::vector<uint8_t> random_row(Rng& rng, int64_t n, int elem_bytes, bool ties) {
  std::vector<uint8_t> row(size_t(n * elem_bytes));
  if (!ties) {
    for (auto& b : row) b = uint8_t(rng.bits32());
    return row;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float f = float(rng.uniform_int(-6, 6)) * 0.5f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (elem_bytes == 2) {
      const uint16_t h = uint16_t(bits >> 16);
      std::memcpy(row.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(row.data() + 4 * i, &bits, 4);
    }
  }
  return row;
}

int32_t key_of(const std::vector<uint8_t>& row, int elem_bytes, int64_t i) {
  if (elem_bytes == 2) {
    uint16_t h;
    std::memcpy(&h, row.data() + 2 * i, 2);
    return int32_t(int16_t(uint16_t(h ^ (uint16_t(int16_t(h) >> 15) & 0x7FFFu))));
  }
  uint32_t u;
  std::memcpy(&u, row.data() + 4 * i, 4);
  return int32_t(u ^ (uint32_t(int32_t(u) >> 31) & 0x7FFFFFFFu));
}

// The key that about `fraction` of the row exceeds (a sampled threshold: sparse hits).
int32_t key_quantile(const std::vector<uint8_t>& row, int elem_bytes, int64_t n, double fraction) {
  std::vector<int32_t> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = key_of(row, elem_bytes, i);
  std::sort(keys.begin(), keys.end());
  return keys[size_t(std::min<int64_t>(n - 1, int64_t(double(n) * (1.0 - fraction))))];
}

// A random row (no ties) sorted by key, rising: the hits of any threshold sit at its end (a streamed
// pass then finds its last segment's region full and scans again in one stream).
std::vector<uint8_t> rising_row(Rng& rng, int64_t n, int elem_bytes) {
  std::vector<uint8_t> row = random_row(rng, n, elem_bytes, false);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return key_of(row, elem_bytes, x) < key_of(row, elem_bytes, y); });
  std::vector<uint8_t> out(row.size());
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out.data() + i * elem_bytes, row.data() + order[size_t(i)] * elem_bytes, size_t(elem_bytes));
  return out;
}

TEST(SelectKernels, FilterMatchesScalar) {
  const SelectKernelTable* ref = cpu::select_kernels_scalar();
  Rng rng = Rng::for_current_test();
  for (const NamedSet& set : vector_sets()) {
    for (int elem : {2, 4})
      for (int64_t n : {1, 15, 16, 31, 33, 64, 127, 129, 1000, 4099, 20000, 40000})  // 40000 fp32: streams
        for (int kind : {0, 1, 2}) {                                                 // random bits, ties, rising
          const bool ties = kind == 1;
          if (kind == 2 && n < 20000) continue;
          const std::vector<uint8_t> row = kind == 2 ? rising_row(rng, n, elem) : random_row(rng, n, elem, ties);
          const int32_t sparse = key_quantile(row, elem, n, 0.01);
          for (int32_t threshold :
               {INT_MIN, -32769, -32768, -5, 0, sparse, 1 << 20, 32766, 32767, INT_MAX - 1, INT_MAX})
            for (int64_t cap : {int64_t(64), int64_t(100), int64_t(30000)})
              for (int64_t start : {int64_t(0), 3 % n})
                for (int hint : {0, 60, 1024}) {  // one-by-one appends, a choice per block, gathers
                  const int64_t size = cap + cpu::kSelectFilterSlack;
                  std::vector<int32_t> k1(size_t(size), -7), i1(size_t(size), -7), k2(size_t(size), -7),
                      i2(size_t(size), -7);
                  const int64_t count0 = cap > 64 ? 5 : 0;  // entries already in the buffer
                  cpu::SelectFilterArgs a{row.data(), elem,   start, n,       threshold, k1.data(),
                                          i1.data(),  count0, cap,   INT_MAX, INT_MIN,   hint};
                  cpu::SelectFilterArgs b = a;
                  b.keys = k2.data();
                  b.index = i2.data();
                  // Resume after a stop, like the driver after a flush.
                  for (int call = 0; call < 3; ++call) {
                    ref->filter(&a);
                    set.table->filter(&b);
                    const std::string what = set.name + " elem=" + std::to_string(elem) + " n=" + std::to_string(n) +
                                             " kind=" + std::to_string(kind) + " thr=" + std::to_string(threshold) +
                                             " cap=" + std::to_string(cap) + " hint=" + std::to_string(hint) +
                                             " call=" + std::to_string(call);
                    ASSERT_EQ(a.pos, b.pos) << what;
                    ASSERT_EQ(a.count, b.count) << what;
                    ASSERT_EQ(a.min_key, b.min_key) << what;
                    ASSERT_EQ(a.max_key, b.max_key) << what;
                    for (int64_t j = 0; j < a.count; ++j) {
                      ASSERT_EQ(k1[size_t(j)], k2[size_t(j)]) << what << " entry " << j;
                      ASSERT_EQ(i1[size_t(j)], i2[size_t(j)]) << what << " entry " << j;
                    }
                    if (a.pos == n) break;
                    a.count = b.count = a.count / 2;  // some room again
                  }
                }
        }
  }
}

TEST(SelectKernels, CompactMatchesScalar) {
  const SelectKernelTable* ref = cpu::select_kernels_scalar();
  Rng rng = Rng::for_current_test();
  for (const NamedSet& set : vector_sets())
    for (int64_t n : {1, 7, 8, 9, 16, 17, 100, 1001})
      for (int range : {3, 1000}) {
        std::vector<int32_t> keys(size_t(n + cpu::kSelectFilterSlack)), index(keys.size());
        for (int64_t i = 0; i < n; ++i) {
          keys[size_t(i)] = rng.uniform_int(-range, range);
          index[size_t(i)] = int32_t(rng.bits32());
        }
        const int32_t kth = keys[size_t(rng.index(n))];
        const int64_t equal = std::count(keys.begin(), keys.begin() + n, kth);
        for (int64_t take : {int64_t(0), int64_t(1), equal / 2, equal, equal + 3}) {
          std::vector<int32_t> k1 = keys, i1 = index, k2 = keys, i2 = index;
          const int64_t c1 = ref->compact(k1.data(), i1.data(), n, kth, take);
          const int64_t c2 = set.table->compact(k2.data(), i2.data(), n, kth, take);
          const std::string what = set.name + " n=" + std::to_string(n) + " take=" + std::to_string(take);
          ASSERT_EQ(c1, c2) << what;
          for (int64_t j = 0; j < c1; ++j) {
            ASSERT_EQ(k1[size_t(j)], k2[size_t(j)]) << what << " entry " << j;
            ASSERT_EQ(i1[size_t(j)], i2[size_t(j)]) << what << " entry " << j;
          }
        }
      }
}

TEST(SelectKernels, Bf16SampleAndCount2MatchScalar) {
  const SelectKernelTable* ref = cpu::select_kernels_scalar();
  Rng rng = Rng::for_current_test();
  for (const NamedSet& set : vector_sets()) {
    const int64_t n = 4099;
    const std::vector<uint8_t> row = random_row(rng, n, 2, false);
    for (int runs : {1, 7, 128}) {
      std::vector<int64_t> starts(static_cast<size_t>(runs));
      for (auto& s : starts) s = rng.index(n - 31);
      std::vector<int16_t> s1(size_t(32 * runs)), s2(s1.size());
      ref->bf16.sample(row.data(), starts.data(), runs, s1.data());
      set.table->bf16.sample(row.data(), starts.data(), runs, s2.data());
      ASSERT_EQ(s1, s2) << set.name << " runs=" << runs;
    }
    for (int64_t len : {0, 1, 15, 16, 17, 33, 100, 4096, 600001}) {
      std::vector<int16_t> keys(static_cast<size_t>(len));
      for (auto& k : keys) k = int16_t(len > 1000 ? rng.uniform_int(-40, 40) : int(rng.bits32()));
      for (const auto& t : {std::vector<int32_t>{-32768, 32767}, {0, 1}, {-3, 5}, {32767, -32768}}) {
        const int32_t tt[2] = {t[0], t[1]};
        int64_t c1[2], c2[2];
        ref->bf16.count2(keys.data(), len, tt, c1);
        set.table->bf16.count2(keys.data(), len, tt, c2);
        ASSERT_EQ(c1[0], c2[0]) << set.name << " len=" << len << " t=" << t[0];
        ASSERT_EQ(c1[1], c2[1]) << set.name << " len=" << len << " t=" << t[1];
      }
    }
  }
}

// Collect, then window keys and emit over the collected candidates.
TEST(SelectKernels, Bf16CollectWindowEmitMatchScalar) {
  const SelectKernelTable* ref = cpu::select_kernels_scalar();
  Rng rng = Rng::for_current_test();
  for (const NamedSet& set : vector_sets())
    for (int64_t n : {1, 31, 33, 129, 5000, 65536 + 77})  // 65536 elements: streams
      for (int kind : {0, 1, 2}) {                        // random bits, ties, rising
        const bool ties = kind == 1;
        if (kind == 2 && n < 5000) continue;
        const std::vector<uint8_t> row = kind == 2 ? rising_row(rng, n, 2) : random_row(rng, n, 2, ties);
        const int32_t sparse = key_quantile(row, 2, n, 0.02);
        for (int32_t lo : {-32769, -32768, -5, sparse, 32766, 32767})
          for (int64_t cap : {int64_t(64), int64_t(100), n + 64})
            for (int hint : {2, 60, 1024}) {  // sparse and dense collect passes
              const int64_t begin = n > 40 ? 7 : 0, end = std::min<int64_t>(n, begin + 65536);
              std::vector<int32_t> p1(size_t(cap + cpu::kSelectFilterSlack), -9), p2(p1);
              cpu::SelectCollectArgs a{row.data(), begin, end, begin, lo, p1.data(), 0, cap, INT_MAX, INT_MIN, hint};
              cpu::SelectCollectArgs b = a;
              b.packed = p2.data();
              ref->bf16.collect(&a);
              set.table->bf16.collect(&b);
              std::string what = set.name + " n=" + std::to_string(n) + " lo=" + std::to_string(lo) +
                                 " cap=" + std::to_string(cap) + " kind=" + std::to_string(kind) +
                                 " hint=" + std::to_string(hint);
              ASSERT_EQ(a.pos, b.pos) << what;
              ASSERT_EQ(a.count, b.count) << what;
              ASSERT_EQ(a.min_key, b.min_key) << what;
              ASSERT_EQ(a.max_key, b.max_key) << what;
              for (int64_t j = 0; j < a.count; ++j) ASSERT_EQ(p1[size_t(j)], p2[size_t(j)]) << what << " entry " << j;
              const int64_t count = a.count;
              if (count == 0) continue;

              // Window keys around a candidate's key.
              const int32_t mid = p1[size_t(rng.index(count))] >> 16;
              for (const auto& [wlo, whi] : {std::pair<int32_t, int32_t>{mid - 1, mid},
                                             {mid - 30, mid + 30},
                                             {-32769, 32767},
                                             {lo < -32768 ? -32769 : lo, std::max(lo + 1, mid)}}) {
                if (whi <= wlo || whi > 32767 || wlo < -32769) continue;
                std::vector<int16_t> w1(size_t(count + cpu::kSelectFilterSlack)), w2(w1.size());
                int64_t up1 = -1, up2 = -2;
                const int64_t n1 = ref->bf16.window_keys(p1.data(), count, wlo, whi, w1.data(), &up1);
                const int64_t n2 = set.table->bf16.window_keys(p1.data(), count, wlo, whi, w2.data(), &up2);
                ASSERT_EQ(n1, n2) << what << " window (" << wlo << ", " << whi << "]";
                ASSERT_EQ(up1, up2) << what;
                for (int64_t j = 0; j < n1; ++j) ASSERT_EQ(w1[size_t(j)], w2[size_t(j)]) << what << " key " << j;
              }

              // Emit at the k-th key `mid` with a quota of equal keys, into outputs with a guard zone.
              int64_t above = 0, equal = 0;
              for (int64_t j = 0; j < count; ++j) {
                above += (p1[size_t(j)] >> 16) > mid;
                equal += (p1[size_t(j)] >> 16) == mid;
              }
              for (int64_t take : {int64_t(0), int64_t(1), equal}) {
                const int64_t first = 3, selected = first + above + take;
                for (int mode = 0; mode < 8; ++mode) {
                  const int64_t size = selected + 40;
                  std::vector<int32_t> x1(size_t(size), 11), x2(x1), y1(x1), y2(x1);
                  std::vector<int64_t> l1(size_t(size), 12), l2(l1);
                  std::vector<uint16_t> v1(size_t(size), 13), v2(v1);
                  const bool idx64 = mode & 1, values = mode & 2, keys = mode & 4;
                  const int64_t offset = mode & 1 ? (int64_t(1) << 40) : -int64_t(rng.index(1000));
                  cpu::SelectEmitArgs e1{p1.data(),
                                         count,
                                         begin,
                                         mid,
                                         take,
                                         first,
                                         selected,
                                         offset,
                                         idx64 ? nullptr : x1.data(),
                                         idx64 ? l1.data() : nullptr,
                                         values ? v1.data() : nullptr,
                                         keys ? y1.data() : nullptr};
                  cpu::SelectEmitArgs e2{p1.data(),
                                         count,
                                         begin,
                                         mid,
                                         take,
                                         first,
                                         selected,
                                         offset,
                                         idx64 ? nullptr : x2.data(),
                                         idx64 ? l2.data() : nullptr,
                                         values ? v2.data() : nullptr,
                                         keys ? y2.data() : nullptr};
                  ref->bf16.emit(&e1);
                  set.table->bf16.emit(&e2);
                  const std::string w = what + " take=" + std::to_string(take) + " mode=" + std::to_string(mode);
                  ASSERT_EQ(e1.count, selected) << w;
                  ASSERT_EQ(e2.count, e1.count) << w;
                  ASSERT_EQ(e2.equal_left, e1.equal_left) << w;
                  ASSERT_EQ(x1, x2) << w;  // the guard zone past `selected` included
                  ASSERT_EQ(l1, l2) << w;
                  ASSERT_EQ(v1, v2) << w;
                  ASSERT_EQ(y1, y2) << w;
                }
              }
            }
      }
}

}  // namespace
}  // namespace tessera::test
