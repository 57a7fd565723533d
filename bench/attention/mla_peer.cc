// The unfused FlashMLA peer (see mla_peer.h).
#include "attention/mla_peer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/core/dtype.h"

namespace tessera::bench {

MlaPeer::MlaPeer(const MlaProblem& p) : p_(p) {
  const int64_t n = p.tokens(), rows = p.rows();
  qk_ = std::make_unique<OnednnMatmul>(rows, n, p.d_qk());
  pv_ = std::make_unique<OnednnMatmul>(rows, 512, n);
  k_ = aligned_array<uint16_t>(size_t(n * p.d_qk()));
  v_t_ = aligned_array<uint16_t>(size_t(512 * n));
  s_ = aligned_array<uint16_t>(size_t(rows * n));
  probs_ = aligned_array<uint16_t>(size_t(rows * n));
}

void MlaPeer::run(int64_t i, uint16_t* out) {
  const int64_t n = p_.tokens(), rows = p_.rows();
  for (int64_t g = 0; g < p_.groups(); ++g) {
    OnednnMatmul::parallel_for(n, [&](int64_t t0, int64_t t1) { p_.gather(g, i, k_.get(), v_t_.get(), t0, t1); });
    qk_->run(p_.q_row(g, 0), k_.get(), s_.get());
    OnednnMatmul::parallel_for(rows, [&](int64_t r0, int64_t r1) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t vis = p_.visible(int(r));
        float mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < vis; ++t) {
          x[size_t(t)] = bf16_to_f32(s_[size_t(r * n + t)]) * p_.scale();
          mx = std::max(mx, x[size_t(t)]);
        }
        for (int64_t t = 0; t < vis; ++t) sum += (x[size_t(t)] = std::exp(x[size_t(t)] - mx));
        for (int64_t t = 0; t < n; ++t) probs_[size_t(r * n + t)] = t < vis ? f32_to_bf16(x[size_t(t)] / sum) : 0;
      }
    });
    pv_->run(probs_.get(), v_t_.get(), out + g * rows * 512);
  }
}

}  // namespace tessera::bench
