#include "peers/openblas_sgemm.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "tessera/core/cpu.h"

namespace tessera::bench {
namespace {

// OpenBLAS picks its kernels once, in its load-time initialiser, from the CPU or from
// OPENBLAS_CORETYPE. Linked into the CLI it would be initialised before main could set that variable,
// so it is loaded here, at first use, after the cap that matches TESSERA_ISA is in the environment.
//
// OpenBLAS's kernel set for each of tessera's x86 levels (OpenBLAS's DYNAMIC_ARCH names): the peer
// then uses the same instructions as the level it is compared with. None for AMX or the top level.
const char* coretype_for(Isa level) {
  switch (level) {
    case Isa::kScalar:
      return "Nehalem";  // OpenBLAS's lowest x86-64 kernels use SSE; it has no scalar-only set
    case Isa::kAvx2:
      return "Haswell";
    case Isa::kAvx512:
      return "SkylakeX";
    case Isa::kAvx512Bf16:
      return "Cooperlake";
    default:
      return nullptr;
  }
}

struct Openblas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_threads = nullptr;
  std::string description;  // "OpenBLAS 0.3.21 (Haswell kernels, capped at avx2)" or why it is absent
};

const Openblas& openblas() {
  static const Openblas lib = [] {
    Openblas o;
    std::string cap = "uncapped";
    if (const char* user = std::getenv("OPENBLAS_CORETYPE")) {
      cap = std::string("capped by OPENBLAS_CORETYPE=") + user;
    } else if (active_isa() < cpu_features().best && host_isa_family() == IsaFamily::kX86) {
      if (const char* coretype = coretype_for(active_isa())) {
        setenv("OPENBLAS_CORETYPE", coretype, 0);
        cap = std::string("capped at ") + isa_name(active_isa());
      }
    }
    void* handle = dlopen(TESSERA_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!handle) handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      o.description = std::string("OpenBLAS not loaded: ") + dlerror();
      return o;
    }
    o.sgemm = reinterpret_cast<decltype(o.sgemm)>(dlsym(handle, "cblas_sgemm"));
    o.set_threads = reinterpret_cast<decltype(o.set_threads)>(dlsym(handle, "openblas_set_num_threads"));
    const auto config = reinterpret_cast<decltype(&openblas_get_config)>(dlsym(handle, "openblas_get_config"));
    const auto corename = reinterpret_cast<decltype(&openblas_get_corename)>(dlsym(handle, "openblas_get_corename"));
    if (!o.sgemm || !o.set_threads) {
      o.sgemm = nullptr;
      o.description = "OpenBLAS not loaded: cblas_sgemm or openblas_set_num_threads missing";
      return o;
    }
    o.description = std::string(config ? config() : "OpenBLAS") + " (" + (corename ? corename() : "?") + " kernels, " +
                    cap + "): fp32 sgemm on converted operands";
    return o;
  }();
  return lib;
}

}  // namespace

bool openblas_available() {
  return openblas().sgemm != nullptr;
}

void openblas_set_threads(int n) {
  if (openblas_available()) openblas().set_threads(n);
}

std::string openblas_description() {
  return openblas().description;
}

void openblas_sgemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* d) {
  openblas().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(m), blasint(n), blasint(k), 1.0f, a, blasint(k), b,
                   blasint(k), 0.0f, d, blasint(n));
}

}  // namespace tessera::bench
