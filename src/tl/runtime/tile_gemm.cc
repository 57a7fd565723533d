// The tile GEMM (see tile_gemm.h). Per call and K chunk: pack B into nr-wide panels, prepare A (read in
// place when it is K-contiguous bf16; AMX copies each 32-row panel into tile order), then run the
// register tiles. AMX pays per call: its tile configuration is loaded only when it differs from the
// thread's current one (amx/tile_config.cc), so a block's calls after the first load nothing.
#include "tl/runtime/tile_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/registry.h"
#include "backends/cpu/tl_gemv.h"
#include "core/env.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/tl/types.h"

namespace tessera::tl {
namespace {

bool to_src_type(int32_t t, cpu::GemmSrcType* out) {
  switch (DataType(t)) {
    case DataType::kBFloat16:
      *out = cpu::GemmSrcType::kBF16;
      return true;
    case DataType::kFloat32:
      *out = cpu::GemmSrcType::kF32;
      return true;
    case DataType::kFloat8E4M3:
      *out = cpu::GemmSrcType::kE4M3;
      return true;
    case DataType::kFloat16:
      *out = cpu::GemmSrcType::kF16;
      return true;
    case DataType::kFloat8E5M2:
      *out = cpu::GemmSrcType::kE5M2;
      return true;
    default:
      return false;
  }
}

constexpr int kSrcTypes = 6;  // GemmSrcType values

// fp16 operands run on the bf16 sets as their split (gemm_kernel_set.h, F16Split), which takes four
// bf16 products per fp16 product: only AMX's tiles are fast enough for that to beat the fp32 FMA
// sets (which read fp16 as it is); elsewhere, and against operands that are not fp16, the fp32 sets
// take fp16 (docs/notes/2026-12-05-tl-fp16-gemm.md). TESSERA_TL_F16_SPLIT=1 / 0 forces the split on
// every bf16 set / on none, for measuring the choice.
bool splits_f16(const cpu::KernelImpl& impl, const cpu::GemmKernelSet& ks, cpu::GemmSrcType a, cpu::GemmSrcType b) {
  static const int forced = int(env::integer("TESSERA_TL_F16_SPLIT", -1, 0, 1));
  if (a != cpu::GemmSrcType::kF16 || b != cpu::GemmSrcType::kF16 || ks.elem_bytes != 2) return false;
  return forced >= 0 ? forced != 0 : impl.need == Isa::kAmx;
}

// A T.gemm runs per tile, thousands of times per kernel: each choice is asked of the registry once per
// level (and operand types), then kept.
constexpr int kLevels = kIsaCount;

const char* refuse_packed(const cpu::KernelImpl& impl, const void* table, const void* problem) {
  const auto* types = static_cast<const cpu::GemmSrcType*>(problem);
  const auto* ks = static_cast<const cpu::GemmKernelSet*>(table);
  if (ks && (!ks->accepts(types[0]) || !ks->accepts(types[1]))) return "refused: operand types not accepted";
  const bool f16 = types[0] == cpu::GemmSrcType::kF16 || types[1] == cpu::GemmSrcType::kF16;
  if (ks && f16 && ks->elem_bytes == 2 && !splits_f16(impl, *ks, types[0], types[1]))
    return "refused: fp16 split pays only on AMX tiles";
  return nullptr;
}

// The set for operand types (a, b) at the active level; *split: it reads fp16 as its bf16 split.
const cpu::GemmKernelSet* choose(cpu::GemmSrcType a, cpu::GemmSrcType b, bool* split) {
  static std::atomic<const void*> cache[kLevels][kSrcTypes][kSrcTypes];
  static std::atomic<bool> splits[kLevels][kSrcTypes][kSrcTypes];
  static const void* const kUnset = &cache;
  static std::once_flag init;
  std::call_once(init, [] {
    for (auto& level : cache)
      for (auto& row : level)
        for (auto& c : row) c.store(kUnset);
  });
  std::atomic<const void*>& slot = cache[int(active_isa())][int(a)][int(b)];
  std::atomic<bool>& slot_split = splits[int(active_isa())][int(a)][int(b)];
  const void* table = slot.load(std::memory_order_acquire);
  if (table == kUnset) {
    const cpu::GemmSrcType types[2] = {a, b};
    const cpu::KernelChoice c = cpu::choose_kernel(cpu::Slot::kGemmPacked, "tl T.gemm", refuse_packed, types);
    table = c.table;
    slot_split.store(c.impl && c.table && splits_f16(*c.impl, *static_cast<const cpu::GemmKernelSet*>(c.table), a, b),
                     std::memory_order_relaxed);
    slot.store(table, std::memory_order_release);
  }
  *split = slot_split.load(std::memory_order_relaxed);
  return static_cast<const cpu::GemmKernelSet*>(table);
}

cpu::TlGemvFn choose_gemv() {
  static std::atomic<const void*> cache[kLevels];
  static const void* const kUnset = &cache;
  static std::once_flag init;
  std::call_once(init, [] {
    for (auto& c : cache) c.store(kUnset);
  });
  std::atomic<const void*>& slot = cache[int(active_isa())];
  const void* table = slot.load(std::memory_order_acquire);
  if (table == kUnset) {
    table = cpu::choose_kernel(cpu::Slot::kTlGemv, "tl T.gemm, few rows").table;
    slot.store(table, std::memory_order_release);
  }
  return reinterpret_cast<cpu::TlGemvFn>(table);
}

float element(const void* p, int32_t type, int64_t off) {
  switch (DataType(type)) {
    case DataType::kFloat32:
      return static_cast<const float*>(p)[off];
    case DataType::kBFloat16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[off]);
    case DataType::kFloat16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[off]);
    case DataType::kFloat8E4M3:
      return e4m3_to_f32(static_cast<const uint8_t*>(p)[off]);
    case DataType::kFloat8E5M2:
      return e5m2_to_f32(static_cast<const uint8_t*>(p)[off]);
    default:
      return 0.0f;  // the lowering only emits float operand types
  }
}

