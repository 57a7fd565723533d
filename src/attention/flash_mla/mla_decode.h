// The two decode problems behind flash_mla_with_kvcache. Each factory validates every argument (inputs,
// referenced block_table entries, output views) and returns the task, its configuration and the token
// capacities the split plan is based on; nothing is written before it returns.
#pragma once

#include <memory>
#include <vector>

#include "attention/flash_mla/mla_task.h"
#include "tessera/flash_mla.h"

namespace tessera::flash_mla {

struct DecodeSetup {
  std::unique_ptr<MlaTask> task;
  SchedConfig config;
  std::vector<int64_t> lens;  // per request: the token capacity the split plan divides
  int64_t units_per_item = 1;
};

DecodeSetup make_dense_decode(const char* fn, const KvcacheInputs& in, const TensorView& out, const TensorView& lse);
DecodeSetup make_sparse_decode(const char* fn, const KvcacheInputs& in, const TensorView& out, const TensorView& lse);

// Shared checks of the outputs: out [b, s_q, h_q, d_v] with dtype out_type and a contiguous last dim,
// lse [b, h_q, s_q] float32; neither may overlap the other or q.
void check_decode_outputs(const char* fn, const KvcacheInputs& in, const TensorView& out, const TensorView& lse,
                          int64_t d_v);
// The dense / sparse configuration fields from the inputs (what FlashMLASchedMeta records).
SchedConfig decode_config(const KvcacheInputs& in);

}  // namespace tessera::flash_mla
