// Bench kernels built with tessera/tl/builder.h (see tl_kernels.h).
#include "tl/tl_kernels.h"

#include <cmath>

#include "tessera/tl/builder.h"
#include "tessera/tl/expr_ops.h"

namespace tessera::bench {

using namespace tessera::tl;

Program tl_gemm_nt_program(int bm, int bn, int bk, int stages, DataType operands, DataType out) {
  KernelBuilder kb("gemm_nt");
  Expr M = kb.dynamic("M"), N = kb.dynamic("N"), K = kb.dynamic("K");
  Buffer A = kb.tensor("A", {M, K}, operands), B = kb.tensor("B", {N, K}, operands);
  Buffer C = kb.tensor("C", {M, N}, out);
  kb.kernel({ceildiv(N, bn), ceildiv(M, bm)}, 128, [&](const std::vector<Expr>& b) {
    Buffer As = kb.alloc("A_shared", {bm, bk}, operands, Scope::kShared);
    Buffer Bs = kb.alloc("B_shared", {bn, bk}, operands, Scope::kShared);
    Buffer Cl = kb.alloc("C_local", {bm, bn}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(Cl));
    kb.pipelined(ceildiv(K, bk), stages, [&](Expr k) {
      kb.copy(corner(A, {b[1] * bm, k * bk}), whole(As));
      kb.copy(corner(B, {b[0] * bn, k * bk}), whole(Bs));
      kb.gemm(whole(As), whole(Bs), whole(Cl), false, true);
    });
    kb.copy(whole(Cl), corner(C, {b[1] * bm, b[0] * bn}));
  });
  return kb.finish();
}

Program tl_add_relu_program(int bm, int bn) {
  KernelBuilder kb("add_relu");
  Expr M = kb.dynamic("M"), N = kb.dynamic("N");
  Buffer A = kb.tensor("A", {M, N}, DataType::kBFloat16), B = kb.tensor("B", {M, N}, DataType::kBFloat16);
  Buffer C = kb.tensor("C", {M, N}, DataType::kBFloat16);
  kb.kernel({ceildiv(N, bn), ceildiv(M, bm)}, 128, [&](const std::vector<Expr>& b) {
    kb.parallel({lift(bm), lift(bn)}, [&](const std::vector<Expr>& ij) {
      Expr y = kb.let("y", b[1] * bm + ij[0]), x = kb.let("x", b[0] * bn + ij[1]);
      kb.store(C, {y, x}, max(kb.load(A, {y, x}) + kb.load(B, {y, x}), 0.0f));
    });
  });
  return kb.finish();
}

Program tl_gemv_fp8_program(int k, int bn) {
  const int bk = 128, kblocks = k / bk;
  KernelBuilder kb("gemv_fp8");
  Expr N = kb.dynamic("N");
  Buffer W = kb.tensor("W", {N, lift(k)}, DataType::kFloat8E4M3);
  Buffer S = kb.tensor("scale", {N, lift(kblocks)}, DataType::kFloat32);
  Buffer x = kb.tensor("x", {lift(k)}, DataType::kBFloat16), y = kb.tensor("y", {N}, DataType::kFloat32);
  kb.kernel({ceildiv(N, bn)}, 128, [&](const std::vector<Expr>& b) {
    Buffer xs = kb.alloc("x_shared", {1, bk}, DataType::kBFloat16, Scope::kShared);
    Buffer ws = kb.alloc("w_shared", {bn, bk}, DataType::kFloat8E4M3, Scope::kShared);
    Buffer part = kb.alloc("part", {1, bn}, DataType::kFloat32, Scope::kFragment);
    Buffer acc = kb.alloc("acc", {bn}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(acc));
    kb.pipelined(lift(kblocks), 2, [&](Expr kk) {
      kb.copy(region(x, {kk * bk}, {lift(bk)}), whole(xs));
      kb.copy(corner(W, {b[0] * bn, kk * bk}), whole(ws));
      kb.gemm(whole(xs), whole(ws), whole(part), false, true, true);
      kb.parallel({lift(bn)}, [&](const std::vector<Expr>& j) {
        kb.store(acc, j, kb.load(acc, j) + kb.load(part, {lift(0), j[0]}) * kb.load(S, {b[0] * bn + j[0], kk}));
      });
    });
    kb.parallel({lift(bn)}, [&](const std::vector<Expr>& j) { kb.store(y, {b[0] * bn + j[0]}, kb.load(acc, j)); });
  });
  return kb.finish();
}

Program tl_gemv_fp8_tiled_program(int k, int bn, int stages) {
  const int bk = 128, kblocks = k / bk;
  KernelBuilder kb("gemv_fp8_tiled");
  Expr NB = kb.dynamic("NB");
  Buffer W = kb.tensor("W", {NB, lift(kblocks), lift(bn), lift(bk)}, DataType::kFloat8E4M3);
  Buffer S = kb.tensor("scale", {NB, lift(kblocks), lift(bn)}, DataType::kFloat32);
  Buffer x = kb.tensor("x", {lift(k)}, DataType::kBFloat16), y = kb.tensor("y", {NB, lift(bn)}, DataType::kFloat32);
  kb.kernel({NB}, 128, [&](const std::vector<Expr>& b) {
    Buffer xs = kb.alloc("x_shared", {1, bk}, DataType::kBFloat16, Scope::kShared);
    Buffer ws = kb.alloc("w_shared", {bn, bk}, DataType::kFloat8E4M3, Scope::kShared);
    Buffer part = kb.alloc("part", {1, bn}, DataType::kFloat32, Scope::kFragment);
    Buffer acc = kb.alloc("acc", {bn}, DataType::kFloat32, Scope::kFragment);
    kb.clear(whole(acc));
    kb.pipelined(lift(kblocks), stages, [&](Expr kk) {
      kb.copy(region(x, {kk * bk}, {lift(bk)}), whole(xs));
      kb.copy(corner(W, {b[0], kk, lift(0), lift(0)}), whole(ws));
      kb.gemm(whole(xs), whole(ws), whole(part), false, true, true);
      kb.parallel({lift(bn)}, [&](const std::vector<Expr>& j) {
        kb.store(acc, j, kb.load(acc, j) + kb.load(part, {lift(0), j[0]}) * kb.load(S, {b[0], kk, j[0]}));
      });
    });
    kb.parallel({lift(bn)}, [&](const std::vector<Expr>& j) { kb.store(y, {b[0], j[0]}, kb.load(acc, j)); });
  });
  return kb.finish();
}

Program tl_flash_attention_program(int batch, int heads, int seq, int dim, int bm, int bn, bool causal) {
  const float scale = 1.0f / std::sqrt(float(dim)) * 1.44269504f;
  KernelBuilder kb("flash_attention_fwd");
  const std::vector<Expr> shape = {lift(batch), lift(seq), lift(heads), lift(dim)};
  Buffer Q = kb.tensor("Q", shape, DataType::kBFloat16), K = kb.tensor("K", shape, DataType::kBFloat16);
  Buffer V = kb.tensor("V", shape, DataType::kBFloat16), O = kb.tensor("Output", shape, DataType::kBFloat16);
  kb.kernel({lift((seq + bm - 1) / bm), lift(heads), lift(batch)}, 128, [&](const std::vector<Expr>& b) {
    const Expr bx = b[0], by = b[1], bz = b[2];
    Buffer Qs = kb.alloc("Q_shared", {bm, dim}, DataType::kBFloat16, Scope::kShared);
    Buffer Ks = kb.alloc("K_shared", {bn, dim}, DataType::kBFloat16, Scope::kShared);
    Buffer Vs = kb.alloc("V_shared", {bn, dim}, DataType::kBFloat16, Scope::kShared);
    Buffer S = kb.alloc("acc_s", {bm, bn}, DataType::kFloat32, Scope::kFragment);
    Buffer P = kb.alloc("acc_s_cast", {bm, bn}, DataType::kBFloat16, Scope::kFragment);
    Buffer Acc = kb.alloc("acc_o", {bm, dim}, DataType::kFloat32, Scope::kFragment);
    Buffer mx = kb.alloc("scores_max", {bm}, DataType::kFloat32, Scope::kFragment);
    Buffer mx_prev = kb.alloc("scores_max_prev", {bm}, DataType::kFloat32, Scope::kFragment);
    Buffer sc = kb.alloc("scores_scale", {bm}, DataType::kFloat32, Scope::kFragment);
    Buffer sum = kb.alloc("scores_sum", {bm}, DataType::kFloat32, Scope::kFragment);
    Buffer logsum = kb.alloc("logsum", {bm}, DataType::kFloat32, Scope::kFragment);
    auto tile = [&](const Buffer& g, Expr row0, int rows) {
      return region(g, {bz, row0, by, lift(0)}, {lift(1), lift(rows), lift(1), lift(dim)});
    };
    kb.copy(tile(Q, bx * bm, bm), whole(Qs));
    kb.fill(whole(Acc), lift(0.0f));
    kb.fill(whole(logsum), lift(0.0f));
    kb.fill(whole(mx), -infinity(DataType::kFloat32));
    const Expr blocks = causal ? min(lift((seq + bn - 1) / bn), ceildiv((bx + 1) * bm, bn)) : lift((seq + bn - 1) / bn);
    kb.pipelined(blocks, 2, [&](Expr k) {
      kb.copy(tile(K, k * bn, bn), whole(Ks));
      kb.gemm(whole(Qs), whole(Ks), whole(S), false, true, true);
      kb.parallel({lift(bm), lift(bn)}, [&](const std::vector<Expr>& ij) {
        Expr key = k * bn + ij[1];
        Expr visible = causal ? (key < seq) && (key <= bx * bm + ij[0]) : key < seq;
        kb.store(S, ij, select(visible, kb.load(S, ij), -infinity(DataType::kFloat32)));
      });
      kb.copy(whole(mx), whole(mx_prev));
      kb.reduce(ReduceKind::kMax, whole(S), whole(mx), 1, false);
      kb.parallel({lift(bm)}, [&](const std::vector<Expr>& i) {
        kb.store(sc, i, exp2(kb.load(mx_prev, i) * scale - kb.load(mx, i) * scale));
      });
      kb.parallel({lift(bm), lift(bn)}, [&](const std::vector<Expr>& ij) {  // P = bf16(S) in the same pass
        Expr e = kb.let("e", exp2(kb.load(S, ij) * scale - kb.load(mx, {ij[0]}) * scale));
        kb.store(S, ij, e);
        kb.store(P, ij, e);
      });
      kb.reduce(ReduceKind::kSum, whole(S), whole(sum), 1);
      kb.parallel({lift(bm)}, [&](const std::vector<Expr>& i) {
        kb.store(logsum, i, kb.load(logsum, i) * kb.load(sc, i) + kb.load(sum, i));
      });
      kb.parallel({lift(bm), lift(dim)},
                  [&](const std::vector<Expr>& ij) { kb.store(Acc, ij, kb.load(Acc, ij) * kb.load(sc, {ij[0]})); });
      kb.copy(tile(V, k * bn, bn), whole(Vs));
      kb.gemm(whole(P), whole(Vs), whole(Acc));
    });
    kb.parallel({lift(bm), lift(dim)},
                [&](const std::vector<Expr>& ij) { kb.store(Acc, ij, kb.load(Acc, ij) / kb.load(logsum, {ij[0]})); });
    kb.copy(whole(Acc), tile(O, bx * bm, bm));
  });
  return kb.finish();
}

}  // namespace tessera::bench
