// Inputs of `tessera bench ep`, defined by a hash of (rank, token, channel) so every rank can
// recompute any other rank's rows to check what it received, and the result checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ep.h"

namespace tessera::bench {

struct EpCase {
  int ranks = 2;
  int64_t tokens = 4096;  // per rank
  int hidden = 7168;
  int topk = 8;
  int experts = 256;
};

struct EpInputs {
  int rank = 0;
  int64_t T = 0;
  int hidden = 0, K = 0, packs = 0;
  std::vector<uint16_t> x;   // bf16 [T, hidden]
  std::vector<uint8_t> x8;   // e4m3 [T, hidden]
  std::vector<float> sf;     // [T, hidden / 128]
  std::vector<int64_t> idx;  // [T, K]: K distinct experts, uniformly random
  std::vector<float> w;      // [T, K]
};

EpInputs make_ep_inputs(const EpCase& c, int rank);

// Every received row against its source row (recv_src_metadata column 0). Empty string = passed.
std::string check_dispatch(const ep::DispatchResult& r, const EpCase& c, int num_max, bool fp8);
// Identity experts: combined[t] = bf16(x[t] summed once per destination rank, in fp32).
std::string check_combine(const ep::CombineResult& r, const EpInputs& mine, const EpCase& c);

// Bytes per token: dispatched = hidden bytes (+ scale packs) + topk indices + weights;
// combined = hidden * 2 + topk weights (DeepEP's accounting).
int64_t dispatch_token_bytes(const EpCase& c, bool fp8);
int64_t combine_token_bytes(const EpCase& c);

}  // namespace tessera::bench
