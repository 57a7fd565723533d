// Compiling programs into kernels, and calling kernels (see tessera/tl/kernel.h).
#include "tessera/tl/kernel.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>

#include "tessera/core/error.h"
#include "tessera/info.h"
#include "tl/codegen/cpu/cpu_emitter.h"
#include "tl/passes/pass_pipeline.h"
#include "tl/runtime/host_compiler.h"
#include "tl/runtime/kernel_cache.h"
#include "tl/runtime/library.h"
#include "tl/runtime/signature.h"

namespace tessera::tl {

struct Kernel::Impl {
  std::string name, source, path;
  CompileStats stats;
  KernelSignature sig;
  std::shared_ptr<const KernelLibrary> lib;
};

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::mutex g_memory_mutex;
std::map<std::string, std::shared_ptr<const Kernel::Impl>>& memory_cache() {
  static std::map<std::string, std::shared_ptr<const Kernel::Impl>> m;
  return m;
}

// A tensor of dtype `have` may be passed for a parameter declared `want`. The integer types the core dtype
// set lacks arrive as the type of the same width that carries their bits (int16 / uint16 as float16,
// uint32 as int32, uint64 as int64; Python's tl layer checks the caller's real dtype first).
bool dtype_matches(DataType want, DType have) {
  if (want == DataType::kFloat4E2M1)  // packed FP4 arrives as bytes (two codes each)
    return have == DType::kF4E2M1 || have == DType::kI8 || have == DType::kU8;
  switch (have) {
    case DType::kF32:
      return want == DataType::kFloat32;
    case DType::kF64:
      return want == DataType::kFloat64;
    case DType::kBF16:
      return want == DataType::kBFloat16;
    case DType::kF16:
      return want == DataType::kFloat16 || want == DataType::kInt16 || want == DataType::kUInt16;
    case DType::kF8E4M3:
      return want == DataType::kFloat8E4M3;
    case DType::kF8E5M2:
      return want == DataType::kFloat8E5M2;
    case DType::kI8:
      return want == DataType::kInt8;
    case DType::kU8:
      return want == DataType::kUInt8;
    case DType::kI32:
      return want == DataType::kInt32 || want == DataType::kUInt32;
    case DType::kI64:
      return want == DataType::kInt64 || want == DataType::kUInt64;
    case DType::kBool:
      return want == DataType::kBool;
    case DType::kF4E2M1:
    case DType::kUE8M0:
      return want == DataType::kUInt8 || want == DataType::kInt8;  // raw bytes
  }
  return false;
}

// A packed float4 tensor of bytes (..., n) as the kernel sees it: (..., 2n) codes, the outer strides
// doubled.
TensorView view_in_codes(const TensorView& t, const std::string& fn, const std::string& name) {
  const int last = t.ndim - 1;
  if (t.shape[last] > 1 && t.strides[last] != 1)
    fail(ErrorCode::kInvalidArgument, fn, ": argument '", name, "' (packed float4, two codes per byte) must have ",
         "unit stride in its last dimension, got strides ", t.strides_str());
  TensorView v = t;
  for (int d = 0; d < last; ++d) v.strides[d] = 2 * t.strides[d];
  v.shape[last] = 2 * t.shape[last];
  v.strides[last] = 1;
  return v;
}

std::string param_list(const KernelSignature& sig) {
  std::string s;
  for (size_t i = 0; i < sig.params.size(); ++i) s += (i ? ", " : "") + sig.params[i].name;
  return s;
}

std::shared_ptr<Kernel::Impl> from_library(std::shared_ptr<const KernelLibrary> lib) {
  auto impl = std::make_shared<Kernel::Impl>();
  impl->sig = parse_signature(lib->signature());
  impl->name = impl->sig.kernel;
  impl->path = lib->path();
  impl->lib = std::move(lib);
  return impl;
}

struct Generated {
  Target target;
  std::string source;
  double lower_ms = 0, codegen_ms = 0;
};

Generated generate(const Program& p) {
  Generated g;
  g.target = Target::host();
  auto t0 = Clock::now();
  const Program lowered = lower_program(p, g.target);
  g.lower_ms = ms_since(t0);
  t0 = Clock::now();
  g.source = codegen_cpu(lowered, g.target);
  g.codegen_ms = ms_since(t0);
  return g;
}

std::string cache_key(const Generated& g, const std::vector<std::string>& flags) {
  std::string k = g.source + "\n--\n" + host_compiler().command + "\n" + host_compiler().version + "\n";
  for (const std::string& f : flags) k += f + " ";
  k += "\n" + g.target.str() + "\n" + g.target.cpu + "\n" + runtime_headers_hash() + "\n" + tessera_version();
  return hash_hex(k);
}

}  // namespace

