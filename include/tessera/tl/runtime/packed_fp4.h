// tessera/tl/runtime/packed_fp4.h - global float4 e2m1 tensors: two codes per byte, element 2i in the low
// nibble (the packing of DeepGEMM's and TileKernels' FP4 tensors).
//
// A kernel holds such a tensor as a `nibbles` pointer. Offsets count codes, and `q + k` and `q[k]` behave
// as they do on a plain pointer, so generated code addresses it like any other tensor; loads take the
// nibble they address and stores rewrite only theirs. A store rewrites its byte, so two threads must not
// store the two codes of one byte at the same time: blocks whose tiles start and end on even columns
// never do.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/tl/runtime/ops.h"
#include "tessera/tl/runtime/vector.h"

namespace tlrt {

struct nibbles {
  uint8_t* p = nullptr;
  int64_t o = 0;  // offset of element 0, in codes from p

  nibbles() = default;
  nibbles(uint8_t* bytes, int64_t codes = 0) : p(bytes), o(codes) {}  // from a tensor's byte address

  struct ref {
    uint8_t* byte;
    int shift;
    operator uint8_t() const { return uint8_t((*byte >> shift) & 15); }
    ref& operator=(uint8_t code) {
      *byte = uint8_t((*byte & ~(15 << shift)) | ((code & 15) << shift));
      return *this;
    }
  };
  nibbles operator+(int64_t k) const { return {p, o + k}; }
  ref operator[](int64_t k) const {
    const int64_t i = o + k;  // i >> 1 and i & 1 floor for negative i too
    return {p + (i >> 1), int(i & 1) * 4};
  }
  const uint8_t* first_byte() const { return p + (o >> 1); }
};

inline vb nibble_codes(nibbles q) {  // VW consecutive codes
  vb r = {};
  if ((q.o & 1) == 0) {
    const uint8_t* s = q.first_byte();
    for (int k = 0; k < VW / 2; ++k) {
      r[2 * k] = uint8_t(s[k] & 15);
      r[2 * k + 1] = uint8_t(s[k] >> 4);
    }
    return r;
  }
  for (int l = 0; l < VW; ++l) r[l] = q[l];
  return r;
}
inline void store_nibble_codes(nibbles q, vb c) {
  if ((q.o & 1) == 0) {
    uint8_t* d = q.p + (q.o >> 1);
    for (int k = 0; k < VW / 2; ++k) d[k] = uint8_t((c[2 * k] & 15) | (c[2 * k + 1] << 4));
    return;
  }
  for (int l = 0; l < VW; ++l) q[l] = c[l];
}

// The raw loads and stores vector.h's copies and TLRT_VECTOR_DTYPE use, for packed tensors: the "bits"
// of a float4 lane are its code (a T.copy between an on-chip float4 tile and a packed tensor moves codes
// without a decode and re-encode). Masked lanes never touch memory: a masked access goes lane by lane.
template <class R>
inline R raw_load(nibbles q) {
  static_assert(std::is_same_v<R, vb>, "float4 codes travel as byte vectors");
  return nibble_codes(q);
}
template <class R>
inline R raw_load_m(nibbles q, vm m) {
  R r = {};
  for (int l = 0; l < VW; ++l)
    if (m[l]) r[l] = q[l];
  return r;
}
template <class R>
inline R raw_gather(nibbles q, vl off, vm m) {
  R r = {};
  for (int l = 0; l < VW; ++l)
    if (m[l]) r[l] = q[off[l]];
  return r;
}
template <class R>
inline void raw_store(nibbles q, R c) {
  store_nibble_codes(q, c);
}
template <class R>
inline void raw_store_m(nibbles q, R c, vm m) {
  for (int l = 0; l < VW; ++l)
    if (m[l]) q[l] = c[l];
}
template <class R>
inline void raw_store_nt(nibbles q, R c, bool) {
  store_nibble_codes(q, c);
}
template <class R>
inline void raw_scatter(nibbles q, vl off, R c, vm m) {
  for (int l = 0; l < VW; ++l)
    if (m[l]) q[off[l]] = c[l];
}

// TLRT_VECTOR_DTYPE(e2m1, ...) for packed tensors.
inline vf ld_e2m1(nibbles q) {
  return dec_e2m1(raw_load<vb>(q));
}
inline vf ld_e2m1_m(nibbles q, vm m) {
  return dec_e2m1(raw_load_m<vb>(q, m));
}
inline vf ld_e2m1_g(nibbles q, vl off, vm m) {
  return dec_e2m1(raw_gather<vb>(q, off, m));
}
inline void st_e2m1(nibbles q, vf v) {
  raw_store(q, enc_e2m1(v));
}
inline void st_e2m1_m(nibbles q, vf v, vm m) {
  raw_store_m(q, enc_e2m1(v), m);
}
inline void st_e2m1_nt(nibbles q, vf v, bool stream) {
  raw_store_nt(q, enc_e2m1(v), stream);
}
inline void st_e2m1_s(nibbles q, vl off, vf v, vm m) {
  raw_scatter(q, off, enc_e2m1(v), m);
}

// Region prefetches (ops.h) size rows in codes of one byte each: halve them.
inline void prefetch_2d(nibbles q, int64_t rows, int64_t row_codes, int64_t stride_codes) {
  prefetch_2d(q.first_byte(), rows, (row_codes + 1) / 2, stride_codes / 2);
}

}  // namespace tlrt
