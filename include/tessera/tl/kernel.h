// tessera/tl/kernel.h - compiling tile-language programs and calling them.
//
//   Program p = ...;                        // KernelBuilder, or the Python frontend
//   tl::Kernel k = tl::compile(p);          // lower, generate C++, compile with the host compiler, load
//   k({tl::KernelArg(a), tl::KernelArg(b), tl::KernelArg(c)});
//   std::string src = k.source();           // the generated C++
//
// Compiled kernels are cached on disk, keyed by a hash of the generated source (itself a function of
// the IR and the target), the runtime headers, the compiler and its version, the flags, the CPU and the
// tessera version: $TESSERA_TL_CACHE, else $XDG_CACHE_HOME/tessera/tl, else ~/.cache/tessera/tl.
// An in-process map sits in front. Dynamic dimensions (T.dynamic) are bound from the argument shapes
// at every call; a new shape never recompiles.
//
// AOT: compile_to_library writes the kernel's .so anywhere; Kernel::load(path) loads such a library in
// a program linked with libtessera (no Python): the library carries its parameter signature and calls
// back into the loading program for threads and GEMM micro-kernels (tessera/tl/runtime/abi.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/tl/ir.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

struct CompileOptions {
  std::vector<std::string> extra_flags;  // appended to the host-compiler command line
  std::string cache_dir;                 // empty: the default cache folder
  bool use_cache = true;                 // false: always compile (into a fresh temporary folder)
  bool memory_cache = true;              // false: skip the in-process map (load from disk; for measuring)
};

// One argument of a call: a tensor, or an integer / floating scalar.
struct KernelArg {
  KernelArg(const TensorView& t) : tensor(t), is_tensor(true) {}  // NOLINT: implicit by design
  KernelArg(int64_t v) : i(v), f(double(v)) {}                    // NOLINT
  KernelArg(int v) : i(v), f(double(v)) {}                        // NOLINT
  KernelArg(double v) : i(int64_t(v)), f(v) {}                    // NOLINT
  TensorView tensor;
  bool is_tensor = false;
  int64_t i = 0;
  double f = 0;
};

// Where the time of compile() went.
struct CompileStats {
  double lower_ms = 0, codegen_ms = 0, compile_ms = 0, load_ms = 0;
  bool disk_cache_hit = false, memory_cache_hit = false;
};

class Kernel {
 public:
  Kernel() = default;
  const std::string& name() const;
  const std::string& source() const;        // the generated C++ (empty for a library loaded by path)
  const std::string& library_path() const;  // the .so that is loaded
  const CompileStats& stats() const;
  // Parameter names in order, and the dynamic dimensions.
  std::vector<std::string> param_names() const;
  std::vector<std::string> symbol_names() const;
  // Checks every argument (count, dtype, rank, static dims, consistent dynamic dims, unit inner
  // stride) before anything runs; throws Error(kInvalidArgument) naming the parameter and the rule.
  void operator()(const std::vector<KernelArg>& args) const;

  // Loads a kernel library written by compile_to_library or `tessera tlc`.
  static Kernel load(const std::string& library_path);

  struct Impl;

 private:
  explicit Kernel(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  friend Kernel compile(const Program&, const CompileOptions&);
  std::shared_ptr<const Impl> impl_;
};

// Lowers the program for the host CPU and returns its generated C++ (no compilation).
std::string generate_source(const Program& p);
Kernel compile(const Program& p, const CompileOptions& options = {});
// Compiles the program into a standalone kernel library at `path` (AOT).
void compile_to_library(const Program& p, const std::string& path, const CompileOptions& options = {});
// The folder compiled kernels are cached in (created on demand).
std::string cache_dir(const CompileOptions& options = {});

}  // namespace tessera::tl
