// Expert parallelism of the model runner (docs/model.md "Expert parallelism"), run by model_ep_test.sh:
//   write DIR      writes tiny random checkpoints (DIR/fp8 and DIR/bf16; one file, so the routed experts
//                  run on the grouped GEMMs) with the model tests' writer.
//   run CKPT OUT   one rank, or every rank under mpirun: prefills a batch of 3 prompts of different
//                  lengths and decodes 3 steps greedily; rank r runs prompts r, r+R, ... Writes
//                  OUT/seq<i>.txt per prompt: each step's greedy token, logits and every layer's hidden
//                  state as the hex of their f32 bits, so the script can require identical files.
//   kill           under `mpirun --enable-recovery` (ep_fault_test.sh, TESSERA_EP_TEST_KILL kills the
//                  last rank in the first decode step's dispatch): every survivor must raise an error
//                  naming that rank within the timeout and prints "FAULT-TEST PASS".
#include "tessera/model_ep.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/checkpoint_writer.h"
#include "tessera/core/error.h"
#include "tessera/ep/group.h"
#include "tessera/model.h"

using namespace tessera;
using namespace tessera::model;

namespace {

const std::vector<std::vector<int32_t>> kPrompts = {
    {5, 17, 3, 99, 42, 7, 61, 2, 88, 14, 30, 9, 71, 23, 50, 11, 64, 8, 36}, {12, 4, 77}, {90, 31, 6, 45, 19, 83, 27}};
constexpr int kDecodeSteps = 3;

void write_hex(std::ofstream& f, const char* what, const float* v, int64_t n) {
  f << what;
  char buf[16];
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    std::snprintf(buf, sizeof buf, " %08x", bits);
    f << buf;
  }
  f << "\n";
}

// Runs this rank's prompts through prefill and kDecodeSteps decode steps (every rank the same steps).
// per_step(step, local index, output row) sees each step's output.
template <class Fn>
void run_steps(Model& m, const std::vector<std::vector<int32_t>>& mine, Fn per_step) {
  std::vector<int64_t> slots(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) slots[i] = int64_t(i);
  StepOutput out = m.prefill(slots, mine, false, true);
  for (int step = 0;; ++step) {
    const std::vector<int32_t> next = argmax_rows(out.logits.data(), out.rows, m.config().vocab_size);
    for (size_t i = 0; i < mine.size(); ++i) per_step(step, i, out, next[i]);
    if (step == kDecodeSteps) break;
    out = m.decode(slots, next, true);
  }
}

struct Job {
  std::shared_ptr<ep::Group> group;
  std::vector<std::vector<int32_t>> mine;
  std::vector<size_t> index;  // batch index of each of this rank's prompts
};

Job split_prompts(bool parallel) {
  Job j;
  if (parallel) j.group = ep::Group::world();
  const int R = parallel ? j.group->size() : 1, me = parallel ? j.group->rank() : 0;
  for (size_t i = size_t(me); i < kPrompts.size(); i += size_t(R)) {
    j.mine.push_back(kPrompts[i]);
    j.index.push_back(i);
  }
  return j;
}

std::unique_ptr<Model> open_model(const std::string& dir, const Job& j, double timeout_s) {
  ModelOptions opt;
  opt.max_batch_size = std::max<int64_t>(1, int64_t(j.mine.size()));
  opt.max_seq_len = 64;
  opt.batch_invariant = true;  // 1 rank and R ranks batch the sequences differently
  if (j.group) {
    int64_t most = 1;
    for (int r = 0; r < j.group->size(); ++r) {
      int64_t tokens = 0;
      for (size_t i = size_t(r); i < kPrompts.size(); i += size_t(j.group->size()))
        tokens += int64_t(kPrompts[i].size());
      most = std::max(most, tokens);
    }
    opt.ranks = j.group->size();
    opt.exchange = make_ep_exchange(j.group, Config::from_file(dir + "/config.json"), most, timeout_s);
  }
  return std::make_unique<Model>(dir, opt);
}

int run(const std::string& dir, const std::string& out_dir) {
  const Job j = split_prompts(std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr);
  std::unique_ptr<Model> m = open_model(dir, j, 60);
  std::filesystem::create_directories(out_dir);
  std::vector<std::ofstream> files;
  for (size_t i = 0; i < j.mine.size(); ++i) files.emplace_back(out_dir + "/seq" + std::to_string(j.index[i]) + ".txt");
  const Config& c = m->config();
  run_steps(*m, j.mine, [&](int step, size_t i, const StepOutput& o, int32_t token) {
    std::ofstream& f = files[i];
    f << "step " << step << " token " << token << "\n";
    write_hex(f, "logits", o.logits.data() + int64_t(i) * c.vocab_size, c.vocab_size);
    for (int64_t l = 0; l < c.n_layers; ++l)
      write_hex(f, ("hidden" + std::to_string(l)).c_str(), o.hidden.data() + (l * o.rows + int64_t(i)) * c.dim, c.dim);
  });
  std::printf("model_ep_test: rank wrote %zu sequences\n", j.mine.size());
  return 0;
}

int kill_test() {
  constexpr double kTimeout = 30;
  const Job j = split_prompts(true);
  const int me = j.group->rank(), victim = j.group->size() - 1;
  // Every rank writes the same checkpoint (same seed) into its own folder.
  const std::string dir = testing::make_temp_dir("ep_kill_r" + std::to_string(me));
  testing::write_random_checkpoint(dir, testing::tiny_config(true), 7, 1);
  std::unique_ptr<Model> m = open_model(dir, j, kTimeout);
  // The model has mapped the checkpoint, so its folder can go now: the killed rank never gets to clean up.
  std::filesystem::remove_all(dir);
  const auto start = std::chrono::steady_clock::now();
  try {
    run_steps(*m, j.mine, [](int, size_t, const StepOutput&, int32_t) {});
    std::printf("FAULT-TEST FAIL rank %d: no error although rank %d was killed\n", me, victim);
    std::fflush(stdout);
    _exit(1);
  } catch (const Error& e) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string msg = e.what();
    const bool names_peer = msg.find("rank " + std::to_string(victim)) != std::string::npos;
    const bool names_op = msg.find("ElasticBuffer.") != std::string::npos;
    std::printf("FAULT-TEST %s rank %d: %.2f s: %s\n", names_peer && names_op && secs < kTimeout ? "PASS" : "FAIL", me,
                secs, msg.c_str());
    std::fflush(stdout);
    _exit(names_peer && names_op && secs < kTimeout ? 0 : 1);  // MPI_Finalize would wait for the dead rank
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "write" && argc == 3) {
      for (bool fp8 : {true, false}) {
        Config c = testing::tiny_config(fp8);
        c.n_layers = 3;          // two MoE layers
        c.n_limited_groups = 2;  // a token's experts may sit on different ranks
        testing::write_random_checkpoint(std::string(argv[2]) + (fp8 ? "/fp8" : "/bf16"), c, 7, 1);
      }
      return 0;
    }
    if (mode == "run" && argc == 4) return run(argv[2], argv[3]);
    if (mode == "kill") return kill_test();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_ep_test %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: model_ep_test write DIR | run CHECKPOINT OUT | kill\n");
  return 2;
}
