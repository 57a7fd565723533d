#include "python/python_module.h"

#include <cstdio>
#include <string>

#include "python/python_interpreter.h"

namespace tessera::bench {

PythonModuleRun run_python_module(const char* tag, const std::string& module_and_args, const Options& options,
                                  const std::function<void(const char* line)>& on_line) {
  PythonModuleRun run;
  run.command = "'" + python_interpreter() + "' -m " + module_and_args;
  if (options.threads > 0) run.command = "TESSERA_NUM_THREADS=" + std::to_string(options.threads) + " " + run.command;
  std::fprintf(stderr, "%s %s\n", tag, run.command.c_str());
  std::fflush(nullptr);
  FILE* pipe = ::popen(run.command.c_str(), "r");
  if (!pipe) return run;
  run.started = true;
  char line[1024];
  while (std::fgets(line, sizeof line, pipe)) {
    if (std::string(line).rfind("skip:", 0) == 0) {
      std::fprintf(stderr, "%s %s", tag, line);
      continue;
    }
    on_line(line);
  }
  run.status = ::pclose(pipe);
  return run;
}

}  // namespace tessera::bench
