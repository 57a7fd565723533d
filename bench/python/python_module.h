// Runs `python -m <module>` for a suite whose timing lives in Python (the interpreter of
// python_interpreter.h, with the suite's thread count) and hands its stdout to the suite line by line.
#pragma once

#include <functional>
#include <string>

#include "bench.h"

namespace tessera::bench {

struct PythonModuleRun {
  std::string command;  // what ran, for messages
  bool started = false;
  int status = 0;  // pclose's status (0: the module exited 0)
};

// `tag` prefixes the messages on stderr ("[bench python]"); lines starting with "skip:" go to stderr
// too, every other line to on_line (newline included).
PythonModuleRun run_python_module(const char* tag, const std::string& module_and_args, const Options& options,
                                  const std::function<void(const char* line)>& on_line);

}  // namespace tessera::bench
