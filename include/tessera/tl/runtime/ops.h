// tessera/tl/runtime/ops.h - what lowered tile operations call: row reductions, atomics, prefetches and
// the tile GEMM (a call back into libtessera's packed micro-kernels through TlRuntime).
#pragma once

#include <cstdint>
#include <limits>

#include "tessera/tl/runtime/abi.h"
#include "tessera/tl/runtime/vector.h"

namespace tlrt {

// ---- row reductions: a fixed combination order (lane-wise partials, then a halving tree), so a
// reduction's bits never depend on anything but its input ----
enum ReduceOp { kSum = 0, kMax = 1, kMin = 2, kAbsSum = 3, kAbsMax = 4 };

template <class V>
inline elem_t<V> hreduce(V v, int op) {
  for (int w = VW / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) {
      const auto a = v[l], b = v[l + w];
      v[l] = (op == kSum || op == kAbsSum) ? a + b : (op == kMin ? (b < a ? b : a) : (b > a ? b : a));
    }
  return v[0];
}

template <int kOp, class V>
inline V combine(V acc, V x) {
  if constexpr (kOp == kSum)
    return acc + x;
  else if constexpr (kOp == kAbsSum)
    return acc + vabs(x);
  else if constexpr (kOp == kMax)
    return x > acc ? x : acc;
  else if constexpr (kOp == kMin)
    return x < acc ? x : acc;
  else
    return vabs(x) > acc ? vabs(x) : acc;  // kAbsMax
}

template <int kOp, class V>
inline V identity() {
  using E = elem_t<V>;
  if constexpr (kOp == kMax)
    return splat<V>(std::numeric_limits<E>::has_infinity ? -std::numeric_limits<E>::infinity()
                                                         : std::numeric_limits<E>::lowest());
  if constexpr (kOp == kMin)
    return splat<V>(std::numeric_limits<E>::has_infinity ? std::numeric_limits<E>::infinity()
                                                         : std::numeric_limits<E>::max());
  return V{};
}

// Reduces n elements p[0], p[stride], ... (stride 1: vector loads; otherwise gathers).
template <int kOp, class V, class S, V (*LD)(const S*), V (*LDM)(const S*, vm), V (*LDG)(const S*, vl, vm)>
inline elem_t<V> reduce_row(const S* p, int64_t n, int64_t stride) {
  V acc[4] = {identity<kOp, V>(), identity<kOp, V>(), identity<kOp, V>(), identity<kOp, V>()};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 4 * VW <= n; i += 4 * VW)
      for (int u = 0; u < 4; ++u) acc[u] = combine<kOp>(acc[u], LD(p + i + u * VW));
    for (; i + VW <= n; i += VW) acc[0] = combine<kOp>(acc[0], LD(p + i));
    if (i < n) {
      const vm m = first_n(n - i);
      acc[1] = combine<kOp>(acc[1], vsel(m, LDM(p + i, m), identity<kOp, V>()));
    }
  } else {
    const vl lanes = __builtin_convertvector(iota(), vl) * stride;
    for (; i < n; i += VW) {
      const vm m = first_n(n - i);
      acc[0] = combine<kOp>(acc[0], vsel(m, LDG(p + i * stride, lanes, m), identity<kOp, V>()));
    }
  }
  const V all = combine < kOp == kAbsSum
                    ? kSum
                    : (kOp == kAbsMax ? kMax : kOp) >
                          (combine < kOp == kAbsSum ? kSum : (kOp == kAbsMax ? kMax : kOp) > (acc[0], acc[1]),
                           combine < kOp == kAbsSum ? kSum : (kOp == kAbsMax ? kMax : kOp) > (acc[2], acc[3]));
  return hreduce(all, kOp);
}

#define TLRT_REDUCE(NAME, S, V)                                                          \
  template <int kOp>                                                                     \
  inline elem_t<V> reduce_##NAME(const S* p, int64_t n, int64_t stride) {                \
    return reduce_row<kOp, V, S, ld_##NAME, ld_##NAME##_m, ld_##NAME##_g>(p, n, stride); \
  }
