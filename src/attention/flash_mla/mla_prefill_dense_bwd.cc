// flash_attn_varlen_bwd: the dense MHA prefill backward (FlashAttention-2 style, FlashMLA's API,
// docs/attention.md). Group (request i, KV head g) has rows r = (query j, head of the group) as in the
// forward. P = exp(scale * q.k - lse) is recomputed from the forward's lse. The five products per tile
// pair run on the level's GEMM kernel set (Slot::kMlaBwd: AMX tiles, vdpbf16ps or fp32 FMA; bf16 inputs
// give bf16 operands, so P and dS are rounded to bf16 as on GPUs; fp32 sums), the element-wise steps in
// fp32. Groups are handled in batches whose operands (and stored P, dS) fit a memory budget, in three
// phases over tasks claimed by the pool's threads:
//  1. gather each row tile's q, dO and key tile's k, v into contiguous operands and pack every B side
//     once (K, V, K^T per key tile); per row tile Q^T, dO^T as A sides (or, recomputing, Q, dO, Q^T, dO^T
//     packed as B sides);
//  2. per (i, g, row tile), over key tiles: S = Q K^T, dP = dO V^T, delta = sum_t P dP - dlse (fp32 from
//     fp32 P and dP: rowsum(dO * O) over the bf16 `out` would cancel badly when a row sees few keys); then
//     dS = P (dP - delta) and dQ = scale * sum dS K (P and dP kept from the first sweep when they fit),
//     and P, dS stored as B sides for step 3;
//  3. per (i, g, key tile), over row tiles: dV^T = sum dO^T P, dK^T = scale * sum Q^T dS on the stored
//     P and dS; groups whose store would exceed bwd_store_limit() recompute S^T = K Q^T, dP^T = V dO^T, P
//     and dS here instead, then dV = sum P^T dO, dK = scale * sum dS^T Q.
// Every output element is summed by one task in a fixed tile order, so the bits do not depend on the
// thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "attention/flash_mla/mla_bwd_products.h"
#include "attention/flash_mla/mla_bwd_store_limit.h"
#include "attention/flash_mla/mla_rows.h"
#include "attention/flash_mla/mla_varlen_args.h"
#include "backends/cpu/mla_bwd_kernel_set.h"
#include "backends/cpu/registry.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

constexpr const char* kFn = "flash_attn_varlen_bwd";
// Gathered and packed operands of one batch of groups (about 4.5x their bf16 inputs) stay under this.
constexpr size_t kBatchBytes = size_t(512) << 20;
// A row task keeps its first sweep's P and dP for the second when they take at most this much.
constexpr size_t kStashBytes = size_t(8) << 20;
// The calling thread keeps a batch arena up to this size between calls (fresh pages cost a fault each).
constexpr size_t kKeptArenaBytes = size_t(64) << 20;
// The row pass stores P and dS for the key pass when every group's take at most this much (the default of
// bwd_store_limit)...
std::atomic<size_t> store_group_bytes{size_t(32) << 20};
// ...and a batch then holds groups whose stores add up to at most this per thread (at least one group), so
// that what the row pass writes is still in the threads' L2 when the key pass reads it (measured:
// docs/notes/2026-12-05-fmha-backward-amx.md).
constexpr size_t kStoreBatchBytesPerThread = size_t(2) << 20;

size_t align64(size_t x) {
  return (x + 63) & ~size_t(63);
}
int round_up(int x, int to) {
  return (x + to - 1) / to * to;
}

// Register tiles of the products; every B side is packed for the tile of its product.
struct Tiles {
  cpu::GemmTile s, dq, st, dv, dk;  // S and dP | dQ | S^T and dP^T | dV | dK
  cpu::GemmTile dvt, dkt;           // stored P and dS: dV^T = dO^T P | dK^T = Q^T dS
};

struct Problem {
  VarlenLayout l;
  TensorView q, k, v, out, lse, dout, dq, dk, dv;
  const TensorView* dlse = nullptr;
  int64_t hp = 1;  // query heads per KV head
  float scale = 0;
  bool causal = false;
  const cpu::MlaBwdTileOps* ops = nullptr;
  BwdGemm gemm;
  Tiles tiles;
  bool bf16_ops = false;     // operands in bf16 (else fp32)
  bool store_pds = false;    // the row pass keeps P and dS for the key pass (else it recomputes them)
  bool pair_panels = false;  // bf16 operands packed as K pairs: the tile ops write stored P, dS as b-panels
  int R = 0, T = 0;          // query rows per row tile, keys per key tile
  std::vector<float> delta;  // [total_q * h_q]: sum_t P dP - dlse, written by the row pass

  int64_t rows(int64_t i) const { return l.q_len[size_t(i)] * hp; }
  // Keys row r of request i sees (a prefix of the request's keys).
  int64_t visible(int64_t i, int64_t r) const {
    const int64_t n = l.kv_len[size_t(i)];
    return causal ? std::clamp<int64_t>(n - l.q_len[size_t(i)] + r / hp + 1, 0, n) : n;
  }
  int64_t token(int64_t i, int64_t r) const { return l.q_begin[size_t(i)] + r / hp; }
  int64_t head(int64_t g, int64_t r) const { return g * hp + r % hp; }
  float lse_of(int64_t i, int64_t g, int64_t r) const {
    return lse.ptr<float>()[token(i, r) * lse.strides[0] + head(g, r) * lse.strides[1]];
  }
  float delta_of(int64_t i, int64_t g, int64_t r) const { return delta[size_t(token(i, r) * l.h_q + head(g, r))]; }
};

