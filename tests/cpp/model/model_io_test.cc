// Config parsing and the safetensors reader: every bad input is refused with an error naming the key,
// file, tensor and rule; good input round-trips.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint_writer.h"
#include "core/asan.h"
#include "model/safetensors.h"
#include "tessera/core/error.h"
#include "tessera/core/json.h"
#include "tessera/model.h"

namespace tessera::model {
namespace {

using testing::encode_safetensors;
using testing::RawTensor;
using testing::write_file;

template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<const char*> needles, ErrorCode code = ErrorCode::kInvalidArgument) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " | " << n;
  }
}

TEST(ModelConfig, DefaultsAndOverrides) {
  const Config c = Config::from_json(R"({"q_lora_rank": 1536, "inter_dim": 10880, "dtype": "fp8",
                                         "scale_fmt": "ue8m0", "route_scale": 2.5, "score_func": "sigmoid"})");
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.vocab_size, 102400);
  EXPECT_EQ(c.dim, 2048);
  EXPECT_TRUE(c.fp8());
  EXPECT_TRUE(c.ue8m0());
  EXPECT_DOUBLE_EQ(c.route_scale, 2.5);
  EXPECT_EQ(c.score_func, "sigmoid");
  const Config t = testing::tiny_config(true);
  const Config back = Config::from_json(testing::config_json(t));
  EXPECT_EQ(testing::config_json(back), testing::config_json(t));
}

TEST(ModelConfig, ErrorsNameTheKey) {
  const std::string base = R"("q_lora_rank": 128, "inter_dim": 256)";
  auto cfg = [&](const std::string& extra) { return "{" + base + (extra.empty() ? "" : ", " + extra) + "}"; };
  expect_error([&] { Config::from_json(cfg(R"("n_layer": 3)")); }, {"unknown key 'n_layer'"});
  expect_error([&] { Config::from_json(cfg(R"("dim": 2048.5)")); }, {"key 'dim'", "must be an integer"});
  expect_error([&] { Config::from_json(cfg(R"("dim": "big")")); }, {"key 'dim'", "a string"});
  expect_error([&] { Config::from_json(cfg(R"("dim": 100)")); }, {"key 'dim'", "multiple of 128"});
  expect_error([&] { Config::from_json(cfg(R"("kv_lora_rank": 256)")); }, {"key 'kv_lora_rank'", "512"});
  expect_error([&] { Config::from_json(cfg(R"("qk_rope_head_dim": 32)")); }, {"key 'qk_rope_head_dim'"});
  expect_error([&] { Config::from_json(cfg(R"("index_head_dim": 64)")); }, {"key 'index_head_dim'"});
  expect_error([&] { Config::from_json(cfg(R"("index_topk": 5000)")); }, {"key 'index_topk'", "4096"});
  expect_error([&] { Config::from_json(cfg(R"("dtype": "fp4")")); }, {"key 'dtype'"});
  expect_error([&] { Config::from_json(cfg(R"("scale_fmt": "e8m0")")); }, {"key 'scale_fmt'"});
  expect_error([&] { Config::from_json(cfg(R"("score_func": "relu")")); }, {"key 'score_func'"});
  expect_error([&] { Config::from_json(cfg(R"("n_expert_groups": 3)")); }, {"key 'n_expert_groups'"});
  expect_error([&] { Config::from_json(cfg(R"("n_dense_layers": 30)")); }, {"key 'n_dense_layers'"});
  expect_error([&] { Config::from_json(R"({"inter_dim": 256})"); }, {"key 'q_lora_rank'", "1536"});
  expect_error([&] { Config::from_json("[1, 2]"); }, {"must be a JSON object"});
  expect_error([&] { Config::from_json(cfg("") + "x", "my.json"); }, {"my.json: invalid JSON at byte"});
  expect_error([&] { Config::from_file("/nonexistent/config.json"); }, {"cannot open"});
}

TEST(Json, StrictParser) {
  const JsonValue v = json_parse(R"( {"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}} )", "t");
  ASSERT_EQ(v.kind, JsonValue::Kind::kObject);
  const JsonValue* a = v.find("a");
  ASSERT_TRUE(a && a->array.size() == 5);
  EXPECT_TRUE(a->array[0].is_integer);
  EXPECT_EQ(a->array[0].integer, 1);
  EXPECT_DOUBLE_EQ(a->array[1].number, -2500);
  EXPECT_FALSE(a->array[1].is_integer);
  EXPECT_EQ(a->array[4].string, "x\xc3\xa9\n");
  for (const char* bad : {"{\"a\":1,}", "[1,]", "{\"a\":1,\"a\":2}", "01", "nan", "\"\\x\"", "[1] 2", "{'a':1}",
                          "\"\\ud800\"", "", "1.", "-"})
    expect_error([&] { json_parse(bad, "t"); }, {"t: invalid JSON at byte"});
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("st"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string p = dir_ + "/" + name;
    write_file(p, bytes);
    return p;
  }
  std::string dir_;
};

