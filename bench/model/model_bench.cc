#include "model/model_bench.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "limit_pct.h"
#include "model/model_roofline.h"
#include "python/python_interpreter.h"
#include "tessera/core/error.h"
#include "tessera/model.h"
#include "timing.h"

namespace tessera::bench {

const char* const kModelHelp = R"(usage: tessera bench model [--json] [--full] [--threads N]

A DeepSeek-V3.2 model on tessera's kernels (tessera::model::Model, docs/model.md):

decode_b<B>  one decode step of B sequences that each hold a long context (M = B, N = context tokens,
             K = layers), on the "real-shape slice": DeepSeek-V3.2's layer sizes (dim 7168, 128 heads,
             256 routed experts of 2048 + 1 shared, top-8 of 8 groups, index_topk 2048, vocab 129280,
             FP8 weights with 128x128 scales) with 2 layers, one dense and one MoE. Its random checkpoint
             (15.8 GB: 11.3 of routed experts, 3.7 of bf16 embedding and head) is written once by
             `python -m tessera.model.random_checkpoint` into $XDG_CACHE_HOME/tessera/model (else
             ~/.cache/tessera/model) and mapped whole at load before timing: locked in memory
             (Model's lock_weights) where it fits in 80% of the available memory and the locked-memory
             limit allows, so memory reclaim cannot page experts out between steps; else prefaulted
             (prefault_weights), and the report says which.
             The caches are filled with random FP8 entries (Model::fill_synthetic_context) instead of
             running the prefill; each step feeds random tokens, so the routed experts change
             from step to step as in real decoding.
             quick: B in {1, 8, 64} at 32768 tokens; --full adds B = 1 and 8 at 4096 tokens.
generate_tiny  greedy generation on the tiny config (python/tessera/model/configs/tiny.json; 4 prompts
             of 32 tokens, 32 new tokens each) in one Python process: tessera.model against the same model
             in eager PyTorch (tessera.model.torch_eager, written as DeepSeek's inference code is); each
             timed call follows an untimed one of the same model; medians of 3; skipped without torch.

Columns (decode rows): time_ms = median step time (TPOT) over at least 3 s and 5 steps (quick: 3);
GFLOP/s and GB/s = the step's counted flops and bytes (bench/model/model_roofline.cc: weights as stored,
read once per step, the routed experts that had rows, the FP8 caches the indexer and the attention read) over the
time; %limit = the step's roofline time / its time, where the roofline is the larger of bytes / DRAM
read bandwidth (measured right after the row) and flops / bf16 peak (measured at the start).
After each row: the per-component breakdown of the median step, the GEMM part (projections, MLPs,
experts, gate, head) against its own roofline, and the 61-layer model (3 dense + 58 MoE layers)
extrapolated from the slice's per-layer times and bytes. After the rows: the resident memory the model
added against the KV cache, and the weights mapped. The rows need the whole checkpoint in memory: when
less than 95% of it is resident after the load (too little memory free), a warning says the rows
measure the disk; so does one when Linux's DAMON runs a pageout scheme (it pages out cold checkpoint
pages between steps).
)";

namespace {

std::vector<std::string>& notes() {  // lines the summary prints after the table
  static std::vector<std::string> lines;
  return lines;
}

template <typename... Args>
void note(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  notes().push_back(buf);
}

Row model_row(const std::string& op, int64_t m = 0, int64_t n = 0, int64_t k = 0) {
  Row r;
  r.component = "model";
  r.op = op;
  r.m = m, r.n = n, r.k = k;
  return r;
}

std::string cache_root() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/tessera";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/tessera";
  return "/tmp/tessera-cache";
}

// The slice's random checkpoint: the writer's --reuse leaves a complete one of the current config alone
// and otherwise writes it (about 100 s). Returns "" or why it is not available.
std::string ensure_checkpoint(const std::string& dir) {
  const std::string cmd = "'" + python_interpreter() +
                          "' -m tessera.model.random_checkpoint --config v32_slice --out '" + dir + "' --reuse 1>&2";
  std::fprintf(stderr, "[bench model] %s\n", cmd.c_str());
  std::fflush(nullptr);
  return std::system(cmd.c_str()) == 0 ? "" : "writing the checkpoint failed: " + cmd;
}