// Bytes of each packed form of one tile (a whole tile's worth, also for a shorter last tile).
struct PackSizes {
  size_t kb, vb, ktb, qb, dob, qtb, dotb;
  size_t qta, dota;    // store_pds: Q^T and dO^T of a row tile prepared as A sides
  size_t pb_p, pb_ds;  // store_pds: one tile pair's P and dS packed as B sides (K = the tile's rows)
  bool store = false;
  PackSizes(const Problem& pb) : store(pb.store_pds) {
    const BwdGemm& m = pb.gemm;
    const int dq = int(pb.l.d_qk), dv = int(pb.l.d_v), R = pb.R, T = pb.T;
    kb = align64(m.packed_b_bytes(pb.tiles.s.nr, T, dq));
    vb = align64(m.packed_b_bytes(pb.tiles.s.nr, T, dv));
    ktb = align64(m.packed_b_bytes(pb.tiles.dq.nr, dq, T));
    qb = align64(m.packed_b_bytes(pb.tiles.st.nr, R, dq));
    dob = align64(m.packed_b_bytes(pb.tiles.st.nr, R, dv));
    qtb = align64(m.packed_b_bytes(pb.tiles.dk.nr, dq, R));
    dotb = align64(m.packed_b_bytes(pb.tiles.dv.nr, dv, R));
    qta = align64(m.prepared_a_bytes(dq, R));
    dota = align64(m.prepared_a_bytes(dv, R));
    pb_p = align64(m.packed_b_bytes(pb.tiles.dvt.nr, T, R));
    pb_ds = align64(m.packed_b_bytes(pb.tiles.dkt.nr, T, R));
  }
  // Bytes of a group's stored P and dS (every tile pair, whole tiles).
  size_t stored_bytes(const Problem& pb, int64_t rows, int64_t keys) const {
    return size_t((rows + pb.R - 1) / pb.R) * size_t((keys + pb.T - 1) / pb.T) * (pb_p + pb_ds);
  }
  size_t key_tile() const { return kb + vb + ktb; }
  // Recomputing: Q, dO, Q^T, dO^T packed as B sides; storing: Q^T, dO^T prepared as A sides.
  size_t row_tile() const { return store ? qta + dota : qb + dob + qtb + dotb; }
};

// One group's operands inside the batch arena.
struct Group {
  int64_t i, g;
  int64_t rows, keys;
  char* q;  // [rows][d_qk] operands, then dO [rows][d_v]
  char* dout;
  char* k;  // [keys][d_qk], then v [keys][d_v]
  char* v;
  char* row_packs;   // per row tile: Q, dO, Q^T, dO^T packed
  char* key_packs;   // per key tile: K, V, K^T packed
  char* pds;         // store_pds: per (row tile, key tile), row-tile major: P then dS packed
  size_t row_task0;  // index of the group's first row tile among the batch's row tasks

  // The stored P of the pair (row tile starting at r0, key tile starting at k0); dS follows it.
  char* stored(const PackSizes& ps, const Problem& pb, int64_t r0, int64_t k0) const {
    const int64_t key_tiles = (keys + pb.T - 1) / pb.T;
    return pds + size_t((r0 / pb.R) * key_tiles + k0 / pb.T) * (ps.pb_p + ps.pb_ds);
  }
};

size_t group_bytes(const Problem& pb, const PackSizes& ps, int64_t rows, int64_t keys) {
  const size_t es = pb.bf16_ops ? 2 : 4;
  const int R = pb.R, T = pb.T;
  const int64_t row_tiles = (rows + R - 1) / R, key_tiles = (keys + T - 1) / T;
  return align64(size_t(rows) * size_t(pb.l.d_qk + pb.l.d_v) * es) * 2 +
         align64(size_t(keys) * size_t(pb.l.d_qk + pb.l.d_v) * es) * 2 + size_t(row_tiles) * ps.row_tile() +
         size_t(key_tiles) * ps.key_tile() + (pb.store_pds ? ps.stored_bytes(pb, rows, keys) : 0);
}

// Buffers of one thread.
struct Scratch {
  AlignedPtr<char> a1, a2, a3, a4, op1, op2;
  AlignedPtr<float> s, dp, acc1, acc2, stash, lse, delta, unused, column;
  AlignedPtr<int> vis;
  size_t stash_floats = 0;
  int64_t ld_tile = 0;  // row stride of s and dp

  std::vector<int64_t> shape;  // what the sizes below were made for

  static std::vector<int64_t> shape_of(const Problem& pb) {
    const Tiles& t = pb.tiles;
    return {pb.l.d_qk, pb.l.d_v, pb.R, pb.T, int64_t(pb.bf16_ops), reinterpret_cast<intptr_t>(pb.gemm.ks),
            t.s.nr,    t.st.nr};
  }

