// The host target (see tessera/tl/target.h): the registry's kTlVector slot says which flags and vector
// width the active level's generated code gets.
#include "tessera/tl/target.h"

#include "backends/cpu/registry.h"
#include "backends/cpu/tl_vector.h"
#include "tessera/core/cpu.h"

namespace tessera::tl {

Target Target::host() {
  Target t;
  const CpuFeatures& f = cpu_features();
  t.isa = isa_name(active_isa());
  t.cpu = f.model_name + " | " + cpu_feature_string();
  const auto* v =
      static_cast<const cpu::TlVectorFlags*>(cpu::choose_kernel(cpu::Slot::kTlVector, "tl vector code").table);
  t.vector_lanes = v->lanes;
  for (const char* const* flag = v->flags; *flag; ++flag) t.isa_flags.push_back(*flag);
  return t;
}

std::string Target::str() const {
  return name + "-" + isa;
}

}  // namespace tessera::tl