void scalar_gemm(const TlGemmArgs& g) {
  const int ks = std::min(g.a_ks, g.b_ks);
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      float acc = g.clear ? 0.0f : g.c[i * g.ldc + j];
      if (i < g.a_rows && j < g.b_rows)
        for (int k = 0; k < ks; ++k)
          acc += element(g.a, g.a_type, i * g.a_stride_m + k * g.a_stride_k) *
                 element(g.b, g.b_type, j * g.b_stride_n + k * g.b_stride_k);
      g.c[i * g.ldc + j] = acc;
    }
}

// Grow-only per-thread buffers.
void* scratch(int slot, size_t bytes) {
  thread_local AlignedPtr<char> bufs[3];
  thread_local size_t sizes[3] = {0, 0, 0};
  if (bytes > sizes[slot]) {
    bufs[slot] = aligned_array<char>(bytes);
    sizes[slot] = bytes;
  }
  return bufs[slot].get();
}

// The register tile that pads M and N least (ties: the larger tile).
cpu::GemmTile pick_tile(const cpu::GemmKernelSet& ks, int m, int n) {
  cpu::GemmTile best = ks.tiles[0];
  int64_t best_area = -1;
  for (int t = 0; t < ks.num_tiles; ++t) {
    const cpu::GemmTile& c = ks.tiles[t];
    const int64_t area = int64_t((m + c.mr - 1) / c.mr * c.mr) * ((n + c.nr - 1) / c.nr * c.nr);
    if (best_area < 0 || area < best_area || (area == best_area && c.mr * c.nr > best.mr * best.nr)) {
      best = c;
      best_area = area;
    }
  }
  return best;
}

// Few rows of A against K-contiguous bf16 / fp8 rows of B: stream B once with the GEMV kernel (the
// packed path would convert and pack every B element for one or two rows of A).
bool gemv(const TlGemmArgs& g, int m_valid) {
  const bool fp8 = DataType(g.b_type) == DataType::kFloat8E4M3;
  if (DataType(g.a_type) != DataType::kBFloat16 || g.a_stride_k != 1 || g.b_stride_k != 1 ||
      !(fp8 || DataType(g.b_type) == DataType::kBFloat16))
    return false;
  const cpu::TlGemvFn fn = choose_gemv();
  if (!fn) return false;  // scalar level: the tile loops
  cpu::TlGemvArgs v{};
  v.a = static_cast<const uint16_t*>(g.a);
  v.lda = g.a_stride_m;
  v.rows = m_valid;
  v.w = g.b;
  v.w_fp8 = fp8;
  v.ldw = g.b_stride_n;
  v.n_rows = g.b_rows;
  v.k_len = std::min(g.a_ks, g.b_ks);
  v.out = g.c;
  v.ldo = g.ldc;
  v.accumulate = !g.clear;
  fn(v);
  if (g.clear)  // columns whose B row does not exist
    for (int i = 0; i < m_valid; ++i)
      std::fill(g.c + int64_t(i) * g.ldc + g.b_rows, g.c + int64_t(i) * g.ldc + g.n, 0.0f);
  return true;
}

