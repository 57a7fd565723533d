// The MLA engine: runs the units of a schedule on the thread pool and combines split parts.
//
// A unit is (group, row block, split): at most kMlaMaxRows query rows of one group attending to the
// split's slice [n*s/ns, n*(s+1)/ns) of the group's token list, tile by tile (online softmax). Units of
// schedule part p run on thread p mod T in a fixed order. A group with one split stores its rows directly;
// otherwise every split but the last to finish writes (normalised out, lse, max) to a partial slot, and
// the last one merges all splits in split order (its own rows from its buffers, still in cache) and
// stores them. Which thread runs a unit, or which split finishes last, never changes the arithmetic, and
// the splits depend only on the schedule, so results are identical for every thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "attention/flash_mla/mla_task.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Unit {
  int64_t group;
  int row0, nrows;
  int split, num_splits;
  int64_t partial;  // first partial slot of (group, row block), or -1 when num_splits == 1
  int64_t head;     // index of (group, row block) among the split ones (its finish counter), or -1
};

// Partial results of split units: per slot, rows x (d_v outputs + lse + max).
struct Partials {
  float* data = nullptr;
  int64_t stride = 0;  // floats per row
  int max_rows = 0;
  float* row(int64_t slot, int r) const { return data + (slot * max_rows + r) * stride; }
};

// Per-thread buffers of one unit.
struct UnitBuffers {
  void* q_rows;
  void* q_packed;
  float* o;
  float* row_max;
  float* row_sum;
  int64_t* limit;
  int* visible;
  void* tile;
  const void** tile_rows;
  void* v_tile;  // separate V rows (separate_v tasks only)
  const void** v_tile_rows;
  void* kernel_scratch;
};

UnitBuffers unit_buffers(const MlaTask& t, int nrows) {
  const cpu::MlaKernelSet& ks = *t.kernels;
  const size_t es = ks.elem == cpu::MlaElem::kBF16 ? 2 : 4;
  UnitBuffers b;
  b.q_rows = thread_scratch(0, size_t(nrows) * t.d_qk * es);
  b.q_packed = thread_scratch(1, ks.q_packed_bytes(nrows, t.d_qk));
  // o [nrows][d_v] | row_max [nrows] | row_sum [nrows] | limit [nrows] int64 | visible [nrows] int, each
  // piece 64-byte aligned.
  const auto round64 = [](size_t x) { return (x + 63) & ~size_t(63); };
  const size_t o_bytes = round64(size_t(nrows) * t.d_v * 4), row_bytes = round64(size_t(nrows) * 8);
  char* state = static_cast<char*>(thread_scratch(2, o_bytes + 4 * row_bytes));
  b.o = reinterpret_cast<float*>(state);
  b.row_max = reinterpret_cast<float*>(state + o_bytes);
  b.row_sum = reinterpret_cast<float*>(state + o_bytes + row_bytes);
  b.limit = reinterpret_cast<int64_t*>(state + o_bytes + 2 * row_bytes);
  b.visible = reinterpret_cast<int*>(state + o_bytes + 3 * row_bytes);
  b.kernel_scratch = thread_scratch(3, ks.scratch_bytes(nrows, t.d_qk, t.d_v));
  char* tile = static_cast<char*>(thread_scratch(4, size_t(ks.tile_tokens) * (t.d_qk * es + sizeof(void*)) + 64));
  b.tile_rows = reinterpret_cast<const void**>(tile);
  b.tile = tile + ((size_t(ks.tile_tokens) * sizeof(void*) + 63) & ~size_t(63));
  b.v_tile = nullptr;
  b.v_tile_rows = nullptr;
  if (t.separate_v) {
    char* v = static_cast<char*>(thread_scratch(5, size_t(ks.tile_tokens) * (t.d_v * es + sizeof(void*)) + 64));
    b.v_tile_rows = reinterpret_cast<const void**>(v);
    b.v_tile = v + ((size_t(ks.tile_tokens) * sizeof(void*) + 63) & ~size_t(63));
  }
  return b;
}

// The next tile's prefetches, issued in parts while the kernel works on the current tile.
struct NextTile {
  const MlaTask* task;
  const TokenList* list;
  int64_t p;
  int nt;
};

