#include "ep/kernels.h"

#include <atomic>

#include "backends/cpu/registry.h"
#include "tessera/core/cpu.h"

namespace tessera::ep::detail {

// The registry is asked once per level (the transports call this per token); the level itself can
// change at run time (set_isa_cap), so the choice is kept per level.
const cpu::EpKernels& kernels() {
  static std::atomic<const cpu::EpKernels*> chosen[int(Isa::kAmx) + 1] = {};
  const Isa level = active_isa();
  const cpu::EpKernels* k = chosen[int(level)].load(std::memory_order_acquire);
  if (!k) {
    k = static_cast<const cpu::EpKernels*>(cpu::choose_kernel_at(cpu::Slot::kEp, level, "ep").table);
    chosen[int(level)].store(k, std::memory_order_release);
  }
  return *k;
}

}  // namespace tessera::ep::detail
