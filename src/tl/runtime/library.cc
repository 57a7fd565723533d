// Loading kernel libraries (see library.h).
#include "tl/runtime/library.h"

#include <dlfcn.h>

#include "tessera/core/error.h"

namespace tessera::tl {

std::shared_ptr<const KernelLibrary> KernelLibrary::open(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) fail(ErrorCode::kRuntime, "tl: cannot load the kernel library ", path, ": ", ::dlerror());
  std::shared_ptr<KernelLibrary> lib(new KernelLibrary);
  lib->handle_ = h;
  lib->path_ = path;
  lib->launch_ = reinterpret_cast<TlLaunchFn>(::dlsym(h, "tessera_tl_launch_v1"));
  auto sig = reinterpret_cast<TlSignatureFn>(::dlsym(h, "tessera_tl_signature_v1"));
  if (!lib->launch_ || !sig)
    fail(ErrorCode::kRuntime, "tl: ", path,
         " is not a tessera kernel library (tessera_tl_launch_v1 / "
         "tessera_tl_signature_v1 missing)");
  lib->signature_ = sig();
  return lib;
}

KernelLibrary::~KernelLibrary() {
  if (handle_) ::dlclose(handle_);
}

}  // namespace tessera::tl