// One K chunk of the call, shared by the two loop orders below.
struct Chunk {
  const TlGemmArgs& g;
  const cpu::GemmKernelSet& ks;
  cpu::GemmTile tile;
  int m_valid;
  int col_panels;     // panels of nr columns of C
  int panels;         // b-panels: col_panels, or twice that for an fp16 split (hi set, then lo set)
  const char* bpack;  // this chunk's b-panels
  float* edge;        // mr x nr tile for a last panel narrower than nr
  bool accumulate;    // add to C (later chunks, or a T.gemm without clear)
  cpu::UkrArgs u;
};

// C rows [ir, ir + mr) x columns of b-panel p against the a-panel at `apanel` (u.lda, u.kc set). A last
// panel narrower than nr is computed into the stack tile and added to C, so the micro-kernel never
// writes past C's columns. A split's lo-set panel adds to what its hi-set panel wrote.
void run_tile(Chunk& ch, const char* apanel, int ir, int p) {
  const TlGemmArgs& g = ch.g;
  cpu::UkrArgs& u = ch.u;
  const int nr = ch.tile.nr, jr = p % ch.col_panels * nr, cols = std::min(nr, g.n - jr);
  const bool accumulate = ch.accumulate || p >= ch.col_panels;
  u.a = apanel;
  u.b = ch.bpack + size_t(p) * u.kc * nr * ch.ks.elem_bytes;
  u.m_valid = std::min(ch.tile.mr, ch.m_valid - ir);
  u.n_valid = cols;
  float* c = g.c + int64_t(ir) * g.ldc + jr;
  if (cols == nr) {
    u.c = c;
    u.ldc = g.ldc;
    u.accumulate = accumulate;
    ch.tile.ukr(u);
    return;
  }
  u.c = ch.edge;
  u.ldc = nr;
  u.accumulate = 0;
  ch.tile.ukr(u);
  for (int r = 0; r < u.m_valid; ++r)
    for (int j = 0; j < cols; ++j) c[r * g.ldc + j] = (accumulate ? c[r * g.ldc + j] : 0.0f) + ch.edge[r * nr + j];
}

// Sets that read a-panels in place (the vector sets: K-contiguous bf16 needs no copy): each b-panel
// stays in L1 while every a-panel of the block meets it.
void run_in_place(Chunk& ch, const cpu::GemmSrc& a, int pc, void* abuf) {
  int64_t lda = 0;
  const char* ablock = static_cast<const char*>(ch.ks.prepare_a(a, 0, ch.m_valid, pc, ch.u.kc, ch.g.a_ks, abuf, &lda));
  ch.u.lda = lda;
  for (int p = 0; p < ch.panels; ++p)
    for (int ir = 0; ir < ch.m_valid; ir += ch.tile.mr)
      run_tile(ch, ablock + int64_t(ir) * lda * ch.ks.elem_bytes, ir, p);
}

int src_bytes(cpu::GemmSrcType t) {
  switch (t) {
    case cpu::GemmSrcType::kF32:
      return 4;
    case cpu::GemmSrcType::kE4M3:
    case cpu::GemmSrcType::kE5M2:
      return 1;
    default:
      return 2;
  }
}

// Source lines a later step reads: `rows` rows of `row_lines` lines from base, row_stride bytes apart.
struct Lines {
  const char* base = nullptr;
  int64_t row_stride = 0;
  int row_lines = 0, rows = 0;
  int count() const { return rows * row_lines; }
};

