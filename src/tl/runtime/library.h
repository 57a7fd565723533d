// A loaded kernel library (dlopen) and its two exported functions.
#pragma once

#include <memory>
#include <string>

#include "tessera/tl/runtime/abi.h"

namespace tessera::tl {

class KernelLibrary {
 public:
  // Throws Error(kRuntime) when the file cannot be loaded or lacks the kernel ABI functions.
  static std::shared_ptr<const KernelLibrary> open(const std::string& path);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  const std::string& path() const { return path_; }
  const std::string& signature() const { return signature_; }
  TlLaunchFn launch() const { return launch_; }

 private:
  KernelLibrary() = default;
  void* handle_ = nullptr;
  std::string path_, signature_;
  TlLaunchFn launch_ = nullptr;
};

// The runtime table handed to kernels (the thread pool and the GEMM micro-kernels of this process).
const TlRuntime* host_runtime();

// Kernels launched from now on write outputs of more than `bytes` bytes with streaming stores;
// bytes < 0 restores the default (TESSERA_TL_STREAM_BYTES, else half the L3 as launch.cc counts it).
// For tests; not while a kernel runs.
void set_stream_bytes(int64_t bytes);

}  // namespace tessera::tl
