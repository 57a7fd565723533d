// One binder per file; module.cc calls them in order.
#pragma once

#include <nanobind/nanobind.h>

namespace tessera::python {

// tessera::Error -> the classes of tessera/_errors.py, same message (errors.cc).
void register_error_translator();
// Version, threads, CPU features and the ISA cap (bind_core.cc).
void bind_core(nanobind::module_& m);
// Whole-array scalar dtype conversions, for tests and quantisers (bind_dtypes.cc).
void bind_dtypes(nanobind::module_& m);
// Dense GEMMs and scale-factor layout helpers of tessera/gemm.h (bind_gemm.cc).
void bind_gemm(nanobind::module_& m);

}  // namespace tessera::python
