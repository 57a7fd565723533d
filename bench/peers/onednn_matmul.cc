#include "peers/onednn_matmul.h"

#include <omp.h>

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"

namespace tessera::bench {
namespace {

using dt = dnnl::memory::data_type;

// oneDNN's counterpart of tessera's level: the most it may use when TESSERA_ISA caps us.
dnnl::cpu_isa onednn_isa(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return dnnl::cpu_isa::sse41;  // oneDNN's lowest level; it has no scalar-only mode
    case Isa::kAvx2:
      return dnnl::cpu_isa::avx2;
    case Isa::kAvx512:
      return dnnl::cpu_isa::avx512_core;
    case Isa::kAvx512Bf16:
      return dnnl::cpu_isa::avx512_core_bf16;
    case Isa::kAmx:
      break;
  }
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::cpu_isa::isa_default;  // no cap (3.x renamed 2.x's `all`)
#else
  return dnnl::cpu_isa::all;
#endif
}

dnnl::matmul::primitive_desc make_pd(const dnnl::engine& engine, dt type, int64_t m, int64_t n, int64_t k) {
  const dnnl::memory::desc a({m, k}, type, dnnl::memory::dims{k, 1});
  const dnnl::memory::desc b({k, n}, type, dnnl::memory::dims{1, k});  // our [N,K], K-major
  const dnnl::memory::desc d({m, n}, type, dnnl::memory::dims{n, 1});
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::matmul::primitive_desc(engine, a, b, d);
#else
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, d), engine);
#endif
}

// Decided once, before the first primitive: the ISA cap (it must precede any primitive) and whether
// bf16 matmul is supported here.
struct PeerSetup {
  std::string cap = "uncapped";  // or "capped at avx2", "capped by DNNL_MAX_CPU_ISA=AVX2"
  bool bf16 = true;
};

// The user's own cap (oneDNN reads these itself), as "NAME=value"; empty when neither is set.
std::string user_cap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* value = std::getenv(name)) return std::string(name) + "=" + value;
  return "";
}

const PeerSetup& setup() {
  static const PeerSetup s = [] {
    PeerSetup p;
    const Isa level = active_isa();
    const std::string user = user_cap();
    if (!user.empty()) {
      p.cap = "capped by " + user;
    } else if (level < cpu_features().best) {
      try {
        dnnl::set_max_cpu_isa(onednn_isa(level));
        p.cap = std::string("capped at ") + isa_name(level);
      } catch (const dnnl::error&) {
        // Already frozen by an earlier oneDNN call: the peer runs uncapped and description() says so.
      }
    }
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      make_pd(engine, dt::bf16, 16, 16, 32);
    } catch (const dnnl::error&) {
      p.bf16 = false;
    }
    return p;
  }();
  return s;
}

}  // namespace

struct OnednnMatmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::memory a_mem, b_mem, d_mem;
  int64_t m = 0, n = 0, k = 0;
  bool fp32 = false;  // the fallback: operands converted into the buffers below on every run
  AlignedPtr<float> a32, b32, d32;
};

bool OnednnMatmul::available() {
  return true;
}
void OnednnMatmul::set_threads(int n) {
  omp_set_num_threads(n);
}

void OnednnMatmul::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

std::string OnednnMatmul::label() {
  return setup().bf16 ? "oneDNN" : "oneDNN-fp32";
}

std::string OnednnMatmul::description() {
  const PeerSetup& s = setup();
  const dnnl_version_t* v = dnnl_version();
  std::string line =
      "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  line += " (" + s.cap + ")";
  line += s.bf16 ? ": bf16 matmul" : ": bf16 matmul refused here, so fp32 matmul on operands converted per call";
  return line;
}

OnednnMatmul::OnednnMatmul(int64_t m, int64_t n, int64_t k) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.m = m, p.n = n, p.k = k;
  p.fp32 = !setup().bf16;
  const dt type = p.fp32 ? dt::f32 : dt::bf16;
  p.pd = make_pd(p.engine, type, m, n, k);
  p.prim = dnnl::matmul(p.pd);
  p.a_mem = dnnl::memory(p.pd.src_desc(), p.engine, DNNL_MEMORY_NONE);
  p.b_mem = dnnl::memory(p.pd.weights_desc(), p.engine, DNNL_MEMORY_NONE);
  p.d_mem = dnnl::memory(p.pd.dst_desc(), p.engine, DNNL_MEMORY_NONE);
  if (p.fp32) {
    p.a32 = aligned_array<float>(size_t(m * k));
    p.b32 = aligned_array<float>(size_t(n * k));
    p.d32 = aligned_array<float>(size_t(m * n));
    p.a_mem.set_data_handle(p.a32.get());
    p.b_mem.set_data_handle(p.b32.get());
    p.d_mem.set_data_handle(p.d32.get());
  }
}

OnednnMatmul::~OnednnMatmul() = default;

namespace {

void widen(const void* from, float* to, int64_t count) {
  const auto* src = static_cast<const uint16_t*>(from);
  OnednnMatmul::parallel_for(count, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) to[i] = bf16_to_f32(src[i]);
  });
}

}  // namespace

void OnednnMatmul::run(const void* a, const void* b, void* d) {
  Impl& p = *impl_;
  if (p.fp32) {
    widen(a, p.a32.get(), p.m * p.k);
    widen(b, p.b32.get(), p.n * p.k);
  } else {
    p.a_mem.set_data_handle(const_cast<void*>(a));
    p.b_mem.set_data_handle(const_cast<void*>(b));
    p.d_mem.set_data_handle(d);
  }
  p.prim.execute(p.stream, {{DNNL_ARG_SRC, p.a_mem}, {DNNL_ARG_WEIGHTS, p.b_mem}, {DNNL_ARG_DST, p.d_mem}});
  p.stream.wait();
  if (p.fp32) {
    auto* out = static_cast<uint16_t*>(d);
    const float* d32 = p.d32.get();
    parallel_for(p.m * p.n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = f32_to_bf16(d32[i]);
    });
  }
}

std::string OnednnMatmul::implementation() const {
  return (impl_->fp32 ? "fp32 " : "") + std::string(impl_->pd.impl_info_str());
}

}  // namespace tessera::bench