TLRT_REDUCE(f32, float, vf)
TLRT_REDUCE(f64, double, vd)
TLRT_REDUCE(bf16, uint16_t, vf)
TLRT_REDUCE(f16, uint16_t, vf)
TLRT_REDUCE(e4m3, uint8_t, vf)
TLRT_REDUCE(e5m2, uint8_t, vf)
TLRT_REDUCE(e2m1, uint8_t, vf)
TLRT_REDUCE(i8, int8_t, vi)
TLRT_REDUCE(u8, uint8_t, vi)
TLRT_REDUCE(i16, int16_t, vi)
TLRT_REDUCE(u16, uint16_t, vi)
TLRT_REDUCE(i32, int32_t, vi)
TLRT_REDUCE(u32, uint32_t, vu)
TLRT_REDUCE(i64, int64_t, vl)
TLRT_REDUCE(u64, uint64_t, vul)
#undef TLRT_REDUCE

// ---- atomics: read-modify-write with compare-and-swap on the storage bits (relaxed order; the
// launch's completion orders them before the caller sees the results) ----
template <class Bits, class C, class Dec, class Enc, class Op>
inline void atomic_rmw(Bits* p, C v, Dec dec, Enc enc, Op op) {
  Bits old = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    const Bits next = enc(op(dec(old), v));
    if (next == old) return;
    if (__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}

struct AddOp {
  template <class T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <class T>
  T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};
struct MinOp {
  template <class T>
  T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

inline float f32_of(uint32_t b) {
  return from_bits(b);
}
inline uint32_t bits_of(float x) {
  return bits(x);
}
inline double f64_of(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
inline uint64_t bits_of64(double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}
template <class T>
inline T same(T x) {
  return x;
}

#define TLRT_ATOMICS(NAME, S, BITS, C, DEC, ENC) \
  inline void atomic_add_##NAME(S* p, C v) {     \
    atomic_rmw((BITS*)p, v, DEC, ENC, AddOp{});  \
  }                                              \
  inline void atomic_max_##NAME(S* p, C v) {     \
    atomic_rmw((BITS*)p, v, DEC, ENC, MaxOp{});  \
  }                                              \
  inline void atomic_min_##NAME(S* p, C v) {     \
    atomic_rmw((BITS*)p, v, DEC, ENC, MinOp{});  \
  }
TLRT_ATOMICS(f32, float, uint32_t, float, f32_of, bits_of)
TLRT_ATOMICS(f64, double, uint64_t, double, f64_of, bits_of64)
TLRT_ATOMICS(bf16, uint16_t, uint16_t, float, bf16_to_f32, f32_to_bf16)
TLRT_ATOMICS(f16, uint16_t, uint16_t, float, f16_to_f32, f32_to_f16)
TLRT_ATOMICS(i32, int32_t, int32_t, int32_t, same<int32_t>, same<int32_t>)
TLRT_ATOMICS(u32, uint32_t, uint32_t, uint32_t, same<uint32_t>, same<uint32_t>)
TLRT_ATOMICS(i64, int64_t, int64_t, int64_t, same<int64_t>, same<int64_t>)
TLRT_ATOMICS(u64, uint64_t, uint64_t, uint64_t, same<uint64_t>, same<uint64_t>)
#undef TLRT_ATOMICS

// ---- prefetch of a 2-D source region into L2 (software pipelining of T.Pipelined copies) ----
inline void prefetch_2d(const void* p, int64_t rows, int64_t row_bytes, int64_t stride_bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(c + r * stride_bytes + o, 0, 2);
}

// ---- tile GEMM through libtessera's micro-kernels ----
inline void gemm(const TlRuntime* rt, const void* a, int32_t a_type, int64_t a_sm, int64_t a_sk, const void* b,
                 int32_t b_type, int64_t b_sn, int64_t b_sk, float* c, int64_t ldc, int32_t m, int32_t n, int32_t k,
                 int32_t clear, int32_t a_rows, int32_t a_ks, int32_t b_rows, int32_t b_ks) {
  auto clamp = [](int32_t v, int32_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); };
  const TlGemmArgs g = {a,
                        a_type,
                        a_sm,
                        a_sk,
                        b,
                        b_type,
                        b_sn,
                        b_sk,
                        c,
                        ldc,
                        m,
                        n,
                        k,
                        clear,
                        clamp(a_rows, m),
                        clamp(a_ks, k),
                        clamp(b_rows, n),
                        clamp(b_ks, k)};
  rt->gemm(&g);
}

}  // namespace tlrt