const std::string& Kernel::name() const {
  return impl_->name;
}
const std::string& Kernel::source() const {
  return impl_->source;
}
const std::string& Kernel::library_path() const {
  return impl_->path;
}
const CompileStats& Kernel::stats() const {
  return impl_->stats;
}

std::vector<std::string> Kernel::param_names() const {
  std::vector<std::string> out;
  for (const auto& p : impl_->sig.params) out.push_back(p.name);
  return out;
}
std::vector<std::string> Kernel::symbol_names() const {
  return impl_->sig.symbols;
}

void Kernel::operator()(const std::vector<KernelArg>& args) const {
  if (!impl_) fail(ErrorCode::kInvalidArgument, "tl kernel: calling an empty Kernel (compile or load one first)");
  const KernelSignature& sig = impl_->sig;
  const std::string fn = "kernel '" + sig.kernel + "'";
  if (args.size() != sig.params.size())
    fail(ErrorCode::kInvalidArgument, fn, ": expected ", sig.params.size(), " arguments (", param_list(sig), "), got ",
         args.size());
  const size_t n = args.size();
  std::vector<void*> data(n, nullptr);
  std::vector<const int64_t*> strides(n, nullptr);
  std::vector<TensorView> in_codes(n);  // packed float4 tensors as the kernel indexes them
  std::vector<int64_t> ints(n, 0);
  std::vector<double> floats(n, 0.0);
  std::vector<int64_t> symbols(sig.symbols.size(), -1);
  std::vector<std::string> bound_by(sig.symbols.size());
  for (size_t i = 0; i < n; ++i) {
    const KernelSignature::Param& p = sig.params[i];
    const KernelArg& a = args[i];
    if (!p.is_tensor) {
      if (a.is_tensor)
        fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' must be a scalar, got a tensor");
      ints[i] = a.i;
      floats[i] = a.f;
      continue;
    }
    if (!a.is_tensor) fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' must be a tensor, got a scalar");
    const bool packed = p.dtype == DataType::kFloat4E2M1 && a.tensor.ndim > 0;
    if (packed) in_codes[i] = view_in_codes(a.tensor, fn, p.name);
    const TensorView& t = packed ? in_codes[i] : a.tensor;
    if (!dtype_matches(p.dtype, t.dtype))
      fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' must have dtype ", type_name(p.dtype), ", got ",
           dtype_name(t.dtype));
    if (t.ndim != int(p.dims.size()))
      fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' must have ", p.dims.size(), " dimensions, got ",
           t.ndim, " (shape ", t.shape_str(), ")");
    for (int d = 0; d < t.ndim; ++d) {
      const KernelSignature::Dim& dim = p.dims[size_t(d)];
      if (dim.symbol < 0) {
        if (t.shape[d] != dim.value)
          fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' dimension ", d, " must be ", dim.value,
               ", got ", t.shape[d], " (shape ", t.shape_str(), ")");
        continue;
      }
      int64_t& s = symbols[size_t(dim.symbol)];
      if (s < 0) {
        if (t.shape[d] > INT32_MAX)
          fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' dimension ", d, " (", t.shape[d],
               ") exceeds the int32 range of dynamic dimensions");
        s = t.shape[d];
        bound_by[size_t(dim.symbol)] = p.name + " dimension " + std::to_string(d);
      } else if (s != t.shape[d]) {
        fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' dimension ", d, " is ", t.shape[d], ", but ",
             sig.symbols[size_t(dim.symbol)], " = ", s, " from ", bound_by[size_t(dim.symbol)]);
      }
    }
    if (t.ndim > 0 && t.shape[t.ndim - 1] > 1 && t.strides[t.ndim - 1] != 1)
      fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name,
           "' must have unit stride in its last dimension, got strides ", t.strides_str(),
           " (pass a copy with a contiguous last dimension)");
    if (!t.data && t.numel() > 0)
      fail(ErrorCode::kInvalidArgument, fn, ": argument '", p.name, "' has a null data pointer");
    data[i] = t.data;
    strides[i] = t.strides;
  }
  const TlLaunchArgs la = {data.data(), strides.data(), ints.data(), floats.data(), symbols.data()};
  const int rc = impl_->lib->launch()(host_runtime(), &la);
  if (rc != 0)
    fail(ErrorCode::kRuntime, fn, ": the kernel library ", impl_->path, " refused the launch (ABI version mismatch)");
}

