// The decode GEMVs' row counts as compile-time constants: every GEMV kernel set instantiates its row
// kernels for M = 1..8 activation rows (registers per row are fixed at compile time) and picks one per
// call. Header-only; each ISA folder's instantiations stay inside its own translation units (the
// callers pass lambdas local to them).
#pragma once

#include <type_traits>

namespace tessera::cpu {

// fn(std::integral_constant<int, M>{}) for M = m, with m in 1..8 (larger m runs as 8: GemvArgs allow
// at most 8 rows).
template <class Fn>
inline decltype(auto) with_gemv_row_count(int m, Fn&& fn) {
  switch (m) {
    case 1:
      return fn(std::integral_constant<int, 1>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    case 4:
      return fn(std::integral_constant<int, 4>{});
    case 5:
      return fn(std::integral_constant<int, 5>{});
    case 6:
      return fn(std::integral_constant<int, 6>{});
    case 7:
      return fn(std::integral_constant<int, 7>{});
    default:
      return fn(std::integral_constant<int, 8>{});
  }
}

}  // namespace tessera::cpu
