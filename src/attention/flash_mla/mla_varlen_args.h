// Argument checks shared by the dense MHA prefill forward and backward (flash_attn_varlen_fwd/_bwd): the
// q/k/v shapes and dtypes, the cu_seqlens prefix sums and the head grouping, read into per-request ranges.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/flash_mla.h"

namespace tessera::flash_mla {

struct VarlenLayout {
  int64_t b = 0, total_q = 0, h_q = 0, d_qk = 0, total_kv = 0, h_kv = 0, d_v = 0;
  std::vector<int64_t> q_begin, q_len, kv_begin, kv_len;  // per request
  double scale = 0;                                       // softmax_scale or d_qk^-0.5
};

// Validates in.q/k/v, cu_seqlens_*, max_seqlen_* and softmax_scale; errors name `fn`, the argument and
// the rule.
VarlenLayout check_varlen_inputs(const char* fn, const VarlenInputs& in);

// Checks a per-token tensor: one of `dtypes`, shape `shape` (dim_names[i] names dim i in errors); an
// `output` must also have a contiguous last dim and must not overlap q, k or v.
void check_varlen_tensor(const char* fn, const char* arg, const TensorView& t, std::initializer_list<DType> dtypes,
                         std::initializer_list<int64_t> shape, const char* const* dim_names, bool output,
                         const VarlenInputs& in);

}  // namespace tessera::flash_mla
