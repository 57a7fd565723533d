// Plain interface of the tile language's generated vector code (registry slot kTlVector): what the
// host compiler is told for each level. No inline functions: ISA files may include this.
#pragma once

namespace tessera {
enum class Isa : int;  // tessera/core/cpu.h
}

namespace tessera::cpu {

struct TlVectorFlags {
  int lanes;                 // float32 lanes of a vectorized loop (TESSERA_TL_VW); 0 = scalar loops only
  const char* const* flags;  // host-compiler flags of the level, ending with nullptr
};

// The flags of `level` (scalar, avx2, avx512, avx512bf16; amx gets avx512bf16's: tl emits no tile
// instructions; neon, neon_bf16, sve: -march with the level's extensions). Safe to call for levels this CPU lacks (it
// only returns text).
const TlVectorFlags* tl_vector_flags(Isa level);

}  // namespace tessera::cpu