// Why this machine cannot run the slice's rows ("" when it can): its checkpoint must fit on disk, and in
// memory beside the batch-64 KV cache, or the steps would measure the disk.
std::string slice_does_not_fit(const std::string& dir) {
  namespace fs = std::filesystem;
  double mem_gb = 0;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemTotal:", 0) == 0) mem_gb = std::atof(line.c_str() + 9) * 1024 / 1e9;
  if (mem_gb > 0 && mem_gb < 22)
    return "the slice needs 22 GB of memory (15.8 GB of weights, 3.3 GB of KV cache); this machine has " +
           std::to_string(int(mem_gb)) + " GB";
  std::error_code ec;
  fs::create_directories(dir, ec);
  struct statvfs vfs {};
  if (!fs::exists(dir + "/model.safetensors") && ::statvfs(dir.c_str(), &vfs) == 0) {
    const double free_gb = double(vfs.f_bavail) * double(vfs.f_frsize) / 1e9;
    if (free_gb < 17)
      return "the slice's checkpoint needs 17 GB free in " + dir + " (" + std::to_string(int(free_gb)) + " GB free)";
  }
  return "";
}

// Resident memory of this process from /proc/self/status, GB: anonymous and file-backed.
void resident_gb(double* anon, double* file) {
  *anon = *file = NAN;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RssAnon:", 0) == 0) *anon = std::atof(line.c_str() + 8) * 1024 / 1e9;
    if (line.rfind("RssFile:", 0) == 0) *file = std::atof(line.c_str() + 8) * 1024 / 1e9;
  }
}

// Available memory (MemAvailable of /proc/meminfo), GB; NAN when unknown.
double available_gb() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::atof(line.c_str() + 13) * 1024 / 1e9;
  return NAN;
}

// The decode rows time the kernels only while the whole checkpoint stays in memory: with less memory
// free than it needs (other processes' memory), prefaulting cannot keep it resident and the steps read
// experts from disk. Says so (in the summary too) when less than 95% of it is resident after the load.
void warn_if_not_resident(const std::string& dir) {
  std::error_code ec;
  const double checkpoint_gb = double(std::filesystem::file_size(dir + "/model.safetensors", ec)) / 1e9;
  if (ec || !(checkpoint_gb > 0)) return;
  double anon = NAN, file = NAN;
  resident_gb(&anon, &file);
  if (!(file < 0.95 * checkpoint_gb)) return;
  char line[320];
  std::snprintf(line, sizeof line,
                "warning: %.1f GB of the %.1f GB checkpoint resident after prefaulting (%.1f GB available): the "
                "decode rows read weights from disk, not at the kernels' speed; free memory and run again",
                file, checkpoint_gb, available_gb());
  std::fprintf(stderr, "[bench model] %s\n", line);
  note("%s", line);
}

// First line of a small sysfs file ("" when it cannot be read).
std::string read_sysfs_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Linux's DAMON memory monitor, where a running kdamond has a `pageout` scheme (some cloud VMs run one),
// pages out file pages it sees unused for a while: the mapped checkpoint's routed experts that no
// recent step touched are read back from disk when a later step routes to them, so decode rows vary
// by several times between runs although everything fits in memory. Says so.
void warn_if_damon_pageout() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const fs::directory_entry& kdamond : fs::directory_iterator("/sys/kernel/mm/damon/admin/kdamonds", ec)) {
    if (read_sysfs_line(kdamond.path() / "state") != "on") continue;
    for (const fs::directory_entry& context : fs::directory_iterator(kdamond.path() / "contexts", ec))
      for (const fs::directory_entry& scheme : fs::directory_iterator(context.path() / "schemes", ec)) {
        if (read_sysfs_line(scheme.path() / "action") != "pageout") continue;
        const std::string line = "warning: DAMON runs a pageout scheme (" + scheme.path().string() +
                                 "): cold pages of the mapped checkpoint are paged out between steps, so decode "
                                 "rows may read experts from disk and vary between runs";
        std::fprintf(stderr, "[bench model] %s\n", line.c_str());
        note("%s", line.c_str());
        return;
      }
  }
}

double roofline_pct(double seconds, const StepCost& cost, double dram, double peak) {
  return 100.0 * roofline_seconds(cost, dram, peak) / seconds;
}

struct DecodeCase {
  int64_t batch, context;
  bool full_only;
};
const DecodeCase kDecodeCases[] = {
    {1, 32768, false}, {8, 32768, false}, {64, 32768, false}, {1, 4096, true}, {8, 4096, true}};