  explicit Scratch(const Problem& pb) : shape(shape_of(pb)) {
    const BwdGemm& m = pb.gemm;
    const int dq = int(pb.l.d_qk), dv = int(pb.l.d_v), d = std::max(dq, dv), R = pb.R, T = pb.T, n = std::max(R, T);
    const size_t fixed_a = m.prepared_a_bytes(n, d), step_a = m.prepared_a_bytes(n, n);
    a1 = aligned_array<char>(fixed_a);
    a2 = aligned_array<char>(fixed_a);
    a3 = aligned_array<char>(step_a);
    a4 = aligned_array<char>(step_a);
    op1 = aligned_array<char>(size_t(n) * n * 4);
    op2 = aligned_array<char>(size_t(n) * n * 4);
    ld_tile = std::max(round_up(T, pb.tiles.s.nr), round_up(R, pb.tiles.st.nr));
    s = aligned_array<float>(size_t(n) * size_t(ld_tile));
    dp = aligned_array<float>(size_t(n) * size_t(ld_tile));
    const int ld_acc = round_up(d, 48);  // room for any tile's last panel
    // Transposed accumulators (dV^T, dK^T): d rows (to whole register tiles) of the keys' panels.
    const size_t transposed = size_t(round_up(d, 32)) * size_t(round_up(T, 48) + 48);
    acc1 = aligned_array<float>(std::max(size_t(n) * size_t(ld_acc + 48), transposed));
    acc2 = aligned_array<float>(std::max(size_t(n) * size_t(ld_acc + 48), transposed));
    column = aligned_array<float>(size_t(d));
    lse = aligned_array<float>(size_t(n));
    delta = aligned_array<float>(size_t(n));
    unused = aligned_array<float>(size_t(n));
    vis = aligned_array<int>(size_t(n));
  }
  float* stash_of(size_t floats) {
    if (floats > stash_floats) {
      stash = aligned_array<float>(floats);
      stash_floats = floats;
    }
    return stash.get();
  }
};

int64_t acc_ld(int d, const cpu::GemmTile& t) {
  return round_up(d, t.nr);
}

// The calling thread's buffers, kept between calls of the same shape (no page faults per call).
Scratch& scratch_for(const Problem& pb) {
  thread_local std::unique_ptr<Scratch> kept;
  if (!kept || kept->shape != Scratch::shape_of(pb)) kept = std::make_unique<Scratch>(pb);
  return *kept;
}

// Runs body(task, scratch) for tasks [0, n), claimed one at a time by the pool's threads.
template <typename Body>
void run_tasks(const Problem& pb, int64_t n, const Body& body) {
  std::atomic<int64_t> next{0};
  parallel_shares([&](int, int) {
    Scratch& s = scratch_for(pb);
    for (int64_t t = next.fetch_add(1); t < n; t = next.fetch_add(1)) body(t, s);
  });
}

// A batch's operands: the calling thread's kept arena when large enough, else a fresh one (kept when small).
char* batch_arena(size_t bytes, AlignedPtr<char>* fresh) {
  thread_local AlignedPtr<char> kept;
  thread_local size_t kept_bytes = 0;
  if (bytes <= kept_bytes) return kept.get();
  if (bytes > kKeptArenaBytes) {
    *fresh = aligned_array<char>(bytes);
    return fresh->get();
  }
  kept = aligned_array<char>(bytes);
  kept_bytes = bytes;
  return kept.get();
}

// n elements of t[token, head, :] (bf16|fp16, any element stride) as operands: bf16 copied, else fp32.
void gather(const Problem& pb, const TensorView& t, int64_t token, int64_t head, int64_t n, char* dst) {
  const uint16_t* s = t.ptr<uint16_t>() + token * t.strides[0] + head * t.strides[1];
  const int64_t st = t.strides[2];
  if (pb.bf16_ops) {
    uint16_t* d = reinterpret_cast<uint16_t*>(dst);
    if (st == 1) {
      std::memcpy(d, s, size_t(n) * 2);
    } else {
      for (int64_t c = 0; c < n; ++c) d[c] = s[c * st];
    }
    return;
  }
  float* d = reinterpret_cast<float*>(dst);
  if (t.dtype == DType::kBF16) {
    for (int64_t c = 0; c < n; ++c) d[c] = bf16_to_f32(s[c * st]);
  } else {
    for (int64_t c = 0; c < n; ++c) d[c] = f16_to_f32(s[c * st]);
  }
}

cpu::GemmSrc src(const Problem& pb, const char* data, int64_t stride_r, int64_t stride_k) {
  return cpu::GemmSrc{data, pb.bf16_ops ? cpu::GemmSrcType::kBF16 : cpu::GemmSrcType::kF32, stride_r, stride_k};
}

struct TileTask {
  const Group* gr;
  int64_t start;  // first row (row tiles) or key (key tiles)
};