Kernel Kernel::load(const std::string& library_path) {
  auto t0 = Clock::now();
  auto impl = from_library(KernelLibrary::open(library_path));
  impl->stats.load_ms = ms_since(t0);
  return Kernel(impl);
}

std::string generate_source(const Program& p) {
  return generate(p).source;
}

std::string cache_dir(const CompileOptions& options) {
  if (options.cache_dir.empty()) return default_kernel_cache_dir();
  make_dirs(options.cache_dir);
  return options.cache_dir;
}

Kernel compile(const Program& p, const CompileOptions& options) {
  const Generated g = generate(p);
  const std::vector<std::string> flags = kernel_compile_flags(g.target, options);
  const std::string key = cache_key(g, flags);
  const std::string dir = cache_dir(options);
  const std::string memo = dir + "\n" + key;
  if (options.use_cache && options.memory_cache) {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    auto it = memory_cache().find(memo);
    if (it != memory_cache().end()) {
      auto impl = std::make_shared<Kernel::Impl>(*it->second);
      impl->stats = CompileStats{g.lower_ms, g.codegen_ms, 0, 0, true, true};
      return Kernel(impl);
    }
  }
  CompileStats stats{g.lower_ms, g.codegen_ms, 0, 0, false, false};
  const std::string include_dir = runtime_include_dir(dir);
  auto t0 = Clock::now();
  auto build = [&](const std::string& src, const std::string& so) {
    compile_shared_object(src, so, include_dir, flags);
  };
  std::string path;
  if (options.use_cache) {
    path = cached_library(dir, key, g.source, build, &stats.disk_cache_hit);
  } else {
    const std::string tmp = dir + "/uncached-" + std::to_string(::getpid());
    make_dirs(tmp);
    path = tmp + "/" + key + ".so";
    write_file(tmp + "/" + key + ".cc", g.source);
    build(tmp + "/" + key + ".cc", path);
  }
  stats.compile_ms = ms_since(t0);
  t0 = Clock::now();
  auto impl = from_library(KernelLibrary::open(path));
  stats.load_ms = ms_since(t0);
  if (stats.disk_cache_hit) stats.compile_ms = 0;
  impl->source = g.source;
  impl->stats = stats;
  if (options.use_cache) {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    memory_cache()[memo] = impl;
  }
  return Kernel(impl);
}

void compile_to_library(const Program& p, const std::string& path, const CompileOptions& options) {
  const Generated g = generate(p);
  const std::string dir = cache_dir(options);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  write_file(tmp + ".cc", g.source);
  try {
    compile_shared_object(tmp + ".cc", tmp, runtime_include_dir(dir), kernel_compile_flags(g.target, options));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  ::unlink((tmp + ".cc").c_str());
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(ErrorCode::kRuntime, "tl: cannot write the kernel library ", path);
}

}  // namespace tessera::tl
