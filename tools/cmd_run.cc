// `tessera run`: greedy generation with a DeepSeek-V3.2 checkpoint (tessera/model.h, docs/model.md),
// printing the new tokens, the prefill time, the median decode step and the per-component times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "tessera/core/thread_pool.h"
#include "tessera/ep/group.h"
#include "tessera/model.h"
#include "tessera/model_ep.h"

namespace tessera::cli {
namespace {

constexpr const char* kHelp =
    "usage: tessera run --checkpoint DIR (--prompt IDS ... | --prompt-len N [--batch B] [--seed S])\n"
    "                   [--max-new-tokens N] [--max-seq-len N] [--threads N] [--prefault] [--quiet]\n"
    "                   [--lock-weights] [--batch-invariant] [--ep-timeout S]\n"
    "\n"
    "Loads a DeepSeek-V3.2 checkpoint (config.json + *.safetensors, docs/model.md), prefills the prompts\n"
    "as one batch, then decodes greedily. Prints each sequence's new token ids, the prefill time, the\n"
    "median decode step time, decode tokens/s and the time by component of the prefill and of the\n"
    "median decode step.\n"
    "\n"
    "  --checkpoint DIR    the checkpoint folder\n"
    "  --prompt IDS        comma-separated token ids, e.g. 1,2,3; repeat for a batch\n"
    "  --prompt-len N      random prompts of N tokens instead (--batch of them, default 1; --seed, default 0)\n"
    "  --max-new-tokens N  tokens to generate per prompt (default 16)\n"
    "  --max-seq-len N     cache capacity per sequence (default: prompt + new tokens)\n"
    "  --threads N         worker threads (default: all, or TESSERA_NUM_THREADS)\n"
    "  --prefault          map every page of the checkpoint at load and read a byte of each (no page\n"
    "                      faults in the steps; for checkpoints that fit in memory)\n"
    "  --lock-weights      lock every page of the checkpoint in memory (mlock; implies --prefault): the\n"
    "                      kernel may not page weights out between steps. Needs ulimit -l above the\n"
    "                      checkpoint's size, or CAP_IPC_LOCK\n"
    "  --quiet             no progress lines on stderr\n"
    "  --batch-invariant   every GEMM row computed as in a batch of >= 9 rows: a sequence's tokens do not\n"
    "                      depend on its batch, so 1 and R expert-parallel ranks print the same bits\n"
    "  --ep-timeout S      under mpirun: seconds a rank waits for a peer before it fails (default 300)\n"
    "\n"
    "Expert parallelism: `mpirun -np R tessera run ...` splits the routed experts over R ranks (rank r holds\n"
    "experts [r*E/R, (r+1)*E/R)) and runs prompts r, r+R, ... on rank r; each rank prints its own\n"
    "sequences (numbered as in the batch) and rank 0 the times (docs/model.md \"Expert parallelism\").\n";

bool parse_int(const char* text, long long lo, long long* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || v < lo) return false;
  *out = v;
  return true;
}

bool parse_ids(const std::string& text, std::vector<int32_t>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    long long v = 0;
    if (!parse_int(text.substr(start, comma - start).c_str(), 0, &v) || v > INT32_MAX) return false;
    out->push_back(int32_t(v));
    start = comma + 1;
  }
  return !out->empty();
}

// The rank count an MPI launcher announces, or 1.
int launcher_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 1) return n;
    }
  return 1;
}

