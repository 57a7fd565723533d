// The subcommands of the `tessera` command-line tool. Each returns the process exit code:
// 0 success, 1 a run-time failure (an error, a wrong benchmark result), 2 a usage error.
#pragma once

namespace tessera::cli {

constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;

int run_info(int argc, char** argv);   // argv[0] is "info"
int run_bench(int argc, char** argv);  // argv[0] is "bench"
int run_tlc(int argc, char** argv);    // argv[0] is "tlc"
int run_run(int argc, char** argv);    // argv[0] is "run"

}  // namespace tessera::cli
