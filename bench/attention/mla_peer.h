// The FlashMLA peer: "dequantise, then oneDNN bf16 matmuls", unfused. Per query group: gather and
// dequantise its K rows (and V transposed) with plain loops, S = Q.K^T with oneDNN (bf16 out), an fp32
// softmax (causal masks applied), P normalised to bf16, O = P.V with oneDNN. The plain loops run on
// oneDNN's OpenMP threads (see OnednnMatmul::parallel_for). Primitives are made in the constructor.
#pragma once

#include <cstdint>
#include <memory>

#include "attention/mla_problem.h"
#include "peers/onednn_matmul.h"

namespace tessera::bench {

class MlaPeer {
 public:
  static bool available() { return OnednnMatmul::available(); }
  explicit MlaPeer(const MlaProblem& p);
  // All groups on input copy i; out is bf16 [groups * rows][512] in group order.
  void run(int64_t i, uint16_t* out);

 private:
  const MlaProblem& p_;
  std::unique_ptr<OnednnMatmul> qk_, pv_;
  AlignedPtr<uint16_t> k_, v_t_, s_, probs_;
};

}  // namespace tessera::bench