Row decode_row(model::Model& m, const DecodeCase& dc, int min_steps, const MachineLimits& limits) {
  const model::Config& c = m.config();
  Row r = model_row("decode_b" + std::to_string(dc.batch), dc.batch, dc.context, c.n_layers);
  m.reset_all();
  std::vector<int64_t> slots(size_t(dc.batch));
  for (int64_t s = 0; s < dc.batch; ++s) {
    slots[size_t(s)] = s;
    m.fill_synthetic_context(s, dc.context, uint64_t(s));
  }
  std::mt19937 rng(uint32_t(dc.batch * 7919 + dc.context));
  std::uniform_int_distribution<int32_t> token(0, int32_t(c.vocab_size - 1));
  struct Step {
    double seconds;
    model::StepTimes times;
  };
  std::vector<Step> steps;
  const auto budget_start = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) {
    std::vector<int32_t> tokens(size_t(dc.batch));
    for (int32_t& t : tokens) t = token(rng);
    const auto t0 = std::chrono::steady_clock::now();
    m.decode(slots, tokens);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) steps.push_back({s, m.last_step_times()});  // step 0 warms up
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - budget_start).count();
    if (int(steps.size()) >= min_steps && spent > 3.0) break;
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.seconds < b.seconds; });
  const Step& med = steps[steps.size() / 2];
  const int64_t ctx = dc.context + int64_t(steps.size() / 2) + 2;  // tokens held during the median step
  const int64_t moe_layers = c.n_layers - std::min(c.n_layers, c.n_dense_layers);
  const int64_t dense_layers = c.n_layers - moe_layers;
  const int64_t experts_per_moe_layer = moe_layers ? med.times.routed_experts_run / moe_layers : 0;

  const StepCost attn = attention_layer_cost(c, dc.batch, ctx), dense = dense_mlp_cost(c, dc.batch),
                 moe = moe_cost(c, dc.batch, experts_per_moe_layer), ends = ends_cost(c, dc.batch);
  StepCost step = ends;
  step += double(c.n_layers) * attn;
  step += double(dense_layers) * dense;
  step += double(moe_layers) * moe;

  r.time_ms = med.seconds * 1e3;
  r.gflops = step.flops() / med.seconds / 1e9;
  r.gbps = step.bytes() / med.seconds / 1e9;
  const double dram = dram_read_gbps_now(), peak = limits.bf16_peak_gflops;
  r.limit_name = "roofline (DRAM read / bf16 peak)";
  r.limit_value = dram;
  r.pct_of_limit = roofline_pct(med.seconds, step, dram, peak);
  r.pct_of_start_limit = roofline_pct(med.seconds, step, limits.dram_read_gbps, peak);

  // What a reader wants next to the row: the roofline's terms, where the time goes, the GEMM part, and
  // the whole model.
  const double roof = roofline_seconds(step, dram, peak);
  note(
      "decode b=%lld, context %lld, %lld layers: TPOT %.1f ms, %.1f tokens/s; roofline %.1f ms (%.2f GB weights "
      "+ %.2f GB KV at %.1f GB/s; %.1f GFLOP at %.0f GFLOP/s): %.0f%% of roofline",
      (long long)dc.batch, (long long)dc.context, (long long)c.n_layers, r.time_ms, double(dc.batch) / med.seconds,
      roof * 1e3, step.weight_bytes / 1e9, step.kv_bytes / 1e9, dram, step.flops() / 1e9, peak, r.pct_of_limit);
  std::string shares = "  breakdown:";
  const double total = med.times.total();
  for (int i = 0; i < int(model::Component::kCount); ++i) {
    char part[64];
    std::snprintf(part, sizeof part, " %s %.0f%%", model::component_name(model::Component(i)),
                  100.0 * med.times.seconds[i] / total);
    shares += part;
  }
  notes().push_back(shares + "; routed experts run per MoE layer: " + std::to_string(experts_per_moe_layer));

  using C = model::Component;
  const auto t = [&](C comp) { return med.times.seconds[int(comp)]; };
  StepCost gemm;  // the GEMM part's own bytes and flops: weights only, no caches or attention
  gemm.weight_bytes = step.weight_bytes;
  gemm.gemm_flops = step.gemm_flops;
  const double gemm_s =
      t(C::kAttnProjections) + t(C::kDenseMlp) + t(C::kGate) + t(C::kExperts) + t(C::kShared) + t(C::kHead);
  const bool compute_bound = gemm.gemm_flops / (peak * 1e9) > gemm.weight_bytes / (dram * 1e9);
  note("  GEMM part: %.1f ms against its roofline %.1f ms (%s-bound): %.0f%%", gemm_s * 1e3,
       roofline_seconds(gemm, dram, peak) * 1e3, compute_bound ? "compute" : "memory",
       roofline_pct(gemm_s, gemm, dram, peak));

  // The full model: the slice's per-layer times and costs times DeepSeek-V3.2's 61 layers (3 dense).
  const double attn_layer_s =
      (t(C::kNorms) + t(C::kAttnProjections) + t(C::kIndexer) + t(C::kAttention)) / double(c.n_layers);
  const double dense_s = dense_layers ? t(C::kDenseMlp) / double(dense_layers) : NAN;
  const double moe_s = moe_layers ? (t(C::kGate) + t(C::kExperts) + t(C::kShared)) / double(moe_layers) : NAN;
  const double full_s = t(C::kEmbedding) + t(C::kHead) + 61 * attn_layer_s + 3 * dense_s + 58 * moe_s;
  StepCost full = ends;
  full += 61.0 * attn;
  full += 3.0 * dense;
  full += 58.0 * moe;
  note(
      "  61 layers (3 dense + 58 MoE), extrapolated: TPOT %.0f ms, %.2f tokens/s; roofline %.0f ms "
      "(%.1f GB read per step): %.0f%% of roofline",
      full_s * 1e3, double(dc.batch) / full_s, roofline_seconds(full, dram, peak) * 1e3, full.bytes() / 1e9,
      roofline_pct(full_s, full, dram, peak));
  return r;
}