void prefetch_part(void* ctx, int part, int parts) {
  const NextTile& n = *static_cast<const NextTile*>(ctx);
  const int b = int(int64_t(n.nt) * part / parts), e = int(int64_t(n.nt) * (part + 1) / parts);
  if (b < e) n.task->prefetch(*n.list, n.p + b, e - b);
}

// Attends rows [row0, row0 + nrows) of the unit's group to list positions [p0, p1); leaves the running
// max, sum and unnormalised output in b.
void attend(const MlaTask& t, const TokenList& list, const Unit& u, int64_t p0, int64_t p1, const UnitBuffers& b) {
  const cpu::MlaKernelSet& ks = *t.kernels;
  t.load_q(u.group, u.row0, u.nrows, b.q_rows);
  ks.pack_q(b.q_rows, u.nrows, t.d_qk, b.q_packed);
  std::fill(b.row_max, b.row_max + u.nrows, -kInf);
  std::fill(b.row_sum, b.row_sum + u.nrows, 0.0f);
  int64_t min_limit = p1, max_limit = p0;
  for (int r = 0; r < u.nrows; ++r) {
    b.limit[r] = t.visible_tokens(u.group, u.row0 + r, list.n);
    min_limit = std::min(min_limit, b.limit[r]);
    max_limit = std::max(max_limit, b.limit[r]);
  }
  const int tile = ks.tile_tokens;
  const int64_t end = std::min(p1, max_limit);  // no row sees past its limit
  // A set with fresh_o writes o on the first tile; with no tile at all, o is zero.
  if (!ks.fresh_o || p0 >= end) std::fill(b.o, b.o + size_t(u.nrows) * t.d_v, 0.0f);
  // The first tile's rows are cold: one burst of prefetches lets their misses overlap (reading cold
  // scattered rows one by one waits on each row's lines in turn, ~2.5x slower).
  if (t.rows_scattered() && p0 < end) t.prefetch(list, p0, int(std::min<int64_t>(tile, end - p0)));
  for (int64_t p = p0; p < end; p += tile) {
    const int nt = int(std::min<int64_t>(tile, end - p));
    const int* visible = nullptr;
    if (min_limit < p + nt) {
      for (int r = 0; r < u.nrows; ++r) b.visible[r] = int(std::clamp<int64_t>(b.limit[r] - p, 0, nt));
      visible = b.visible;
    }
    t.fetch(list, p, nt, b.tile, b.tile_rows);
    if (t.separate_v) t.fetch_v(list, p, nt, b.v_tile, b.v_tile_rows);
    NextTile next{&t, &list, p + tile, int(std::clamp<int64_t>(end - p - tile, 0, tile))};
    cpu::MlaTileArgs a;
    a.q_packed = b.q_packed;
    a.m = u.nrows;
    a.d_qk = t.d_qk;
    a.d_v = t.d_v;
    a.scale = t.scale;
    a.k_rows = b.tile_rows;
    a.v_rows = t.separate_v ? b.v_tile_rows : nullptr;
    a.nt = nt;
    a.visible = visible;
    a.o = b.o;
    a.row_max = b.row_max;
    a.row_sum = b.row_sum;
    a.scratch = b.kernel_scratch;
    a.progress = next.nt > 0 ? prefetch_part : nullptr;
    a.progress_ctx = &next;
    a.o_fresh = ks.fresh_o && p == p0;
    ks.attend_tile(a);
  }
  if (ks.o_to_natural) ks.o_to_natural(b.o, u.nrows, t.d_v);
}