// Gathers every tile's operands and packs (or prepares) them; with store_pds, row task n's Q^T and dO^T
// A sides go to (*row_prep)[2n] and [2n + 1].
void gather_and_pack(const Problem& pb, const PackSizes& ps, const std::vector<TileTask>& row_tasks,
                     const std::vector<TileTask>& key_tasks, std::vector<BwdGemm::Prepared>* row_prep) {
  const int dq = int(pb.l.d_qk), dv = int(pb.l.d_v), R = pb.R, T = pb.T;
  const size_t es = pb.bf16_ops ? 2 : 4;
  const BwdGemm& m = pb.gemm;
  const int64_t n_rows = int64_t(row_tasks.size());
  run_tasks(pb, n_rows + int64_t(key_tasks.size()), [&](int64_t n, Scratch&) {
    if (n < n_rows) {
      const TileTask& t = row_tasks[size_t(n)];
      const Group& gr = *t.gr;
      const int nr = int(std::min<int64_t>(R, gr.rows - t.start));
      char* q = gr.q + size_t(t.start) * dq * es;
      char* o = gr.dout + size_t(t.start) * dv * es;
      for (int x = 0; x < nr; ++x) {
        const int64_t r = t.start + x, tok = pb.token(gr.i, r), h = pb.head(gr.g, r);
        gather(pb, pb.q, tok, h, dq, q + size_t(x) * dq * es);
        gather(pb, pb.dout, tok, h, dv, o + size_t(x) * dv * es);
      }
      char* pk = gr.row_packs + size_t(t.start / R) * ps.row_tile();
      if (pb.store_pds) {
        (*row_prep)[size_t(2 * n)] = m.prepare_a(src(pb, q, 1, dq), dq, nr, pk);
        (*row_prep)[size_t(2 * n + 1)] = m.prepare_a(src(pb, o, 1, dv), dv, nr, pk + ps.qta);
        return;
      }
      m.pack_b(pb.tiles.st.nr, src(pb, q, dq, 1), nr, dq, pk);
      m.pack_b(pb.tiles.st.nr, src(pb, o, dv, 1), nr, dv, pk + ps.qb);
      m.pack_b(pb.tiles.dk.nr, src(pb, q, 1, dq), dq, nr, pk + ps.qb + ps.dob);
      m.pack_b(pb.tiles.dv.nr, src(pb, o, 1, dv), dv, nr, pk + ps.qb + ps.dob + ps.qtb);
      return;
    }
    const TileTask& t = key_tasks[size_t(n - n_rows)];
    const Group& gr = *t.gr;
    const int nk = int(std::min<int64_t>(T, gr.keys - t.start));
    char* k = gr.k + size_t(t.start) * dq * es;
    char* v = gr.v + size_t(t.start) * dv * es;
    for (int x = 0; x < nk; ++x) {
      const int64_t tok = pb.l.kv_begin[size_t(gr.i)] + t.start + x;
      gather(pb, pb.k, tok, gr.g, dq, k + size_t(x) * dq * es);
      gather(pb, pb.v, tok, gr.g, dv, v + size_t(x) * dv * es);
    }
    char* pk = gr.key_packs + size_t(t.start / T) * ps.key_tile();
    m.pack_b(pb.tiles.s.nr, src(pb, k, dq, 1), nk, dq, pk);
    m.pack_b(pb.tiles.s.nr, src(pb, v, dv, 1), nk, dv, pk + ps.kb);
    m.pack_b(pb.tiles.dq.nr, src(pb, k, 1, dq), dq, nk, pk + ps.kb + ps.vb);
  });
}

void store(const TensorView& t, int64_t token, int64_t head, const float* row, int64_t n, float factor) {
  const size_t es = t.dtype == DType::kF32 ? 4 : 2;
  char* dst = static_cast<char*>(t.data) + size_t(token * t.strides[0] + head * t.strides[1]) * es;
  store_row(row, n, factor, t.dtype, dst);
}

// Rows x cols of t[token0 + x, head, c] from a transposed fp32 block (acc[c * ld + x], scaled in place by
// factor): bf16 and fp32 through the level's finalize (a vectorised transpose), fp16 (or a level without
// one) a column at a time. Each element is rounded once from acc * factor, as store() does.
void store_transposed(const TensorView& t, int64_t token0, int64_t head, float* acc, int64_t ld, int rows, int cols,
                      float factor, float* column) {
  if (factor != 1.0f)
    for (int c = 0; c < cols; ++c)
      for (int x = 0; x < rows; ++x) acc[int64_t(c) * ld + x] *= factor;
  const auto fin = t.dtype == DType::kF16
                       ? nullptr
                       : reinterpret_cast<cpu::FinalizeFn>(cpu::cached_kernel(cpu::Slot::kGemmFinalize, kFn));
  if (!fin) {
    for (int x = 0; x < rows; ++x) {
      for (int c = 0; c < cols; ++c) column[c] = acc[int64_t(c) * ld + x];
      store(t, token0 + x, head, column, cols, 1.0f);
    }
    return;
  }
  cpu::FinalizeArgs a;
  a.tile = acc;
  a.ldt = ld;
  a.transposed = true;
  const size_t es = t.dtype == DType::kF32 ? 4 : 2;
  a.d = static_cast<char*>(t.data) + size_t(token0 * t.strides[0] + head * t.strides[1]) * es;
  a.d_bf16 = t.dtype == DType::kBF16;
  a.ldd = t.strides[0];
  a.c = nullptr;
  a.c_bf16 = false;
  a.ldc = 0;
  a.rows = rows;
  a.cols = cols;
  fin(a);
}

