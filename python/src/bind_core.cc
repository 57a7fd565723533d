// Version-independent runtime controls: thread count, CPU features, ISA cap.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <sstream>
#include <string>

#include "bindings.h"
#include "tessera/core/cpu.h"
#include "tessera/core/thread_pool.h"
#include "tessera/info.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

nb::dict cpu_info() {
  const CpuFeatures& f = cpu_features();
  nb::list features;
  std::istringstream words(cpu_feature_string());
  for (std::string w; words >> w;) features.append(w);
  nb::dict info;
  info["vendor"] = f.vendor;
  info["model"] = f.model_name;
  info["logical_cpus"] = f.logical_cpus;
  info["features"] = features;
  info["best_isa"] = isa_name(f.best);
  info["active_isa"] = isa_name(active_isa());
  info["l1d_bytes"] = f.l1d_bytes;
  info["l2_bytes"] = f.l2_bytes;
  info["l3_bytes"] = f.l3_bytes;
  return info;
}

}  // namespace

void bind_core(nb::module_& m) {
  m.def("num_threads", &num_threads, "Threads used by parallel work (the caller counts as one).");
  m.def("set_num_threads", &set_num_threads, nb::arg("n"),
        "Sets the thread count; n <= 0 restores the default (logical CPUs or TESSERA_NUM_THREADS).");
  m.def("cpu_info", &cpu_info, "Vendor, model, feature flags, best and active ISA of this machine.");
  m.def("active_isa", [] { return std::string(isa_name(active_isa())); });
  // Benchmarks written in Python (tessera.bench_kernels) measure the limit right after each row, as
  // the C++ suites do; the loop runs on the pool's threads, so it must not be called from inside one.
  m.def("measure_dram_copy_gbps", &measure_dram_copy_gbps,
        "All-thread DRAM copy bandwidth (GB/s, bytes read + written) measured now (about 0.1 s).");
  m.def("kernel_registry", &kernel_registry_matrix,
        "The kernel registry as text: per kernel slot, the implementation each ISA level runs.");
  m.def(
      "set_isa", [](std::optional<std::string> name) { set_isa_cap(name ? isa_from_name(*name) : host_isa_top()); },
      nb::arg("name").none(),
      "Caps the instruction set kernels may use (x86: scalar, avx2, avx512, avx512bf16, amx; ARM: scalar, neon, "
      "neon_bf16, sve); None lifts the cap.");
}

}  // namespace tessera::python
