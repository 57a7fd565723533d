// Per-target registry of tile-operation lowerings. Each implementation says which target it serves
// ("" = any target: the portable reference lowering every target falls back to), which op, a priority,
// and a predicate that returns why it refuses a given op (empty: it accepts). lower_tile_ops picks the
// accepting implementation with the highest priority; TESSERA_TL_VERBOSE_LOWERING=1 prints the choice
// and every refusal. A new target adds implementations here; no call site changes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/tl/ir.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

struct TileOpImpl {
  std::string target;
  NodeKind op;
  std::string name;
  int priority = 0;
  std::function<std::string(const Stmt&, const Target&)> refuse;
  std::function<Stmt(const Stmt&, const Target&)> lower;
};

// Implementations that may serve `op` on `target`, highest priority first.
std::vector<const TileOpImpl*> tile_op_impls(NodeKind op, const Target& target);

// The built-in sets (called once by the registry).
void register_reference_tile_ops(std::vector<TileOpImpl>* out);
void register_cpu_tile_ops(std::vector<TileOpImpl>* out);

// The variable generated code knows as the TlRuntime pointer (the first argument of runtime calls).
const Expr& runtime_handle();

}  // namespace tessera::tl
