// oneDNN, the peer for bf16 GEMMs: D[M,N] (bf16) = A[M,K] (bf16, row-major) . B[N,K]^T. B is handed
// to dnnl::matmul in place as the [K,N] weights matrix with strides (1, K), so no transpose copy is
// made. The primitive is created in the constructor, outside any timed loop.
//
// Where this CPU's oneDNN refuses bf16 matmul (Debian's 2.6 on an AVX2-only CPU: "could not create a
// primitive descriptor iterator"), the peer falls back to an fp32 matmul: every run converts A and B
// to fp32 and D back to bf16 on oneDNN's threads (timed with it), and label() says "oneDNN-fp32".
// When TESSERA_ISA caps tessera below this CPU's level, oneDNN is capped the same way (its
// set_max_cpu_isa), so a capped run compares like with like.
// Built from onednn_matmul.cc when oneDNN was found, else from onednn_matmul_none.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tessera::bench {

class OnednnMatmul {
 public:
  static bool available();
  static void set_threads(int n);  // OpenMP threads oneDNN uses
  // fn(begin, end) over a static partition of [0, n) on oneDNN's own OpenMP threads. Peer work done
  // between oneDNN calls runs here: on our pool it would compete with oneDNN's idle workers, which
  // busy-wait after each call (measured here, fp8 M=1 N=2112 K=7168, dequantise + oneDNN: 3.8 ms
  // with the dequantisation on our pool, 2.0 ms on these threads).
  static void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // The peer's name in the tables: "oneDNN" (bf16 matmul) or "oneDNN-fp32" (the fallback).
  static std::string label();
  // One line for the report: version, cap and what the matmul runs, e.g. "oneDNN 2.6.3 (capped at
  // avx2): bf16 matmul refused here, so fp32 matmul on operands converted per call".
  static std::string description();

  OnednnMatmul(int64_t m, int64_t n, int64_t k);
  ~OnednnMatmul();
  void run(const void* a, const void* b, void* d);
  std::string implementation() const;  // what oneDNN chose, e.g. "brg:avx512_core_bf16"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::bench
