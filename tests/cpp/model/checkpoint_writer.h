// Writes small random checkpoints in docs/model.md's layout (config.json + safetensors files) for the
// model tests, and raw safetensors files for the reader's error tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/model.h"

namespace tessera::model::testing {

struct RawTensor {
  std::string name, dtype;  // safetensors dtype name: "BF16", "F32", "F8_E4M3", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The safetensors encoding of tensors (header padded to 8 bytes).
std::vector<uint8_t> encode_safetensors(const std::vector<RawTensor>& tensors);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// Every key of c as a JSON object.
std::string config_json(const Config& c);

// A small config every kernel accepts: 2 layers (one dense, one MoE), 2 MLA heads, 8 experts in
// 2 groups, index_topk 16 so prompts longer than 16 tokens exercise the sparse selection.
Config tiny_config(bool fp8);

// Random weights (normal / sqrt(fan_in), norms near 1), spread over `files` safetensors files.
void write_random_checkpoint(const std::string& dir, const Config& c, uint64_t seed, int files = 2);

// A fresh folder under the test temp dir.
std::string make_temp_dir(const std::string& tag);

}  // namespace tessera::model::testing