void row_pass(Problem& pb, const PackSizes& ps, const std::vector<TileTask>& tasks) {
  const int dq = int(pb.l.d_qk), dv = int(pb.l.d_v), R = pb.R, T = pb.T;
  const size_t es = pb.bf16_ops ? 2 : 4;
  const BwdGemm& m = pb.gemm;
  const Tiles& tl = pb.tiles;
  // Claimed last tile first: causal rows of a group's later tiles see more keys, so the longest tasks
  // start first and the threads finish together.
  run_tasks(pb, int64_t(tasks.size()), [&](int64_t n, Scratch& s) {
    const TileTask& t = tasks[tasks.size() - 1 - size_t(n)];
    const Group& gr = *t.gr;
    const int nr = int(std::min<int64_t>(R, gr.rows - t.start));
    const BwdGemm::Prepared qa = m.prepare_a(src(pb, gr.q + size_t(t.start) * dq * es, dq, 1), nr, dq, s.a1.get());
    const BwdGemm::Prepared oa = m.prepare_a(src(pb, gr.dout + size_t(t.start) * dv * es, dv, 1), nr, dv, s.a2.get());
    for (int x = 0; x < nr; ++x) {
      s.lse[x] = pb.lse_of(gr.i, gr.g, t.start + x);
      s.delta[x] = 0.0f;
    }
    const int64_t last = pb.visible(gr.i, t.start + nr - 1);  // the tile's last row sees the most keys
    const int64_t ld = s.ld_tile, tile_floats = int64_t(nr) * ld;
    const int64_t key_tiles = (last + T - 1) / T;
    const bool keep = size_t(key_tiles * tile_floats * 2) * 4 <= kStashBytes;
    float* stash = keep ? s.stash_of(size_t(key_tiles * tile_floats * 2)) : nullptr;
    // P (in place of S) and dP of key tile kt; the first sweep also adds to delta. Products cover the
    // tile's keys (its packs' shape); keys past a row's visible ones get p = 0.
    auto probs = [&](int64_t kt, bool first, float* p, float* dp) {
      const int64_t k0 = kt * T;
      const int nk = int(std::min<int64_t>(T, gr.keys - k0));
      const char* pk = gr.key_packs + size_t(kt) * ps.key_tile();
      m.multiply(tl.s, qa, pk, nk, p, ld, false);
      m.multiply(tl.s, oa, pk + ps.kb, nk, dp, ld, false);
      for (int x = 0; x < nr; ++x) s.vis[x] = int(std::clamp<int64_t>(pb.visible(gr.i, t.start + x) - k0, 0, nk));
      pb.ops->row_probs(p, dp, nr, nk, ld, s.lse.get(), s.vis.get(), pb.scale, first ? s.delta.get() : s.unused.get());
    };
    for (int64_t kt = 0; kt < key_tiles; ++kt) {
      float* p = keep ? stash + kt * tile_floats * 2 : s.s.get();
      probs(kt, true, p, keep ? p + tile_floats : s.dp.get());
    }
    for (int x = 0; x < nr; ++x) {
      const int64_t tok = pb.token(gr.i, t.start + x), h = pb.head(gr.g, t.start + x);
      float delta = s.delta[x];
      if (pb.dlse) delta -= pb.dlse->ptr<float>()[tok * pb.dlse->strides[0] + h * pb.dlse->strides[1]];
      s.delta[x] = delta;
      pb.delta[size_t(tok * pb.l.h_q + h)] = delta;
    }
    float* acc = s.acc1.get();
    const int64_t ld_dq = acc_ld(dq, tl.dq);
    for (int64_t kt = 0; kt < key_tiles; ++kt) {
      const int nk = int(std::min<int64_t>(T, gr.keys - kt * T));
      float *p = s.s.get(), *dp = s.dp.get();
      if (keep) {
        p = stash + kt * tile_floats * 2;
        dp = p + tile_floats;
      } else {
        probs(kt, false, p, dp);
      }
      // dS (the dQ product's A side, op1) and, when stored, P and dS as the key pass's B sides (K = the
      // tile's rows): written directly as panels by the tile ops on the pair-packing sets, else packed.
      char* kept = pb.store_pds ? gr.stored(ps, pb, t.start, kt * T) : nullptr;
      if (kept && pb.pair_panels) {
        pb.ops->row_pair_panels(p, dp, nr, nk, ld, s.delta.get(), tl.dvt.nr, m.k_pad(nr),
                                reinterpret_cast<uint16_t*>(kept), reinterpret_cast<uint16_t*>(kept + ps.pb_p),
                                reinterpret_cast<uint16_t*>(s.op1.get()), T);
      } else {
        pb.ops->row_dscores(p, dp, nr, nk, ld, s.delta.get(), pb.bf16_ops, s.op1.get(), T,
                            kept ? s.op2.get() : nullptr);
        if (kept) {
          m.pack_b(tl.dvt.nr, src(pb, s.op2.get(), 1, T), nk, nr, kept);
          m.pack_b(tl.dkt.nr, src(pb, s.op1.get(), 1, T), nk, nr, kept + ps.pb_p);
        }
      }
      const BwdGemm::Prepared dsa = m.prepare_a(src(pb, s.op1.get(), T, 1), nr, nk, s.a3.get());
      const char* ktb = gr.key_packs + size_t(kt) * ps.key_tile() + ps.kb + ps.vb;
      m.multiply(tl.dq, dsa, ktb, dq, acc, ld_dq, kt > 0);
    }
    for (int x = 0; x < nr; ++x) {
      const int64_t tok = pb.token(gr.i, t.start + x), h = pb.head(gr.g, t.start + x);
      float* row = acc + int64_t(x) * ld_dq;
      if (key_tiles == 0) std::fill_n(row, dq, 0.0f);
      store(pb.dq, tok, h, row, dq, pb.scale);
    }
  });
}