void print_components(const char* what, const model::StepTimes& t) {
  std::printf("%s by component (ms):", what);
  for (int i = 0; i < int(model::Component::kCount); ++i)
    std::printf(" %s %.3f", model::component_name(model::Component(i)), 1e3 * t.seconds[i]);
  std::printf("\n");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int run_run(int argc, char** argv) {
  std::string checkpoint;
  std::vector<std::vector<int32_t>> prompts;
  long long prompt_len = 0, batch = 1, seed = 0, max_new = 16, max_seq = 0, threads = 0, ep_timeout = 300;
  bool quiet = false, prefault = false, lock_weights = false, batch_invariant = false;
  auto usage_error = [](const std::string& msg) {
    std::fprintf(stderr, "tessera run: %s\n\n%s", msg.c_str(), kHelp);
    return kExitUsage;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kHelp);
      return kExitOk;
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--batch-invariant") {
      batch_invariant = true;
    } else if (a == "--prefault") {
      prefault = true;
    } else if (a == "--lock-weights") {
      lock_weights = true;
    } else if (!has_value) {
      return usage_error("'" + a + "' needs a value or is unknown");
    } else if (a == "--checkpoint") {
      checkpoint = argv[++i];
    } else if (a == "--prompt") {
      std::vector<int32_t> ids;
      if (!parse_ids(argv[++i], &ids)) return usage_error("--prompt needs comma-separated token ids >= 0");
      prompts.push_back(std::move(ids));
    } else if (a == "--prompt-len") {
      if (!parse_int(argv[++i], 1, &prompt_len)) return usage_error("--prompt-len needs a whole number >= 1");
    } else if (a == "--batch") {
      if (!parse_int(argv[++i], 1, &batch)) return usage_error("--batch needs a whole number >= 1");
    } else if (a == "--seed") {
      if (!parse_int(argv[++i], 0, &seed)) return usage_error("--seed needs a whole number >= 0");
    } else if (a == "--max-new-tokens") {
      if (!parse_int(argv[++i], 1, &max_new)) return usage_error("--max-new-tokens needs a whole number >= 1");
    } else if (a == "--max-seq-len") {
      if (!parse_int(argv[++i], 1, &max_seq)) return usage_error("--max-seq-len needs a whole number >= 1");
    } else if (a == "--ep-timeout") {
      if (!parse_int(argv[++i], 1, &ep_timeout)) return usage_error("--ep-timeout needs a whole number >= 1");
    } else if (a == "--threads") {
      if (!parse_int(argv[++i], 1, &threads)) return usage_error("--threads needs a whole number >= 1");
    } else {
      return usage_error("unknown option '" + a + "'");
    }
  }
  if (checkpoint.empty()) return usage_error("--checkpoint is required");
  if (prompts.empty() == (prompt_len == 0)) return usage_error("give either --prompt (one or more) or --prompt-len");
  if (threads > 0) set_num_threads(int(threads));

  model::ModelOptions opt;
  opt.ranks = launcher_ranks();
  opt.prefault_weights = prefault;
  opt.lock_weights = lock_weights;
  opt.batch_invariant = batch_invariant;
  const size_t longest =
      prompts.empty() ? size_t(prompt_len) : std::max_element(prompts.begin(), prompts.end(), [](auto& x, auto& y) {
                                               return x.size() < y.size();
                                             })->size();
  opt.max_seq_len = max_seq > 0 ? max_seq : (long long)longest + max_new;
  opt.max_batch_size = prompts.empty() ? batch : (long long)prompts.size();
  // The default capacity is what this run needs, within the config's max_seq_len.
  const model::Config config = model::Config::from_file(checkpoint + "/config.json");
  if (max_seq == 0) opt.max_seq_len = std::min<long long>(opt.max_seq_len, config.max_seq_len);
  if (prompts.empty()) {
    uint64_t state = uint64_t(seed) * 6364136223846793005ull + 1442695040888963407ull;
    for (long long b = 0; b < batch; ++b) {
      std::vector<int32_t> p(static_cast<size_t>(prompt_len));
      for (int32_t& t : p) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        t = int32_t((state >> 33) % uint64_t(config.vocab_size));
      }
      prompts.push_back(std::move(p));
    }
  }
  // Checked here, on every rank alike: a rank failing alone inside a step would leave its peers waiting
  // in the expert exchange until --ep-timeout.
  for (size_t i = 0; i < prompts.size(); ++i)
    for (int32_t t : prompts[i])
      if (t >= config.vocab_size)
        return usage_error("--prompt " + std::to_string(i) + " holds token " + std::to_string(t) +
                           ", outside [0, vocab_size = " + std::to_string(config.vocab_size) + ")");
  // Expert parallelism: rank r runs prompts r, r + R, ... (maybe none) and joins every step; the
  // exchange is sized for the most prompt tokens any rank prefills.
  std::vector<size_t> batch_index;
  int rank = 0;
  if (opt.ranks > 1) {
    std::shared_ptr<ep::Group> group = ep::Group::world();
    rank = group->rank();
    opt.ranks = group->size();
    std::vector<std::vector<int32_t>> mine;
    int64_t most = 1;
    for (int r = 0; r < opt.ranks; ++r) {
      int64_t tokens = 0;
      for (size_t i = size_t(r); i < prompts.size(); i += size_t(opt.ranks)) {
        tokens += int64_t(prompts[i].size());
        if (r != rank) continue;
        mine.push_back(prompts[i]);
        batch_index.push_back(i);
      }
      most = std::max(most, tokens);
    }
    prompts = std::move(mine);
    opt.exchange = model::make_ep_exchange(group, config, most, double(ep_timeout));
    opt.max_batch_size = std::max<long long>(1, (long long)prompts.size());
    quiet = quiet || rank > 0;
  } else {
    for (size_t i = 0; i < prompts.size(); ++i) batch_index.push_back(i);
  }

  auto t0 = std::chrono::steady_clock::now();
  model::Model m(checkpoint, opt);
  const double load_s = seconds_since(t0);
  std::vector<int64_t> slots(prompts.size());
  size_t prompt_tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    slots[i] = int64_t(i);
    prompt_tokens += prompts[i].size();
  }
  if (!quiet) std::fprintf(stderr, "tessera run: loaded in %.2f s; prefilling %zu tokens\n", load_s, prompt_tokens);
  t0 = std::chrono::steady_clock::now();
  model::StepOutput step = m.prefill(slots, prompts);
  const double prefill_s = seconds_since(t0);
  const model::StepTimes prefill_times = m.last_step_times();

  std::vector<std::vector<int32_t>> generated(prompts.size());
  std::vector<double> step_s;
  std::vector<model::StepTimes> step_times;
  auto last_report = std::chrono::steady_clock::now();
  for (long long n = 0;; ++n) {
    const std::vector<int32_t> next = model::argmax_rows(step.logits.data(), step.rows, config.vocab_size);
    for (size_t i = 0; i < prompts.size(); ++i) generated[i].push_back(next[i]);
    if (n + 1 == max_new) break;
    t0 = std::chrono::steady_clock::now();
    step = m.decode(slots, next);
    step_s.push_back(seconds_since(t0));
    step_times.push_back(m.last_step_times());
    if (!quiet && seconds_since(last_report) > 2.0) {
      std::fprintf(stderr, "tessera run: decode step %lld of %lld (last %.1f ms)\n", n + 1, max_new - 1,
                   1e3 * step_s.back());
      last_report = std::chrono::steady_clock::now();
    }
  }

  for (size_t i = 0; i < generated.size(); ++i) {
    std::printf("sequence %zu:", batch_index[i]);
    for (size_t j = 0; j < generated[i].size(); ++j) std::printf("%s%d", j ? "," : " ", generated[i][j]);
    std::printf("\n");
  }
  std::fflush(stdout);
  if (rank > 0) return kExitOk;  // the times are rank 0's own steps
  if (opt.ranks > 1) std::printf("rank 0 of %d expert-parallel ranks:\n", opt.ranks);
  std::printf("prefill: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt_tokens, prefill_s,
              double(prompt_tokens) / prefill_s);
  print_components("prefill", prefill_times);
  if (!step_s.empty()) {
    std::vector<size_t> order(step_s.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return step_s[a] < step_s[b]; });
    const size_t mid = order[order.size() / 2];
    std::printf("decode: %zu steps of batch %zu, median %.3f ms per step (%.1f tokens/s)\n", step_s.size(),
                prompts.size(), 1e3 * step_s[mid], double(prompts.size()) / step_s[mid]);
    print_components("median decode step", step_times[mid]);
  }
  return kExitOk;
}

}  // namespace tessera::cli
