// `tessera`: machine limits (info) and benchmarks (bench). `tessera --help` lists the subcommands.
#include <cstdio>
#include <cstring>
#include <exception>

#include "commands.h"
#include "tessera/info.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera <command> [options]\n"
               "\n"
               "commands:\n"
               "  info [--json] [--refresh]                       this machine's CPU, ISA and measured limits\n"
               "  bench [component] [--json] [--full] [--threads N]  benchmarks against peer libraries\n"
               "  tlc KERNEL.py -o LIB.so [--kernel NAME]          compile a tile-language kernel for C++ (AOT)\n"
               "  run --checkpoint DIR (--prompt IDS | --prompt-len N) [--max-new-tokens N]  greedy generation\n"
               "\n"
               "`tessera <command> --help` describes a command; `tessera --version` prints the version.\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera::cli;
  if (argc < 2) {
    usage(stderr);
    return kExitUsage;
  }
  const char* cmd = argv[1];
  if (!std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h") || !std::strcmp(cmd, "help")) {
    usage(stdout);
    return kExitOk;
  }
  if (!std::strcmp(cmd, "--version")) {
    std::printf("tessera %s\n", tessera::tessera_version());
    return kExitOk;
  }
  try {
    if (!std::strcmp(cmd, "info")) return run_info(argc - 1, argv + 1);
    if (!std::strcmp(cmd, "bench")) return run_bench(argc - 1, argv + 1);
    if (!std::strcmp(cmd, "tlc")) return run_tlc(argc - 1, argv + 1);
    if (!std::strcmp(cmd, "run")) return run_run(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera %s: %s\n", cmd, e.what());
    return kExitFailure;
  }
  std::fprintf(stderr, "tessera: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return kExitUsage;
}
