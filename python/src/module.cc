// tessera._C: the native half of the tessera package. Python code never calls it directly except
// through tessera/* wrappers, which marshal arrays into ArrayRef (see tessera/_arrays.py).
#include "array_ref.h"
#include "bindings.h"

NB_MODULE(_C, m) {
  m.doc() = "tessera native module (nanobind); use the tessera package, not this module";
  m.attr("__version__") = TESSERA_VERSION;
  tessera::python::register_error_translator();
  tessera::python::bind_array_ref(m);
  tessera::python::bind_core(m);
  tessera::python::bind_dtypes(m);
  tessera::python::bind_gemm(m);
  tessera::python::bind_gemm_grouped(m);
  tessera::python::bind_flash_mla(m);
  tessera::python::bind_tl(m);
  tessera::python::bind_tl_kernel(m);
  tessera::python::bind_select(m);
  tessera::python::bind_mqa_logits(m);
  tessera::python::bind_ep(m);
  tessera::python::bind_mega_moe(m);
  tessera::python::bind_model(m);
}
