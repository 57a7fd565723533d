// Internal: the two instructions spin loops and streaming writers need, per architecture.
#pragma once

namespace tessera {

// A hint inside a busy-wait loop: the core yields to its sibling thread and saves power.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

// Orders earlier non-temporal stores before later stores (x86 sfence). ARM has no weakly ordered
// store kind of its own here; a full store barrier keeps the same contract.
inline void store_fence() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_sfence();
#elif defined(__aarch64__)
  __asm__ volatile("dmb ishst" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

}  // namespace tessera
