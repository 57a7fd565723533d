// The model's ExpertExchange over ElasticBuffer (tessera/model_ep.h). Built into tessera_ep (with MPI),
// so libtessera's model runner needs no MPI for one rank.
#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/ep/elastic_buffer.h"
#include "tessera/model_ep.h"

namespace tessera::model {
namespace {

class EpExchange final : public ExpertExchange {
 public:
  EpExchange(std::shared_ptr<ep::Group> group, const Config& c, int64_t max_tokens, double timeout_s)
      : group_(group),
        dim_(c.dim),
        topk_(c.n_activated_experts),
        experts_(c.n_routed_experts),
        fp8_(c.fp8()),
        max_tokens_(max_tokens) {
    ep::ElasticBufferConfig cfg;
    cfg.num_max_tokens_per_rank = int(max_tokens);
    cfg.hidden = int(c.dim);
    cfg.num_topk = int(c.n_activated_experts);
    cfg.use_fp8_dispatch = fp8_;
    // Direct mode and one bf16 rounding per token at its source: the sum does not depend on R.
    cfg.allow_hybrid_mode = false;
    cfg.allow_multiple_reduction = false;
    cfg.num_cpu_timeout_secs = timeout_s;
    buffer_ = std::make_unique<ep::ElasticBuffer>(std::move(group), cfg);
  }

  int rank() const override { return group_->rank(); }
  int ranks() const override { return group_->size(); }
  int64_t max_tokens() const override { return max_tokens_; }

  void exchange(const RoutedTokens& t, const LocalExperts& run_local, uint16_t* out) override {
    const int64_t T = t.rows, K = t.topk, dim = dim_, packs = dim / 128;
    // The ep inputs must be defined even when this rank has no tokens.
    static uint8_t none[16] = {};
    std::vector<int64_t> idx(size_t(std::max<int64_t>(T * K, 1)));
    for (int64_t i = 0; i < T * K; ++i) idx[size_t(i)] = t.experts[i];
    std::vector<float> w(size_t(std::max<int64_t>(T * K, 1)));
    if (T > 0) std::copy_n(t.weights, T * K, w.data());
    ep::DispatchArgs a;
    if (fp8_) {
      a.x = TensorView(T > 0 ? const_cast<uint8_t*>(t.codes) : none, DType::kF8E4M3, {T, dim});
      a.sf = TensorView(T > 0 ? const_cast<float*>(t.scales) : reinterpret_cast<float*>(none), DType::kF32, {T, packs});
    } else {
      a.x =
          TensorView(T > 0 ? const_cast<uint16_t*>(t.bf16) : reinterpret_cast<uint16_t*>(none), DType::kBF16, {T, dim});
    }
    a.topk_idx = TensorView(idx.data(), DType::kI64, {T, K});
    a.topk_weights = TensorView(w.data(), DType::kF32, {T, K});
    a.num_experts = int(experts_);
    a.expert_alignment = 1;
    a.do_expand = true;
    const ep::DispatchResult d = buffer_->dispatch(a);
    const ep::EpHandle& h = *d.handle;

    // The received rows: grouped by local expert, each in (source rank, source token) order.
    const int64_t M = h.num_expanded_tokens, local = experts_ / ranks();
    ExpertRows r;
    r.rows = M;
    r.dim = dim;
    r.first_expert = int64_t(rank()) * local;
    r.begin.assign(size_t(local + 1), 0);
    for (int64_t e = 0; e < local; ++e)
      r.begin[size_t(e) + 1] = r.begin[size_t(e)] + h.num_recv_tokens_per_expert_list[size_t(e)];
    TESSERA_CHECK(r.begin.back() == M, "model expert exchange: the dispatch returned ", M, " rows but its experts' ",
                  "counts add up to ", r.begin.back());
    std::vector<float> scales;
    if (fp8_) {
      r.codes = d.recv_x.view.ptr<uint8_t>();
      const TensorView& sf = d.recv_sf.view;
      scales.resize(size_t(M * packs));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t p = 0; p < packs; ++p)
          scales[size_t(i * packs + p)] = sf.ptr<float>()[i * sf.strides[0] + p * sf.strides[1]];
      r.scales = scales.data();
    } else {
      r.bf16 = d.recv_x.view.ptr<uint16_t>();
    }
    r.weights = d.recv_topk_weights.view.ptr<float>();
    std::vector<uint16_t> y(size_t(std::max<int64_t>(M * dim, 1)));
    r.out = y.data();
    run_local(r);

    ep::CombineArgs c;
    c.x = TensorView(y.data(), DType::kBF16, {M, dim});
    const ep::CombineResult res = buffer_->combine(c, h);
    const TensorView& cx = res.combined_x.view;
    for (int64_t i = 0; i < T; ++i) std::memcpy(out + i * dim, cx.ptr<uint16_t>() + i * cx.strides[0], size_t(dim) * 2);
  }

 private:
  std::shared_ptr<ep::Group> group_;
  int64_t dim_, topk_, experts_;
  bool fp8_;
  int64_t max_tokens_;
  std::unique_ptr<ep::ElasticBuffer> buffer_;
};

}  // namespace

std::shared_ptr<ExpertExchange> make_ep_exchange(std::shared_ptr<ep::Group> group, const Config& config,
                                                 int64_t max_tokens_per_rank, double timeout_s) {
  TESSERA_CHECK(group != nullptr, "make_ep_exchange: argument 'group' must not be null");
  TESSERA_CHECK(max_tokens_per_rank >= 1, "make_ep_exchange: argument 'max_tokens_per_rank' must be >= 1, got ",
                max_tokens_per_rank);
  TESSERA_CHECK(config.n_routed_experts % group->size() == 0,
                "make_ep_exchange: n_routed_experts = ", config.n_routed_experts, " must be a multiple of the group's ",
                group->size(), " ranks");
  return std::make_shared<EpExchange>(std::move(group), config, max_tokens_per_rank, timeout_s);
}

}  // namespace tessera::model