// The first row tile of group `gr` that key `k0` is visible to (causal: earlier queries see none of it).
int64_t first_row_tile(const Problem& pb, const Group& gr, int64_t k0) {
  const int64_t n_q = pb.l.q_len[size_t(gr.i)];
  const int64_t r_begin = pb.causal ? std::clamp<int64_t>(k0 - (gr.keys - n_q), 0, n_q) * pb.hp : 0;
  return r_begin / pb.R * pb.R;
}

// Key pass over recomputed scores: S^T = K Q^T, dP^T = V dO^T, then dV = sum P^T dO, dK = scale sum dS^T Q.
void key_pass_recompute(const Problem& pb, const PackSizes& ps, const std::vector<TileTask>& tasks) {
  const int dq = int(pb.l.d_qk), dv = int(pb.l.d_v), R = pb.R, T = pb.T;
  const size_t es = pb.bf16_ops ? 2 : 4;
  const BwdGemm& m = pb.gemm;
  const Tiles& tl = pb.tiles;
  run_tasks(pb, int64_t(tasks.size()), [&](int64_t n, Scratch& s) {
    const TileTask& t = tasks[size_t(n)];
    const Group& gr = *t.gr;
    const int nk = int(std::min<int64_t>(T, gr.keys - t.start));
    const BwdGemm::Prepared ka = m.prepare_a(src(pb, gr.k + size_t(t.start) * dq * es, dq, 1), nk, dq, s.a1.get());
    const BwdGemm::Prepared va = m.prepare_a(src(pb, gr.v + size_t(t.start) * dv * es, dv, 1), nk, dv, s.a2.get());
    float *dk = s.acc1.get(), *dvacc = s.acc2.get();
    const int64_t ld = s.ld_tile, ld_dk = acc_ld(dq, tl.dk), ld_dv = acc_ld(dv, tl.dv);
    bool first = true;
    for (int64_t r0 = first_row_tile(pb, gr, t.start); r0 < gr.rows; r0 += R) {
      const int nr = int(std::min<int64_t>(R, gr.rows - r0));
      const char* pk = gr.row_packs + size_t(r0 / R) * ps.row_tile();
      m.multiply(tl.st, ka, pk, nr, s.s.get(), ld, false);
      m.multiply(tl.st, va, pk + ps.qb, nr, s.dp.get(), ld, false);
      for (int x = 0; x < nr; ++x) {
        s.lse[x] = pb.lse_of(gr.i, gr.g, r0 + x);
        s.delta[x] = pb.delta_of(gr.i, gr.g, r0 + x);
        s.vis[x] = int(std::clamp<int64_t>(pb.visible(gr.i, r0 + x) - t.start, 0, nk));
      }
      pb.ops->key_grads(s.s.get(), s.dp.get(), nk, nr, ld, s.lse.get(), s.delta.get(), s.vis.get(), pb.scale,
                        pb.bf16_ops, s.op1.get(), s.op2.get(), R);
      const BwdGemm::Prepared pa = m.prepare_a(src(pb, s.op1.get(), R, 1), nk, nr, s.a3.get());
      const BwdGemm::Prepared dsa = m.prepare_a(src(pb, s.op2.get(), R, 1), nk, nr, s.a4.get());
      m.multiply(tl.dv, pa, pk + ps.qb + ps.dob + ps.qtb, dv, dvacc, ld_dv, !first);
      m.multiply(tl.dk, dsa, pk + ps.qb + ps.dob, dq, dk, ld_dk, !first);
      first = false;
    }
    for (int x = 0; x < nk; ++x) {
      const int64_t tok = pb.l.kv_begin[size_t(gr.i)] + t.start + x;
      float* krow = dk + int64_t(x) * ld_dk;
      float* vrow = dvacc + int64_t(x) * ld_dv;
      if (first) {
        std::fill_n(krow, dq, 0.0f);
        std::fill_n(vrow, dv, 0.0f);
      }
      store(pb.dk, tok, gr.g, krow, dq, pb.scale);
      store(pb.dv, tok, gr.g, vrow, dv, 1.0f);
    }
  });
}

