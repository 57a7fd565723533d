/* tessera/tl/runtime/abi.h - the C interface between a compiled tile-language kernel (.so) and the
 * program that loads it (libtessera: the Python package, or a C++ program linked with libtessera).
 *
 * A kernel library exports two C functions:
 *   int tessera_tl_launch_v1(const TlRuntime* rt, const TlLaunchArgs* args);
 *   const char* tessera_tl_signature_v1(void);   (parameter description, see src/tl/runtime/signature.cc)
 * The loader passes a TlRuntime: the kernel calls back through it for everything that lives in
 * libtessera (the thread pool, the GEMM micro-kernels). The library therefore links against nothing
 * but libc/libstdc++, and the same .so works from Python and from C++ (docs/tl.md, "AOT").
 * Plain C: both sides may be built by different compilers and flags. */
#ifndef TESSERA_TL_RUNTIME_ABI_H_
#define TESSERA_TL_RUNTIME_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_TL_ABI_VERSION 2

/* C[m, n] (+)= sum_k A[m, k] * B[n, k] over a tile; A and B of any supported element type (codes are
 * tessera::tl::DataType values), seen through strides; C is float32 with row stride ldc. A operand may
 * overhang the edge of its tensor: only a_rows x a_ks of A and b_rows x b_ks of B exist (are read);
 * the rest counts as zeros. */
typedef struct TlGemmArgs {
  const void* a;
  int32_t a_type;
  int64_t a_stride_m, a_stride_k;
  const void* b;
  int32_t b_type;
  int64_t b_stride_n, b_stride_k;
  float* c;
  int64_t ldc;
  int32_t m, n, k;
  int32_t clear; /* 1: C = A.B; 0: C += A.B */
  int32_t a_rows, a_ks, b_rows, b_ks;
} TlGemmArgs;

/* Runs block `block` of the grid; arena: arena_bytes of 64-byte aligned scratch owned by the calling
 * thread (the block's shared and fragment buffers). */
typedef void (*TlBlockFn)(void* ctx, int64_t block, void* arena);

typedef struct TlRuntime {
  int32_t abi_version;
  /* Runs fn for every block in [0, num_blocks) on the thread pool (blocks handed out dynamically);
   * returns when all are done. */
  void (*launch)(int64_t num_blocks, int64_t arena_bytes, TlBlockFn fn, void* ctx);
  void (*gemm)(const TlGemmArgs* args);
  /* Kernels whose global outputs total more bytes than this write them with non-temporal stores
   * (they would not stay in the cache anyway, and streaming saves the read-for-ownership). */
  int64_t stream_bytes;
  /* Threads launch() spreads blocks over (kernels choose between block schedules with it). */
  int32_t (*num_threads)(void);
} TlRuntime;

/* Arguments of one call, indexed by parameter position: data[i] and strides[i] (elements, one per
 * dim) for tensors; ints[i] or floats[i] for integer / floating scalars. symbols: the values of the
 * program's dynamic dimensions in declaration order. */
typedef struct TlLaunchArgs {
  void* const* data;
  const int64_t* const* strides;
  const int64_t* ints;
  const double* floats;
  const int64_t* symbols;
} TlLaunchArgs;

typedef int (*TlLaunchFn)(const TlRuntime* rt, const TlLaunchArgs* args);
typedef const char* (*TlSignatureFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TL_RUNTIME_ABI_H_ */