TEST_F(Safetensors, ReadsTensorsInPlace) {
  std::vector<uint8_t> payload(24);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i);
  const std::string p =
      file("a.safetensors", encode_safetensors({{"w", "BF16", {3, 2}, {payload.begin(), payload.begin() + 12}},
                                                {"s", "F32", {3}, {payload.begin() + 12, payload.end()}}}));
  SafetensorsFile f(p);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].name, "w");
  EXPECT_EQ(f.tensors()[0].dtype, DType::kBF16);
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(f.tensors()[1].data[0], 12);
  TensorStore store(dir_);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.require("s", {DType::kF32}, {3}).data[3], 15);
  expect_error(
      [&] {
        store.require("w", {DType::kF32}, {3, 2});
      },
      {"tensor 'w'", "a.safetensors", "dtype F32", "got BF16"});
  expect_error([&] { store.require("w", {DType::kBF16}, {2, 3}); }, {"tensor 'w'", "shape [2, 3]", "got [3, 2]"});
  expect_error([&] { store.require("missing", {DType::kBF16}, {1}); }, {"tensor 'missing' is missing"});
}

TEST_F(Safetensors, BadFilesNameFileTensorAndRule) {
  const std::vector<uint8_t> good = encode_safetensors({{"w", "F32", {2, 2}, std::vector<uint8_t>(16, 1)}});
  // Truncated data: the last tensor's range runs past the end.
  std::vector<uint8_t> cut(good.begin(), good.end() - 4);
  expect_error([&] { SafetensorsFile f(file("cut.safetensors", cut)); },
               {"cut.safetensors", "tensor 'w'", "truncated"});
  // Shorter than the length field, and a header length beyond the file.
  expect_error([&] { SafetensorsFile f(file("tiny.safetensors", {1, 2, 3})); }, {"tiny.safetensors", "truncated"});
  std::vector<uint8_t> long_header = good;
  long_header[5] = 0x7F;
  expect_error([&] { SafetensorsFile f(file("len.safetensors", long_header)); }, {"len.safetensors", "header claims"});
  // A header that is not JSON.
  std::vector<uint8_t> garbage = good;
  garbage[8] = '?';
  expect_error([&] { SafetensorsFile f(file("bad.safetensors", garbage)); }, {"bad.safetensors", "invalid JSON"});
  // Size mismatch between shape x dtype and the byte range; unknown dtype.
  expect_error(
      [&] {
        SafetensorsFile f(file("size.safetensors", encode_safetensors({{"w", "F32", {3}, std::vector<uint8_t>(8)}})));
      },
      {"tensor 'w'", "span 8 bytes", "need 12"});
  expect_error(
      [&] {
        SafetensorsFile f(file("dt.safetensors", encode_safetensors({{"w", "Q7", {1}, std::vector<uint8_t>(1)}})));
      },
      {"tensor 'w'", "unknown dtype 'Q7'"});
  // The same tensor in two files of one checkpoint.
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  file("a.safetensors", good);
  file("b.safetensors", good);
  expect_error([&] { TensorStore s(dir_); }, {"tensor 'w' is in both"});
  expect_error([&] { TensorStore s(dir_ + "/none"); }, {"is not a folder"});
}

// A checkpoint with one tensor of the wrong shape or dtype is refused by Model naming it.
TEST_F(Safetensors, ModelNamesTheBadTensor) {
  const Config c = testing::tiny_config(true);
  testing::write_random_checkpoint(dir_, c, 1, 1);
  // Replace the only file with one lacking a tensor.
  SafetensorsFile f(dir_ + "/model-0.safetensors");
  std::vector<RawTensor> kept;
  for (const StoredTensor& t : f.tensors()) {
    if (t.name == "model.layers.1.mlp.experts.3.up_proj.weight_scale_inv") continue;
    kept.push_back({t.name, t.dtype_name, t.shape, std::vector<uint8_t>(t.data, t.data + t.bytes)});
  }
  write_file(dir_ + "/model-0.safetensors", encode_safetensors(kept));
  expect_error([&] { Model m(dir_); }, {"tensor 'model.layers.1.mlp.experts.3.up_proj.weight_scale_inv' is missing"});
  // A bf16 config over FP8 weights: the dtype is named.
  std::ofstream(dir_ + "/config.json") << testing::config_json(testing::tiny_config(false));
  expect_error([&] { Model m(dir_); }, {"must have dtype BF16, got F8_E4M3"});
}

// Kilobytes of this process's memory locked in RAM (VmLck in /proc/self/status; -1 when unreadable).
int64_t locked_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmLck:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// lock_weights locks every byte of the checkpoint while the model lives; where the locked-memory limit
// does not allow it, the load fails naming mlock, the file and the limit.
TEST_F(Safetensors, LockWeightsLocksTheWholeCheckpoint) {
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer intercepts mlock and returns 0 without locking anything";
  testing::write_random_checkpoint(dir_, testing::tiny_config(true), 1, 1);
  const auto file_kb = int64_t(std::filesystem::file_size(dir_ + "/model-0.safetensors") / 1024);
  const int64_t before = locked_kb();
  ASSERT_GE(before, 0) << "no VmLck in /proc/self/status";
  ModelOptions opt;
  opt.lock_weights = true;
  try {
    Model m(dir_, opt);
    EXPECT_GE(locked_kb() - before, file_kb);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRuntime) << e.what();
    for (const char* n : {"model-0.safetensors", "mlock", "ulimit -l", "lock_weights"})
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " | " << n;
  }
  EXPECT_EQ(locked_kb(), before);  // unlocked with the model
}

}  // namespace
}  // namespace tessera::model
