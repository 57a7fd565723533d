// tessera/model_ep.h - expert parallelism for tessera::model over the ep component (library tessera_ep,
// which links MPI). docs/model.md "Expert parallelism".
#pragma once

#include <cstdint>
#include <memory>

#include "tessera/ep/group.h"
#include "tessera/model.h"

namespace tessera::model {

// An ExpertExchange over an ElasticBuffer of `group` (collective: every rank calls it with the same
// config and max_tokens_per_rank). Rank r holds the routed experts [r*E/R, (r+1)*E/R). Each MoE layer
// dispatches the tokens' FP8 rows (bf16 rows for a bf16 checkpoint) with their top-k experts and
// weights in the expanded layout, and combines without multiple reduction (every lane's bf16 output
// travels; the source sums its lanes in lane order), so the result equals one rank's bit for bit.
// max_tokens_per_rank bounds the tokens of one step on any rank (the buffer is sized for it); a peer
// that dies or stalls is an Error(kRuntime) naming it after at most timeout_s.
std::shared_ptr<ExpertExchange> make_ep_exchange(std::shared_ptr<ep::Group> group, const Config& config,
                                                 int64_t max_tokens_per_rank, double timeout_s = 300);

}  // namespace tessera::model
