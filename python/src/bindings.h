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
// MoE GEMMs, einsum, the HC prenorm GEMM and skip-head-mid GEMM of tessera/gemm_grouped.h (bind_gemm_grouped.cc).
void bind_gemm_grouped(nanobind::module_& m);
// FlashMLA decode, sparse prefill and the FP8 KV-cache quantiser of tessera/flash_mla.h (bind_flash_mla.cc).
void bind_flash_mla(nanobind::module_& m);
// The tile language: IR builder for tessera.language (bind_tl.cc), compile and call (bind_tl_kernel.cc).
void bind_tl(nanobind::module_& m);
void bind_tl_kernel(nanobind::module_& m);

// DeepSelect's top-k of tessera/select.h (bind_select.cc).
void bind_select(nanobind::module_& m);
// DeepGEMM's MQA logits of tessera/mqa_logits.h (bind_mqa_logits.cc).
void bind_mqa_logits(nanobind::module_& m);
// Expert-parallel groups, ElasticBuffer and Buffer of tessera/ep.h (bind_ep.cc, bind_ep_legacy.cc).
void bind_ep(nanobind::module_& m);
// DeepGEMM's Mega MoE of tessera/mega_moe.h (bind_mega_moe.cc; needs bind_ep's EpGroup).
void bind_mega_moe(nanobind::module_& m);
// The DeepSeek-V3.2 model runner of tessera/model.h (bind_model.cc).
void bind_model(nanobind::module_& m);

}  // namespace tessera::python