// Key pass over the row pass's stored P and dS: dV^T = sum dO^T P, dK^T = sum Q^T dS (the row tiles' K^T-
// side A operands prepared once per call), stored transposed: dV, and dK times scale.
void key_pass_stored(const Problem& pb, const PackSizes& ps, const std::vector<TileTask>& tasks,
                     const std::vector<BwdGemm::Prepared>& row_prep) {
  const int dq = int(pb.l.d_qk), dv = int(pb.l.d_v), R = pb.R, T = pb.T;
  const BwdGemm& m = pb.gemm;
  const Tiles& tl = pb.tiles;
  run_tasks(pb, int64_t(tasks.size()), [&](int64_t n, Scratch& s) {
    const TileTask& t = tasks[size_t(n)];
    const Group& gr = *t.gr;
    const int nk = int(std::min<int64_t>(T, gr.keys - t.start));
    float *dkt = s.acc1.get(), *dvt = s.acc2.get();
    const int64_t ld_k = round_up(T, tl.dkt.nr), ld_v = round_up(T, tl.dvt.nr);
    bool first = true;
    for (int64_t r0 = first_row_tile(pb, gr, t.start); r0 < gr.rows; r0 += R) {
      const char* kept = gr.stored(ps, pb, r0, t.start);
      const size_t task = gr.row_task0 + size_t(r0 / R);
      m.multiply(tl.dvt, row_prep[2 * task + 1], kept, nk, dvt, ld_v, !first);
      m.multiply(tl.dkt, row_prep[2 * task], kept + ps.pb_p, nk, dkt, ld_k, !first);
      first = false;
    }
    if (first) {  // no query sees these keys
      std::fill_n(dkt, dq * ld_k, 0.0f);
      std::fill_n(dvt, dv * ld_v, 0.0f);
    }
    const int64_t tok = pb.l.kv_begin[size_t(gr.i)] + t.start;
    store_transposed(pb.dk, tok, gr.g, dkt, ld_k, nk, dq, pb.scale, s.column.get());
    store_transposed(pb.dv, tok, gr.g, dvt, ld_v, nk, dv, 1.0f, s.column.get());
  });
}

// Runs the three phases over batches of groups whose operands fit kBatchBytes (at least one group each).
void run_batches(Problem& pb) {
  const PackSizes ps(pb);
  const int R = pb.R, T = pb.T;
  std::vector<Group> groups;
  const size_t store_batch = kStoreBatchBytesPerThread * size_t(std::max(1, num_threads()));
  int64_t i = 0, g = 0;
  while (i < pb.l.b) {
    groups.clear();
    size_t bytes = 0, stored = 0;
    std::vector<size_t> offsets;
    for (; i < pb.l.b; g = 0, ++i) {
      for (; g < pb.l.h_kv; ++g) {
        const int64_t rows = pb.rows(i), keys = pb.l.kv_len[size_t(i)];
        const size_t need = group_bytes(pb, ps, rows, keys);
        const size_t store = pb.store_pds ? ps.stored_bytes(pb, rows, keys) : 0;
        if (!groups.empty() && (bytes + need > kBatchBytes || stored + store > store_batch)) break;
        groups.push_back(Group{i, g, rows, keys, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0});
        offsets.push_back(bytes);
        bytes += need;
        stored += store;
      }
      if (g < pb.l.h_kv) break;
    }
    AlignedPtr<char> fresh;
    char* const arena = batch_arena(bytes, &fresh);
    const size_t es = pb.bf16_ops ? 2 : 4;
    std::vector<TileTask> row_tasks, key_tasks;
    for (size_t x = 0; x < groups.size(); ++x) {
      Group& gr = groups[x];
      char* p = arena + offsets[x];
      gr.q = p;
      p += align64(size_t(gr.rows) * size_t(pb.l.d_qk) * es);
      gr.dout = p;
      p += align64(size_t(gr.rows) * size_t(pb.l.d_v) * es);
      gr.k = p;
      p += align64(size_t(gr.keys) * size_t(pb.l.d_qk) * es);
      gr.v = p;
      p += align64(size_t(gr.keys) * size_t(pb.l.d_v) * es);
      gr.row_packs = p;
      p += size_t((gr.rows + R - 1) / R) * ps.row_tile();
      gr.key_packs = p;
      p += size_t((gr.keys + T - 1) / T) * ps.key_tile();
      gr.pds = pb.store_pds ? p : nullptr;
      gr.row_task0 = row_tasks.size();
      for (int64_t r0 = 0; r0 < gr.rows; r0 += R) row_tasks.push_back({&gr, r0});
      for (int64_t k0 = 0; k0 < gr.keys; k0 += T) key_tasks.push_back({&gr, k0});
    }
    std::vector<BwdGemm::Prepared> row_prep(pb.store_pds ? 2 * row_tasks.size() : 0);
    gather_and_pack(pb, ps, row_tasks, key_tasks, &row_prep);
    row_pass(pb, ps, row_tasks);
    if (pb.store_pds) {
      key_pass_stored(pb, ps, key_tasks, row_prep);
    } else {
      key_pass_recompute(pb, ps, key_tasks);
    }
  }
}

}  // namespace

