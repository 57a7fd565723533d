#include "ep/ep_data.h"

#include <cstring>

#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"

namespace tessera::bench {
namespace {

uint64_t mix(uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  v *= 0xc4ceb9fe1a85ec53ull;
  return v ^ (v >> 33);
}

uint64_t key(int rank, int64_t t, int64_t h, uint64_t salt) {
  return mix((uint64_t(rank) << 48) ^ (uint64_t(t) << 20) ^ uint64_t(h) ^ (salt << 56));
}

// A non-zero bf16 in about [-2, 2].
uint16_t x_value(int rank, int64_t t, int64_t h) {
  const uint64_t v = key(rank, t, h, 1);
  const float f = (float(v & 0xFFFF) / 65536.0f + 0.05f) * ((v >> 16) & 1 ? -2.0f : 2.0f);
  return f32_to_bf16(f);
}

uint8_t x8_value(int rank, int64_t t, int64_t h) {
  const uint8_t code = uint8_t(key(rank, t, h, 2));
  return (code & 0x7F) == 0x7F ? uint8_t(code ^ 1) : code;  // no NaN
}

}  // namespace

int64_t dispatch_token_bytes(const EpCase& c, bool fp8) {
  return int64_t(c.hidden) * (fp8 ? 1 : 2) + (fp8 ? int64_t(c.hidden / 128) * 4 : 0) + int64_t(c.topk) * 8 +
         int64_t(c.topk) * 4;
}

int64_t combine_token_bytes(const EpCase& c) {
  return int64_t(c.hidden) * 2 + int64_t(c.topk) * 4;
}

EpInputs make_ep_inputs(const EpCase& c, int rank) {
  EpInputs in;
  in.rank = rank;
  in.T = c.tokens;
  in.hidden = c.hidden;
  in.K = c.topk;
  in.packs = c.hidden / 128;
  in.x.resize(size_t(in.T * in.hidden));
  in.x8.resize(size_t(in.T * in.hidden));
  in.sf.resize(size_t(in.T * in.packs));
  in.idx.resize(size_t(in.T * in.K));
  in.w.resize(size_t(in.T * in.K));
  parallel_for(in.T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t h = 0; h < in.hidden; ++h) {
        in.x[size_t(t * in.hidden + h)] = x_value(rank, t, h);
        in.x8[size_t(t * in.hidden + h)] = x8_value(rank, t, h);
      }
      for (int p = 0; p < in.packs; ++p)
        in.sf[size_t(t * in.packs + p)] = 1.0f + float(key(rank, t, p, 3) & 255) / 256.0f;
      int k = 0;
      for (uint64_t draw = 0; k < in.K; ++draw) {
        const int64_t e = int64_t(key(rank, t, int64_t(draw), 4) % uint64_t(c.experts));
        bool seen = false;
        for (int j = 0; j < k; ++j) seen |= in.idx[size_t(t * in.K + j)] == e;
        if (seen) continue;
        in.w[size_t(t * in.K + k)] = float(key(rank, t, k, 5) & 1023) / 1024.0f;
        in.idx[size_t(t * in.K + k++)] = e;
      }
    }
  });
  return in;
}

std::string check_dispatch(const ep::DispatchResult& r, const EpCase& c, int num_max, bool fp8) {
  const ep::EpHandle& h = *r.handle;
  const int64_t rows = h.num_recv_tokens;
  const int K = h.num_topk;
  std::string error;
  for (int64_t i = 0; i < rows && error.empty(); ++i) {
    const int32_t g = h.recv_src_metadata[size_t(i * (K + 2))];
    const int src = g / num_max;
    const int64_t t = g % num_max;
    for (int64_t hh = 0; hh < c.hidden; ++hh) {
      const bool same = fp8 ? r.recv_x.view.ptr<uint8_t>()[i * c.hidden + hh] == x8_value(src, t, hh)
                            : r.recv_x.view.ptr<uint16_t>()[i * c.hidden + hh] == x_value(src, t, hh);
      if (!same) {
        error = "wrong result: received row " + std::to_string(i) + " (rank " + std::to_string(src) + " token " +
                std::to_string(t) + ") differs at channel " + std::to_string(hh);
        break;
      }
    }
  }
  return error;
}

std::string check_combine(const ep::CombineResult& r, const EpInputs& mine, const EpCase& c) {
  const int epr = c.experts / c.ranks;
  for (int64_t t = 0; t < mine.T; ++t) {
    int destinations = 0;
    for (int k = 0; k < mine.K; ++k) {
      bool later = false;
      const int64_t d = mine.idx[size_t(t * mine.K + k)] / epr;
      for (int j = k + 1; j < mine.K; ++j) later |= mine.idx[size_t(t * mine.K + j)] / epr == d;
      destinations += !later;
    }
    for (int64_t hh = 0; hh < c.hidden; ++hh) {
      float acc = 0.0f;
      const float x = bf16_to_f32(mine.x[size_t(t * c.hidden + hh)]);
      for (int n = 0; n < destinations; ++n) acc += x;
      if (r.combined_x.view.ptr<uint16_t>()[t * c.hidden + hh] != f32_to_bf16(acc))
        return "wrong result: combined token " + std::to_string(t) + " differs at channel " + std::to_string(hh);
    }
  }
  return "";
}

}  // namespace tessera::bench