// Rows [r0, r0 + rows) x K [k0, k0 + kc) of a K-contiguous operand (K values past k_total left out).
// Only sets that copy a-panels ask, and fp16 reaches those as its split: K counts two per fp16 value.
Lines source_lines(const cpu::GemmSrc& s, int64_t r0, int rows, int k0, int kc, int k_total) {
  if (s.type == cpu::GemmSrcType::kF16) k0 /= 2, kc /= 2, k_total /= 2;
  Lines l;
  const int k_len = std::min(kc, k_total - k0);
  if (s.stride_k != 1 || rows <= 0 || k_len <= 0) return l;
  const int es = src_bytes(s.type);
  l.base = static_cast<const char*>(s.data) + (r0 * s.stride_r + k0) * es;
  l.row_stride = s.stride_r * es;
  l.row_lines = (k_len * es + 63) / 64;
  l.rows = rows;
  return l;
}

// Makes the next micro-kernel call prefetch lines [begin, end) of l (spread through its K loop).
void aim_prefetch(cpu::UkrArgs& u, const Lines& l, int begin, int end) {
  u.pf_begin = u.pf_end = 0;
  if (end <= begin) return;
  u.pf_base = l.base;
  u.pf_row_stride = l.row_stride;
  u.pf_row_lines = l.row_lines;
  u.pf_begin = begin;
  u.pf_end = end;
}

// Sets that copy every a-panel (AMX: tile order): each a-panel is copied once per K chunk into a small
// buffer that stays in L1 and meets every b-panel. Meanwhile the micro-kernel calls prefetch what the next copies
// read: the source rows of the next a-panel (this chunk's, or the next chunk's first), and a share of
// the next chunk's B rows per panel (its last call), so neither copy waits on L3 (tile rows are often
// 4 KiB apart, one page each, which the hardware prefetchers do not follow): +4-11% over prefetching
// only the next a-panel of the chunk (the bench's 512 x 128 x 512 tiles, M=N=K 512-2048, 2 threads,
// alternated in one process). Copying the block's whole a-side first (as run_in_place does) and
// streaming it from L2 once per b-panel ran those tiles at 0.64-0.90x of the library GEMM (2048 /
// 1024); this order with K chunks of 256 at 0.75-1.05x.
void run_panel_outer(Chunk& ch, const cpu::GemmSrc& a, const cpu::GemmSrc& b, int pc, int kc_next, void* abuf) {
  const TlGemmArgs& g = ch.g;
  cpu::UkrArgs& u = ch.u;
  const int mr = ch.tile.mr, a_panels = (ch.m_valid + mr - 1) / mr;
  const Lines b_next = source_lines(b, 0, g.b_rows, pc + u.kc, kc_next, g.b_ks);
  for (int j = 0; j < a_panels; ++j) {
    const int ir = j * mr, rows = std::min(mr, ch.m_valid - ir);
    int64_t lda = 0;
    const char* apanel = static_cast<const char*>(ch.ks.prepare_a(a, ir, rows, pc, u.kc, g.a_ks, abuf, &lda));
    u.lda = lda;
    const Lines a_next = j + 1 < a_panels
                             ? source_lines(a, ir + mr, std::min(mr, ch.m_valid - ir - mr), pc, u.kc, g.a_ks)
                             : source_lines(a, 0, std::min(mr, ch.m_valid), pc + u.kc, kc_next, g.a_ks);
    // The b share: rows [b0, b1) of the next chunk's B, in this panel's last call.
    const int b0 = b_next.rows * j / a_panels, b1 = b_next.rows * (j + 1) / a_panels;
    const int a_calls = ch.panels > 1 && b1 > b0 ? ch.panels - 1 : ch.panels;
    for (int p = 0; p < ch.panels; ++p) {
      if (p < a_calls) {
        aim_prefetch(u, a_next, a_next.count() * p / a_calls, a_next.count() * (p + 1) / a_calls);
      } else {
        aim_prefetch(u, b_next, b0 * b_next.row_lines, b1 * b_next.row_lines);
      }
      run_tile(ch, apanel, ir, p);
    }
  }
  u.pf_begin = u.pf_end = 0;
}

// K chunk of the sets that copy a-panels: a 32-row panel of 128 values (8 KiB) and the b-panels stay
// in L1 or near it for both threads of a core, and every chunk but a call's first has its sources
// prefetched by the previous one. The bench's 512 x 128 x 512 tiles, 2 threads, alternated in one
// process: against 256, M=N=K 1024 and 2048 took 10-12% less time (512: equal); 512 took 3-10% more
// than 256; 64 and 96 took 6-19% more than 128.
constexpr int kAmxChunk = 128;