// Normalises a row of o into dst (which may be o); returns its lse (natural log; -inf when it saw nothing). A NaN score
// (a NaN in q or in a visible key) has made the row's sum NaN: the row becomes NaN, as on the GPU, rather than the "no
// valid token" answer.
float finish_row(const float* o, int d_v, float row_max, float row_sum, float* dst) {
  if (std::isnan(row_sum)) {
    std::fill(dst, dst + d_v, std::numeric_limits<float>::quiet_NaN());
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (!(row_sum > 0)) {
    std::fill(dst, dst + d_v, 0.0f);
    return -kInf;
  }
  const float inv = 1.0f / row_sum;
  for (int c = 0; c < d_v; ++c) dst[c] = o[c] * inv;
  return float(double(row_max) + std::log(double(row_sum)));
}
float finish_row(float* o, int d_v, float row_max, float row_sum) {
  return finish_row(o, d_v, row_max, row_sum, o);
}

// One split's row r: its normalised out (d_v floats), lse and max.
struct SplitRow {
  const float* out;
  float lse, max;
};

// Merges the num_splits parts of row r of a (group, row block) in split order and stores it; part s
// is split_row(s). o: d_v floats of scratch.
template <class PartRow>
void combine_row(const MlaTask& t, const Unit& u, int r, PartRow split_row, float* o) {
  float lse_max = -kInf, max_logit = -kInf;
  bool nan = false;
  for (int s = 0; s < u.num_splits; ++s) {
    const SplitRow p = split_row(s);
    nan |= std::isnan(p.lse);
    lse_max = std::max(lse_max, p.lse);
    max_logit = std::max(max_logit, p.max);
  }
  if (nan) {  // a split saw a NaN score: the whole row is NaN (finish_row)
    const float q_nan = std::numeric_limits<float>::quiet_NaN();
    std::fill(o, o + t.d_v, q_nan);
    t.store(u.group, u.row0 + r, o, q_nan, q_nan);
    return;
  }
  std::fill(o, o + t.d_v, 0.0f);
  if (lse_max == -kInf) {
    t.store(u.group, u.row0 + r, o, kInf, -kInf);
    return;
  }
  double total = 0;
  for (int s = 0; s < u.num_splits; ++s) total += std::exp(double(split_row(s).lse) - lse_max);
  const double lse = double(lse_max) + std::log(total);
  for (int s = 0; s < u.num_splits; ++s) {
    const SplitRow p = split_row(s);
    const float w = float(std::exp(double(p.lse) - lse));
    if (w == 0) continue;
    for (int c = 0; c < t.d_v; ++c) o[c] += w * p.out[c];
  }
  t.store(u.group, u.row0 + r, o, float(lse), max_logit);
}

void run_unit(const MlaTask& t, const Unit& u, TokenList* list, const Partials& parts, std::atomic<int>* finished) {
  if (list->group != u.group) {
    t.open_group(u.group, list);
    list->group = u.group;
  }
  const int64_t n = list->n;
  const int64_t p0 = n * u.split / u.num_splits, p1 = n * (u.split + 1) / u.num_splits;
  const UnitBuffers b = unit_buffers(t, u.nrows);
  attend(t, *list, u, p0, p1, b);
  if (u.partial < 0) {
    for (int r = 0; r < u.nrows; ++r) {
      float* o = b.o + size_t(r) * t.d_v;
      const float lse = finish_row(o, t.d_v, b.row_max[r], b.row_sum[r]);
      t.store(u.group, u.row0 + r, o, lse == -kInf ? kInf : lse, std::isnan(lse) ? lse : b.row_max[r]);
    }
    return;
  }
  // Publish unless this is the last part to finish; the last one merges (acq_rel: it sees every other
  // part's rows, and the others' writes come before their increments). Published rows are normalised
  // straight into the partial slot; the last part's in place, with row r's lse and max in own[2r],
  // own[2r + 1].
  const bool last = finished[u.head].load(std::memory_order_acquire) == u.num_splits - 1;
  float* own = static_cast<float*>(thread_scratch(6, size_t(u.nrows) * 2 * 4));
  if (!last) {
    for (int r = 0; r < u.nrows; ++r) {
      float* dst = parts.row(u.partial + u.split, r);
      const float lse = finish_row(b.o + size_t(r) * t.d_v, t.d_v, b.row_max[r], b.row_sum[r], dst);
      dst[t.d_v] = lse;
      dst[t.d_v + 1] = std::isnan(lse) ? lse : b.row_max[r];
    }
    if (finished[u.head].fetch_add(1, std::memory_order_acq_rel) != u.num_splits - 1) return;
    // Another part finished in between and left the merge to this one: its rows are in place now.
  } else {
    for (int r = 0; r < u.nrows; ++r) {
      const float lse = finish_row(b.o + size_t(r) * t.d_v, t.d_v, b.row_max[r], b.row_sum[r]);
      own[2 * r] = lse;
      own[2 * r + 1] = std::isnan(lse) ? lse : b.row_max[r];
    }
  }
  float* merged = static_cast<float*>(thread_scratch(7, size_t(t.d_v) * 4));
  for (int r = 0; r < u.nrows; ++r)
    combine_row(
        t, u, r,
        [&](int s) -> SplitRow {
          if (s == u.split && last) return {b.o + size_t(r) * t.d_v, own[2 * r], own[2 * r + 1]};
          const float* row = parts.row(u.partial + s, r);
          return {row, row[t.d_v], row[t.d_v + 1]};
        },
        merged);
}

}  // namespace

