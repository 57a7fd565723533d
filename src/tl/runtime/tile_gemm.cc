// The tile GEMM (see tile_gemm.h). Per call: pack B into nr-wide panels (per K chunk), prepare A (read
// in place when it is K-contiguous bf16), then run the register tiles; a last panel narrower than nr is
// computed into a stack tile and added to C, so the micro-kernel never writes past C's columns.
#include "tl/runtime/tile_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/registry.h"
#include "backends/cpu/tl_gemv.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/tl/types.h"

namespace tessera::tl {
namespace {

bool to_src_type(int32_t t, cpu::GemmSrcType* out) {
  switch (DataType(t)) {
    case DataType::kBFloat16: *out = cpu::GemmSrcType::kBF16; return true;
    case DataType::kFloat32: *out = cpu::GemmSrcType::kF32; return true;
    case DataType::kFloat8E4M3: *out = cpu::GemmSrcType::kE4M3; return true;
    default: return false;
  }
}

// A T.gemm runs per tile, thousands of times per kernel: each choice is asked of the registry once per
// level (and operand types), then kept.
constexpr int kLevels = int(Isa::kAmx) + 1;

const char* refuse_packed(const cpu::KernelImpl& impl, const void* table, const void* problem) {
  const auto* types = static_cast<const cpu::GemmSrcType*>(problem);
  if (impl.need == Isa::kAmx) return "refused: T.gemm tiles are too small for AMX tile configuration per call";
  const auto* ks = static_cast<const cpu::GemmKernelSet*>(table);
  if (ks && (!ks->accepts(types[0]) || !ks->accepts(types[1]))) return "refused: operand types not accepted";
  return nullptr;
}

const cpu::GemmKernelSet* choose(cpu::GemmSrcType a, cpu::GemmSrcType b) {
  static std::atomic<const void*> cache[kLevels][4][4];
  static const void* const kUnset = &cache;
  static std::once_flag init;
  std::call_once(init, [] {
    for (auto& level : cache)
      for (auto& row : level)
        for (auto& c : row) c.store(kUnset);
  });
  std::atomic<const void*>& slot = cache[int(active_isa())][int(a)][int(b)];
  const void* table = slot.load(std::memory_order_acquire);
  if (table == kUnset) {
    const cpu::GemmSrcType types[2] = {a, b};
    table = cpu::choose_kernel(cpu::Slot::kGemmPacked, "tl T.gemm", refuse_packed, types).table;
    slot.store(table, std::memory_order_release);
  }
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
    case DataType::kFloat32: return static_cast<const float*>(p)[off];
    case DataType::kBFloat16: return bf16_to_f32(static_cast<const uint16_t*>(p)[off]);
    case DataType::kFloat16: return f16_to_f32(static_cast<const uint16_t*>(p)[off]);
    case DataType::kFloat8E4M3: return e4m3_to_f32(static_cast<const uint8_t*>(p)[off]);
    case DataType::kFloat8E5M2: return e5m2_to_f32(static_cast<const uint8_t*>(p)[off]);
    default: return 0.0f;  // the lowering only emits float operand types
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
    for (int i = 0; i < m_valid; ++i) std::fill(g.c + int64_t(i) * g.ldc + g.b_rows, g.c + int64_t(i) * g.ldc + g.n, 0.0f);
  return true;
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
  const cpu::GemmKernelSet* ks = to_src_type(g.a_type, &at) && to_src_type(g.b_type, &bt) ? choose(at, bt) : nullptr;
  if (!ks || !ks->accepts(at) || !ks->accepts(bt)) return scalar_gemm(g);

  const cpu::GemmSrc a{g.a, at, g.a_stride_m, g.a_stride_k};
  const cpu::GemmSrc b{g.b, bt, g.b_stride_n, g.b_stride_k};
  const cpu::GemmTile tile = pick_tile(*ks, m_valid, g.n);
  const int mr = tile.mr, nr = tile.nr, es = ks->elem_bytes;
  const int k_pad = (g.k + ks->k_align - 1) / ks->k_align * ks->k_align;
  const int kc_max = std::max(ks->k_align, ks->kc / ks->k_align * ks->k_align);
  const int panels = (g.n + nr - 1) / nr;
  char* bpack = static_cast<char*>(scratch(0, size_t(panels) * nr * std::min(k_pad, kc_max) * es));
  void* abuf = scratch(1, size_t(m_valid) * std::min(k_pad, kc_max) * es);
  float* edge = static_cast<float*>(scratch(2, size_t(mr) * nr * sizeof(float)));

  for (int pc = 0; pc < k_pad; pc += kc_max) {
    const int kc = std::min(kc_max, k_pad - pc);
    const bool accumulate = pc > 0 || !g.clear;
    ks->pack_b(b, 0, g.n, g.b_rows, pc, kc, g.b_ks, nr, bpack);
    int64_t lda = 0;
    const char* ablock = static_cast<const char*>(ks->prepare_a(a, 0, m_valid, pc, kc, g.a_ks, abuf, &lda));
    cpu::UkrArgs u{};
    u.lda = lda;
    u.kc = kc;
    u.group = kc;
    for (int jr = 0, p = 0; jr < g.n; jr += nr, ++p) {
      const int cols = std::min(nr, g.n - jr);
      u.b = bpack + size_t(p) * kc * nr * es;
      for (int ir = 0; ir < m_valid; ir += mr) {
        u.a = ablock + int64_t(ir) * lda * es;
        u.m_valid = std::min(mr, m_valid - ir);
        float* c = g.c + int64_t(ir) * g.ldc + jr;
        if (cols == nr) {
          u.c = c;
          u.ldc = g.ldc;
          u.accumulate = accumulate;
          tile.ukr(u);
          continue;
        }
        u.c = edge;
        u.ldc = nr;
        u.accumulate = 0;
        tile.ukr(u);
        for (int r = 0; r < u.m_valid; ++r)
          for (int j = 0; j < cols; ++j) c[r * g.ldc + j] = (accumulate ? c[r * g.ldc + j] : 0.0f) + edge[r * nr + j];
      }
    }
  }
}

}  // namespace tessera::tl