// The packed path over K values [0, g.k) of the sources a and b (g counts K in the set's values). An
// fp16 split (a read as [hi lo]) packs b twice, as [hi hi] and as [lo lo]: C gets a.hb, then a.lb.
void tiles(const TlGemmArgs& g, const cpu::GemmKernelSet* ks, const cpu::GemmSrc& a, const cpu::GemmSrc& b, int m_valid,
           bool split) {
  const cpu::GemmTile tile = pick_tile(*ks, m_valid, g.n);
  const int mr = tile.mr, nr = tile.nr, es = ks->elem_bytes;
  const int k_pad = (g.k + ks->k_align - 1) / ks->k_align * ks->k_align;
  const int kc_want = ks->copies_a ? kAmxChunk : ks->kc;
  const int kc_max = std::max(ks->k_align, kc_want / ks->k_align * ks->k_align);
  const int col_panels = (g.n + nr - 1) / nr, panels = split ? 2 * col_panels : col_panels;
  // Panel outer copies one panel at a time, padded to whole 16-row groups (AMX tile order: mr is 16 or 32).
  const int a_rows = ks->copies_a ? mr : m_valid;
  char* bpack = static_cast<char*>(scratch(0, size_t(panels) * nr * std::min(k_pad, kc_max) * es));
  void* abuf = scratch(1, size_t(a_rows) * std::min(k_pad, kc_max) * es);
  float* edge = static_cast<float*>(scratch(2, size_t(mr) * nr * sizeof(float)));

  cpu::GemmSrc b_hi = b, b_lo = b;
  b_hi.f16_split = cpu::F16Split::kHiHi;
  b_lo.f16_split = cpu::F16Split::kLoLo;
  Chunk ch{g, *ks, tile, m_valid, col_panels, panels, bpack, edge, false, cpu::UkrArgs{}};
  for (int pc = 0; pc < k_pad; pc += kc_max) {
    const int kc = std::min(kc_max, k_pad - pc);
    if (split) {
      ks->pack_b(b_hi, 0, g.n, g.b_rows, pc, kc, g.b_ks, nr, bpack);
      ks->pack_b(b_lo, 0, g.n, g.b_rows, pc, kc, g.b_ks, nr, bpack + size_t(col_panels) * kc * nr * es);
    } else {
      ks->pack_b(b, 0, g.n, g.b_rows, pc, kc, g.b_ks, nr, bpack);
    }
    ch.accumulate = pc > 0 || !g.clear;
    ch.u.kc = kc;
    ch.u.group = kc;
    if (ks->copies_a) {
      run_panel_outer(ch, a, b, pc, std::min(kc_max, k_pad - pc - kc), abuf);
    } else {
      run_in_place(ch, a, pc, abuf);
    }
  }
}

}  // namespace

void tile_gemm(const TlGemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return;
  // Rows of C whose A row does not exist get no products: zero them when clearing, else leave them.
  const int m_valid = g.k > 0 ? g.a_rows : 0;
  if (g.clear)
    for (int i = m_valid; i < g.m; ++i) std::fill_n(g.c + int64_t(i) * g.ldc, g.n, 0.0f);
  if (m_valid <= 0) return;
  if (m_valid <= 4 && gemv(g, m_valid)) return;
  cpu::GemmSrcType at, bt;
  bool split = false;
  const cpu::GemmKernelSet* ks =
      to_src_type(g.a_type, &at) && to_src_type(g.b_type, &bt) ? choose(at, bt, &split) : nullptr;
  if (!ks || !ks->accepts(at) || !ks->accepts(bt)) return scalar_gemm(g);

  // An fp16 split counts two bf16 K values per fp16 value (gemm_kernel_set.h, F16Split).
  const int kx = split ? 2 : 1;
  TlGemmArgs gx = g;
  gx.k *= kx, gx.a_ks *= kx, gx.b_ks *= kx;
  const cpu::GemmSrc a{g.a, at, g.a_stride_m, g.a_stride_k};  // fp16 split: [hi lo]
  const cpu::GemmSrc b{g.b, bt, g.b_stride_n, g.b_stride_k};
  tiles(gx, ks, a, b, m_valid, split);
}

}  // namespace tessera::tl