size_t bwd_store_limit() {
  return store_group_bytes.load();
}

size_t set_bwd_store_limit(size_t bytes) {
  return store_group_bytes.exchange(bytes);
}

void flash_attn_varlen_bwd(const VarlenInputs& in, const TensorView& out, const TensorView& lse, const TensorView& dout,
                           const TensorView& dq, const TensorView& dk, const TensorView& dv, const TensorView* dlse) {
  Problem pb;
  pb.l = check_varlen_inputs(kFn, in);
  const VarlenLayout& l = pb.l;
  const DType dt = in.q.dtype;
  static const char* const kQDims[] = {"total_q", "num_heads", "head_dim of v"};
  static const char* const kGradQDims[] = {"total_q", "num_heads", "head_dim of q"};
  static const char* const kGradKDims[] = {"total_kv", "num_heads of k", "head_dim of q"};
  static const char* const kGradVDims[] = {"total_kv", "num_heads of k", "head_dim of v"};
  check_varlen_tensor(kFn, "out", out, {dt}, {l.total_q, l.h_q, l.d_v}, kQDims, false, in);
  check_varlen_tensor(kFn, "dout", dout, {dt}, {l.total_q, l.h_q, l.d_v}, kQDims, false, in);
  check_varlen_tensor(kFn, "lse", lse, {DType::kF32}, {l.total_q, l.h_q}, kQDims, false, in);
  if (dlse) check_varlen_tensor(kFn, "dlse", *dlse, {DType::kF32}, {l.total_q, l.h_q}, kQDims, false, in);
  check_varlen_tensor(kFn, "dq", dq, {dt, DType::kF32}, {l.total_q, l.h_q, l.d_qk}, kGradQDims, true, in);
  check_varlen_tensor(kFn, "dk", dk, {dt, DType::kF32}, {l.total_kv, l.h_kv, l.d_qk}, kGradKDims, true, in);
  check_varlen_tensor(kFn, "dv", dv, {dt, DType::kF32}, {l.total_kv, l.h_kv, l.d_v}, kGradVDims, true, in);
  const std::pair<const char*, const TensorView*> grads[] = {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}};
  const std::pair<const char*, const TensorView*> reads[] = {{"out", &out}, {"lse", &lse}, {"dout", &dout}};
  for (const auto& [gn, gt] : grads) {
    for (const auto& [rn, rt] : reads) check_no_overlap(kFn, gn, *gt, rn, *rt);
    if (dlse) check_no_overlap(kFn, gn, *gt, "dlse", *dlse);
    for (const auto& [hn, ht] : grads)
      if (gt != ht) check_no_overlap(kFn, gn, *gt, hn, *ht);
  }

  pb.q = in.q;
  pb.k = in.k;
  pb.v = in.v;
  pb.out = out;
  pb.lse = lse;
  pb.dout = dout;
  pb.dq = dq;
  pb.dk = dk;
  pb.dv = dv;
  pb.dlse = dlse;
  pb.hp = l.h_q / l.h_kv;
  pb.scale = float(l.scale);
  pb.causal = in.causal;
  const auto& set = cpu::kernels_for<cpu::MlaBwdKernelSet>(cpu::Slot::kMlaBwd, kFn);
  pb.ops = set.ops;
  // bf16 inputs on a bf16 set: bf16 operands (exact for q, k, v, dO; P and dS rounded). fp32 sets and
  // fp16 inputs: fp32 operands (bf16 would round q, k, v, dO).
  pb.bf16_ops = dt == DType::kBF16 && set.gemm && set.gemm->elem_bytes == 2;
  pb.gemm.ks = dt == DType::kBF16 ? set.gemm : set.gemm_f32;
  pb.gemm.type = pb.bf16_ops ? cpu::GemmSrcType::kBF16 : cpu::GemmSrcType::kF32;
  const int dqk = int(l.d_qk), dvv = int(l.d_v);
  const int R = set.tile_rows, T = set.tile_keys;
  pb.R = R;
  pb.T = T;
  pb.tiles = {pb.gemm.tile_for(R, T),   pb.gemm.tile_for(R, dqk), pb.gemm.tile_for(T, R),  pb.gemm.tile_for(T, dvv),
              pb.gemm.tile_for(T, dqk), pb.gemm.tile_for(dvv, T), pb.gemm.tile_for(dqk, T)};
  pb.delta.assign(size_t(l.total_q * l.h_q), 0.0f);
  pb.store_pds = true;
  // One panel width for both stored sides (their tiles share it on the pair-packing sets).
  pb.pair_panels = set.pair_panels && pb.bf16_ops && pb.tiles.dvt.nr == pb.tiles.dkt.nr;
  const PackSizes ps(pb);
  for (int64_t i = 0; i < l.b; ++i)
    if (ps.stored_bytes(pb, pb.rows(i), l.kv_len[size_t(i)]) > bwd_store_limit()) pb.store_pds = false;
  run_batches(pb);
}

}  // namespace tessera::flash_mla