// The tiny model against eager PyTorch, in one Python process (python -m tessera.model.bench_peer);
// no row when the interpreter has no torch (a note says so).
std::vector<Row> peer_rows(const Options& options) {
  std::string cmd = "'" + python_interpreter() + "' -m tessera.model.bench_peer";
  if (options.threads > 0) cmd = "TESSERA_NUM_THREADS=" + std::to_string(options.threads) + " " + cmd;
  std::fprintf(stderr, "[bench model] %s\n", cmd.c_str());
  std::fflush(nullptr);
  Row r = model_row("generate_tiny");
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) {
    r.status = "error: cannot start " + cmd;
    return {r};
  }
  char line[512];
  bool found = false, skipped = false;
  while (std::fgets(line, sizeof line, pipe)) {
    if (std::string(line).rfind("skip:", 0) == 0) {
      std::fprintf(stderr, "[bench model] generate_tiny %s", line);
      std::string why = line + 5;
      if (!why.empty() && why.back() == '\n') why.pop_back();
      note("generate_tiny skipped:%s", why.c_str());
      skipped = true;
      continue;
    }
    long long m = 0, n = 0, k = 0;
    double ours = NAN, peer = NAN;
    if (std::sscanf(line, "generate_tiny %lld %lld %lld %lf %lf", &m, &n, &k, &ours, &peer) != 5) continue;
    r.m = m, r.n = n, r.k = k;
    r.time_ms = ours;
    r.peer = "eager PyTorch";
    r.peer_time_ms = peer;
    r.peer_ratio = peer / ours;
    found = true;
  }
  const int status = ::pclose(pipe);
  if (skipped && !found) return {};
  if (!found) r.status = "error: " + cmd + " exited with status " + std::to_string(status);
  return {r};
}

}  // namespace

