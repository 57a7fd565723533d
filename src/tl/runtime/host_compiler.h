// The host C++ compiler that builds kernel libraries: $TESSERA_TL_CXX, else $CXX, else g++.
#pragma once

#include <string>
#include <vector>

#include "tessera/tl/kernel.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

struct HostCompiler {
  std::string command;  // as found on PATH or given
  std::string version;  // first line of `<command> --version`
};
// Throws Error(kRuntime) when the compiler cannot be run.
const HostCompiler& host_compiler();

// Every flag of a kernel build except the file names (part of the cache key).
std::vector<std::string> kernel_compile_flags(const Target& target, const CompileOptions& options);

// Builds the shared library out_path from the source file src_path with the runtime headers under
// include_dir. Throws Error(kRuntime) with the compiler's output when it fails.
void compile_shared_object(const std::string& src_path, const std::string& out_path, const std::string& include_dir,
                           const std::vector<std::string>& flags);

}  // namespace tessera::tl
