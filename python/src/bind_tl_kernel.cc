// Compiling and calling tile-language kernels from Python (tessera.tl.JITKernel builds on these).
// Arguments arrive as ArrayRef (tensors) or Python ints/floats (scalars); the launch runs without the GIL.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/core/error.h"
#include "tessera/tl/kernel.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using namespace tessera::tl;

CompileOptions options(const std::vector<std::string>& flags, const std::string& dir, bool use_cache) {
  CompileOptions o;
  o.extra_flags = flags;
  o.cache_dir = dir;
  o.use_cache = use_cache;
  return o;
}

std::map<std::string, double> stats_dict(const CompileStats& s) {
  return {{"lower_ms", s.lower_ms},
          {"codegen_ms", s.codegen_ms},
          {"compile_ms", s.compile_ms},
          {"load_ms", s.load_ms},
          {"disk_cache_hit", s.disk_cache_hit ? 1.0 : 0.0},
          {"memory_cache_hit", s.memory_cache_hit ? 1.0 : 0.0}};
}

void call(const Kernel& k, const nb::list& args) {
  std::vector<KernelArg> a;
  const std::vector<std::string> names = k.param_names();
  for (size_t i = 0; i < args.size(); ++i) {
    nb::handle h = args[i];
    const std::string name = i < names.size() ? names[i] : "arg" + std::to_string(i);
    if (nb::isinstance<ArrayRef>(h)) {
      a.emplace_back(to_view(nb::cast<const ArrayRef&>(h), ("kernel '" + k.name() + "'").c_str(), name.c_str()));
    } else if (nb::isinstance<nb::bool_>(h) || nb::isinstance<nb::int_>(h)) {
      a.emplace_back(nb::cast<int64_t>(h));
    } else if (nb::isinstance<nb::float_>(h)) {
      a.emplace_back(nb::cast<double>(h));
    } else {
      fail(ErrorCode::kInvalidArgument, "kernel '", k.name(), "': argument '", name,
           "' must be an array or a Python int/float, got ", nb::type_name(h.type()).c_str());
    }
  }
  nb::gil_scoped_release release;
  k(a);
}

}  // namespace

void bind_tl_kernel(nb::module_& m) {
  nb::class_<Kernel>(m, "TlKernel", "A compiled tile-language kernel (tessera::tl::Kernel).")
      .def_prop_ro("name", &Kernel::name)
      .def_prop_ro("source", &Kernel::source)
      .def_prop_ro("library_path", &Kernel::library_path)
      .def_prop_ro("param_names", &Kernel::param_names)
      .def_prop_ro("symbol_names", &Kernel::symbol_names)
      .def_prop_ro("stats", [](const Kernel& k) { return stats_dict(k.stats()); })
      .def("__call__", &call, nb::arg("args"));

  // Compiling runs the host compiler for up to seconds: other Python threads keep running meanwhile.
  m.def(
      "tl_compile",
      [](const Program& p, const std::vector<std::string>& flags, const std::string& dir, bool use_cache) {
        return compile(p, options(flags, dir, use_cache));
      },
      nb::arg("program"), nb::arg("flags"), nb::arg("cache_dir"), nb::arg("use_cache"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def("tl_generate_source", &generate_source, nb::arg("program"));
  m.def(
      "tl_compile_to_library",
      [](const Program& p, const std::string& path, const std::vector<std::string>& flags) {
        compile_to_library(p, path, options(flags, "", true));
      },
      nb::arg("program"), nb::arg("path"), nb::arg("flags"), nb::call_guard<nb::gil_scoped_release>());
  m.def("tl_load_library", &Kernel::load, nb::arg("path"));
  m.def(
      "tl_cache_dir", [](const std::string& dir) { return cache_dir(options({}, dir, true)); }, nb::arg("dir"));
}

}  // namespace tessera::python
