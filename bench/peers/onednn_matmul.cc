#include "peers/onednn_matmul.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace tessera::bench {

struct OnednnMatmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc a_md, b_md, d_md;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::memory a_mem, b_mem, d_mem;
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

OnednnMatmul::OnednnMatmul(int64_t m, int64_t n, int64_t k) : impl_(std::make_unique<Impl>()) {
  using dt = dnnl::memory::data_type;
  Impl& p = *impl_;
  p.a_md = dnnl::memory::desc({m, k}, dt::bf16, dnnl::memory::dims{k, 1});
  p.b_md = dnnl::memory::desc({k, n}, dt::bf16, dnnl::memory::dims{1, k});  // our [N,K], K-major
  p.d_md = dnnl::memory::desc({m, n}, dt::bf16, dnnl::memory::dims{n, 1});
  p.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a_md, p.b_md, p.d_md), p.engine);
  p.prim = dnnl::matmul(p.pd);
  p.a_mem = dnnl::memory(p.a_md, p.engine, DNNL_MEMORY_NONE);
  p.b_mem = dnnl::memory(p.b_md, p.engine, DNNL_MEMORY_NONE);
  p.d_mem = dnnl::memory(p.d_md, p.engine, DNNL_MEMORY_NONE);
}

OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::run(const void* a, const void* b, void* d) {
  Impl& p = *impl_;
  p.a_mem.set_data_handle(const_cast<void*>(a));
  p.b_mem.set_data_handle(const_cast<void*>(b));
  p.d_mem.set_data_handle(d);
  p.prim.execute(p.stream, {{DNNL_ARG_SRC, p.a_mem}, {DNNL_ARG_WEIGHTS, p.b_mem}, {DNNL_ARG_DST, p.d_mem}});
  p.stream.wait();
}

std::string OnednnMatmul::implementation() const {
  return impl_->pd.impl_info_str();
}

}  // namespace tessera::bench
