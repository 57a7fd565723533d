// `tessera tlc kernel.py -o lib.so [--kernel NAME] [--arg KEY=VALUE ...]`: ahead-of-time compilation of
// a tile-language kernel into a standalone library that a C++ program loads with
// tessera::tl::Kernel::load(path) - no Python at run time. Kernels are written in Python, so this
// command runs the tessera package's compiler (python -m tessera.tl.aot) with the interpreter that
// installed this tool (the `python3` next to it, else $TESSERA_PYTHON, else `python3` on PATH).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "python/python_interpreter.h"

namespace tessera::cli {
namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera tlc KERNEL.py -o LIB.so [--kernel NAME] [--arg KEY=VALUE ...]\n"
               "\n"
               "Compiles a tile-language kernel (tessera.language) into a kernel library callable from C++\n"
               "with tessera::tl::Kernel::load (see docs/tl.md, \"AOT\"). NAME selects a @T.prim_func or a\n"
               "@tessera.jit factory in the file (needed when it has several); --arg passes factory arguments\n"
               "(Python literals, e.g. --arg block_M=64 --arg layout='\"nt\"'). --list prints the kernels.\n");
}

}  // namespace

int run_tlc(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string python = bench::python_interpreter();
  std::vector<std::string> args = {python, "-m", "tessera.tl.aot"};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp(cargs[0], cargs.data());
  std::fprintf(stderr,
               "tessera tlc: cannot run %s: %s (set TESSERA_PYTHON to the interpreter that has the tessera "
               "package)\n",
               python.c_str(), std::strerror(errno));
  return kExitFailure;
}

}  // namespace tessera::cli
