// The backward's tile products (mla_bwd_products.h). With a kernel set: one prepared a-block (the AMX set
// copies it into tile order, the vector sets read bf16 in place) against b-panels packed once, through
// the set's micro-kernels with the whole K in one call (K here is a head dim or a tile: at most a few
// hundred values). The AMX micro-kernels load their tile configuration only when it changes.
#include "attention/flash_mla/mla_bwd_products.h"

#include <algorithm>
#include <cstring>

#include "tessera/core/dtype.h"

namespace tessera::flash_mla {
namespace {

int round_up(int x, int to) {
  return (x + to - 1) / to * to;
}

float element(const cpu::GemmSrc& s, int64_t r, int64_t k) {
  const int64_t off = r * s.stride_r + k * s.stride_k;
  return s.type == cpu::GemmSrcType::kBF16 ? bf16_to_f32(static_cast<const uint16_t*>(s.data)[off])
                                           : static_cast<const float*>(s.data)[off];
}

// Portable operands: fp32 rows of k values, k apart.
void copy_rows(const cpu::GemmSrc& src, int rows, int k, float* dst) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < k; ++c) dst[int64_t(r) * k + c] = element(src, r, c);
}

}  // namespace

int BwdGemm::k_pad(int k) const {
  return ks ? round_up(k, ks->k_align) : k;
}

cpu::GemmTile BwdGemm::tile_for(int m, int n) const {
  if (!ks) return cpu::GemmTile{1, 1, nullptr, 1.0f};
  cpu::GemmTile best = ks->tiles[0];
  int64_t best_area = -1;
  for (int t = 0; t < ks->num_tiles; ++t) {
    const cpu::GemmTile& c = ks->tiles[t];
    const int64_t area = int64_t(round_up(m, c.mr)) * round_up(n, c.nr);
    if (best_area < 0 || area < best_area || (area == best_area && c.mr * c.nr > best.mr * best.nr)) {
      best = c;
      best_area = area;
    }
  }
  return best;
}

size_t BwdGemm::packed_b_bytes(int nr, int n, int k) const {
  return size_t(round_up(n, nr)) * size_t(k_pad(k)) * size_t(ks ? ks->elem_bytes : 4);
}

void BwdGemm::pack_b(int nr, const cpu::GemmSrc& src, int n, int k, void* dst) const {
  if (!ks) return copy_rows(src, n, k, static_cast<float*>(dst));
  ks->pack_b(src, 0, n, n, 0, k_pad(k), k, nr, dst);
}

size_t BwdGemm::prepared_a_bytes(int m, int k) const {
  // Tile order pads rows to whole 16-row groups, register tiles to mr (at most 32 rows here).
  return size_t(round_up(m, 32)) * size_t(k_pad(k)) * size_t(ks ? ks->elem_bytes : 4);
}

BwdGemm::Prepared BwdGemm::prepare_a(const cpu::GemmSrc& src, int m, int k, void* buf) const {
  if (!ks) {
    copy_rows(src, m, k, static_cast<float*>(buf));
    return {static_cast<const char*>(buf), k, m, k};
  }
  int64_t lda = 0;
  const void* block = ks->prepare_a(src, 0, m, 0, k_pad(k), k, buf, &lda);
  return {static_cast<const char*>(block), lda, m, k};
}

void BwdGemm::multiply(const cpu::GemmTile& tile, const Prepared& a, const void* packed_b, int n, float* c, int64_t ldc,
                       bool accumulate) const {
  if (!ks) {
    const float* av = reinterpret_cast<const float*>(a.data);
    const float* bv = static_cast<const float*>(packed_b);
    for (int i = 0; i < a.m; ++i)
      for (int j = 0; j < n; ++j) {
        float acc = 0;
        for (int x = 0; x < a.k; ++x) acc += av[int64_t(i) * a.lda + x] * bv[int64_t(j) * a.k + x];
        c[int64_t(i) * ldc + j] = accumulate ? c[int64_t(i) * ldc + j] + acc : acc;
      }
    return;
  }
  const int kc = k_pad(a.k), es = ks->elem_bytes, panels = (n + tile.nr - 1) / tile.nr;
  cpu::UkrArgs u{};
  u.kc = kc;
  u.group = kc;
  u.lda = a.lda;
  u.ldc = ldc;
  u.accumulate = accumulate;
  for (int ir = 0; ir < a.m; ir += tile.mr) {
    u.a = a.data + int64_t(ir) * a.lda * es;
    u.m_valid = std::min(tile.mr, a.m - ir);
    for (int p = 0; p < panels; ++p) {
      u.b = static_cast<const char*>(packed_b) + size_t(p) * kc * tile.nr * es;
      u.n_valid = std::min(tile.nr, n - p * tile.nr);
      u.c = c + int64_t(ir) * ldc + int64_t(p) * tile.nr;
      tile.ukr(u);
    }
  }
}

}  // namespace tessera::flash_mla