std::vector<Row> run_model_bench(const Options& options, const MachineLimits& limits) {
  notes().clear();
  std::vector<Row> rows;
  const std::string dir = cache_root() + "/model/v32_slice-seed0";
  if (const std::string why = slice_does_not_fit(dir); !why.empty()) {
    std::fprintf(stderr, "[bench model] decode rows skipped: %s\n", why.c_str());
    note("decode rows skipped: %s", why.c_str());
  } else if (const std::string why = ensure_checkpoint(dir); !why.empty()) {
    Row r = model_row("decode");
    r.status = "error: " + why;
    rows.push_back(r);
  } else {
    try {
      int64_t max_batch = 0, max_context = 0;
      for (const DecodeCase& dc : kDecodeCases)
        if (options.full || !dc.full_only) {
          max_batch = std::max(max_batch, dc.batch);
          max_context = std::max(max_context, dc.context);
        }
      model::ModelOptions mo;
      mo.max_batch_size = max_batch;
      mo.max_seq_len = max_context + 64;  // room for the timed steps
      // Steady state of a serving process: every weight page read and mapped at load (from disk if it is
      // not cached), so no step reads the disk or takes a page fault on a routed expert's first use
      // (about 10 ms per batch-1 step otherwise); locked where it fits, so that reclaim (DAMON's
      // pageout on some VMs) cannot take experts back between steps.
      mo.prefault_weights = true;
      std::error_code ec;
      const double checkpoint_gb = double(std::filesystem::file_size(dir + "/model.safetensors", ec)) / 1e9;
      mo.lock_weights = !ec && checkpoint_gb < 0.8 * available_gb();
      std::string how = mo.lock_weights ? "locked in memory (mlock)" : "prefaulted (too large to lock here)";
      // The memory line counts what the model adds: the harness's own buffers (the DRAM-read figure's
      // 8x-L3 buffer, kept for the process's life once measured) are resident before the load.
      (void)dram_read_gbps_now();
      double anon_before_load = NAN, file_before_load = NAN;
      resident_gb(&anon_before_load, &file_before_load);
      const auto load_start = std::chrono::steady_clock::now();
      std::unique_ptr<model::Model> loaded;
      try {
        loaded = std::make_unique<model::Model>(dir, mo);
      } catch (const Error& e) {
        if (!mo.lock_weights || e.code() != ErrorCode::kRuntime) throw;
        mo.lock_weights = false;
        how = "prefaulted, not locked: " + std::string(e.what());
        loaded = std::make_unique<model::Model>(dir, mo);
      }
      model::Model& m = *loaded;
      std::fprintf(stderr, "[bench model] model loaded in %.1f s, weights %s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count(), how.c_str());
      note("weights: %s", how.c_str());
      warn_if_not_resident(dir);
      if (!mo.lock_weights) warn_if_damon_pageout();
      for (const DecodeCase& dc : kDecodeCases) {
        if (dc.full_only && !options.full) continue;
        std::fprintf(stderr, "[bench model] decode b=%lld context %lld\n", (long long)dc.batch, (long long)dc.context);
        // A b = 64 step takes seconds on a small machine: the quick suite's median is of 3 of them.
        rows.push_back(decode_row(m, dc, options.full ? 5 : 3, limits));
      }
      double anon = NAN, file = NAN;
      resident_gb(&anon, &file);
      const model::Config& c = m.config();
      const double kv_gb = double(max_batch) * double(max_context + 64) * (656.0 + 132.0) * double(c.n_layers) / 1e9;
      const double kvb_gb = double(c.n_layers) * double(c.n_heads) * double(c.qk_nope_head_dim + c.v_head_dim) *
                            double(c.kv_lora_rank) * 2 / 1e9;
      const double model_anon = anon - anon_before_load;
      note(
          "memory: the model added %.2f GB of resident anonymous memory (the process %.2f GB) against %.2f GB "
          "of KV cache filled + %.2f GB of bf16 W_uk/W_uv copies (%.2fx; the rest: activations and kernel "
          "scratch); %.2f GB of the mapped checkpoint resident",
          model_anon, anon, kv_gb, kvb_gb, model_anon / (kv_gb + kvb_gb), file);
    } catch (const std::exception& e) {
      Row r = model_row("decode");
      r.status = std::string("error: ") + e.what();
      rows.push_back(r);
    }
  }
  for (Row& r : peer_rows(options)) rows.push_back(r);
  return rows;
}

void print_model_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "\nDeepSeek-V3.2 model (docs/model.md):\n");
  for (const std::string& line : notes()) std::fprintf(out, "  %s\n", line.c_str());
  for (const Row& r : rows) {
    if (r.op == "decode_b1" && r.n == 32768 && r.ok())
      std::fprintf(out, "  batch 1 TPOT at %.0f%% of its roofline (target >= 77%%: within 1.3x) %s\n", r.pct_of_limit,
                   r.pct_of_limit >= 100.0 / 1.3 ? "[met]" : "[not met]");
    if (r.op == "generate_tiny" && r.ok())
      std::fprintf(out, "  tiny model %.1fx eager PyTorch (target >= 10x) %s\n", r.peer_ratio,
                   r.peer_ratio >= 10 ? "[met]" : "[not met]");
  }
}

}  // namespace tessera::bench