int64_t row_blocks(int64_t rows) {
  return (rows + cpu::kMlaMaxRows - 1) / cpu::kMlaMaxRows;
}

void run_mla(const MlaTask& t, const Schedule& schedule) {
  if (t.rows == 0 || t.groups() == 0) return;  // nothing to compute or store (e.g. s_q == 0)
  // Group g's rows in balanced blocks of at most kMlaMaxRows; fn(row0, nrows) per block.
  auto for_each_block = [&](int64_t g, auto&& fn) {
    const int64_t rows = t.rows_of(g), blocks = row_blocks(rows);
    for (int64_t rb = 0; rb < blocks; ++rb) {
      const int64_t r0 = rows * rb / blocks, r1 = rows * (rb + 1) / blocks;
      fn(int(r0), int(r1 - r0));
    }
  };
  // Partial slots of every split (group, row block), in group order: first_slot[g] is group g's first,
  // first_head[g] the index of its first split (group, row block).
  std::vector<int64_t> first_slot(size_t(t.groups()), -1), first_head(size_t(t.groups()), -1);
  int64_t slots = 0, heads = 0;
  for (int64_t req = 0; req < t.requests; ++req) {
    const int ns = schedule.num_splits[req + 1] - schedule.num_splits[req];
    if (ns <= 1) continue;
    for (int64_t g = req * t.groups_per_request; g < (req + 1) * t.groups_per_request; ++g) {
      first_slot[size_t(g)] = slots;
      first_head[size_t(g)] = heads;
      for_each_block(g, [&](int, int) {
        slots += ns;
        ++heads;
      });
    }
  }
  // Units part by part.
  std::vector<Unit> units;
  std::vector<int64_t> part_begin;
  for (int64_t p = 0; p < schedule.parts; ++p) {
    part_begin.push_back(int64_t(units.size()));
    const int32_t* row = schedule.tile_scheduler_metadata.data() + p * 8;
    int64_t req = row[0], split = row[1];
    for (int64_t item = row[4]; item < row[5]; ++item) {
      const int ns = schedule.num_splits[req + 1] - schedule.num_splits[req];
      for (int64_t g = req * t.groups_per_request; g < (req + 1) * t.groups_per_request; ++g) {
        int64_t slot = first_slot[size_t(g)], head = first_head[size_t(g)];
        for_each_block(g, [&](int row0, int nrows) {
          units.push_back({g, row0, nrows, int(split), ns, slot, head});
          if (slot >= 0) {
            slot += ns;
            ++head;
          }
        });
      }
      if (++split == ns) {
        split = 0;
        ++req;
      }
    }
  }
  part_begin.push_back(int64_t(units.size()));

  static thread_local AlignedPtr<float> partial_storage;
  static thread_local size_t partial_capacity = 0;
  Partials parts;
  parts.stride = (t.d_v + 2 + 15) & ~int64_t(15);
  parts.max_rows = cpu::kMlaMaxRows;
  const size_t need = size_t(slots) * size_t(parts.max_rows) * size_t(parts.stride);
  if (need > partial_capacity) {
    partial_storage = aligned_array<float>(need);
    partial_capacity = need;
  }
  parts.data = partial_storage.get();
  // Parts finished per split (group, row block): the last one merges (run_unit).
  std::unique_ptr<std::atomic<int>[]> finished(new std::atomic<int>[size_t(heads)]);
  for (int64_t i = 0; i < heads; ++i) finished[size_t(i)].store(0, std::memory_order_relaxed);

  const int64_t num_parts = schedule.parts;
  parallel_shares(
      [&](int tid, int nthreads) {
        static thread_local TokenList list;
        list.group = -1;
        for (int64_t p = tid; p < num_parts; p += nthreads)
          for (int64_t i = part_begin[p]; i < part_begin[p + 1]; ++i)
            run_unit(t, units[size_t(i)], &list, parts, finished.get());
      },
      int(std::min<int64_t>(num_parts, num_threads())));
}

}  // namespace tessera::flash_mla
