// Tile-op lowering (see lower_tile_ops.h).
#include "tl/passes/lower_tile_ops.h"

#include <cstdio>
#include <cstdlib>

#include "core/env.h"
#include "tessera/core/error.h"
#include "tl/ir/visitor.h"
#include "tl/passes/tile_op_registry.h"

namespace tessera::tl {
namespace {

bool verbose() {
  return env::flag("TESSERA_TL_VERBOSE_LOWERING");
}

class Lowerer : public IRMutator {
 public:
  explicit Lowerer(const Target& t) : target_(t) {}

 protected:
  Stmt lower(const Stmt& s) {
    std::string refusals;
    for (const TileOpImpl* impl : tile_op_impls(s->kind, target_)) {
      const std::string why = impl->refuse ? impl->refuse(s, target_) : std::string();
      if (verbose())
        std::fprintf(stderr, "[tessera tl] %s %s: %s %s\n", s->loc.str().c_str(), node_kind_name(s->kind),
                     impl->name.c_str(), why.empty() ? "chosen" : ("refused: " + why).c_str());
      if (why.empty()) return impl->lower(s, target_);
      refusals += "; " + impl->name + " refused: " + why;
    }
    fail(ErrorCode::kNotImplemented, s->loc.str(), ": ", node_kind_name(s->kind), ": no implementation for target ",
         target_.str(), refusals.empty() ? std::string(" (none registered)") : refusals);
  }
  Stmt mutate_Copy(const CopyNode*, const Stmt& self) override { return lower(self); }
  Stmt mutate_Gemm(const GemmNode*, const Stmt& self) override { return lower(self); }
  Stmt mutate_Fill(const FillNode*, const Stmt& self) override { return lower(self); }
  Stmt mutate_Reduce(const ReduceNode*, const Stmt& self) override { return lower(self); }
  Stmt mutate_Cumsum(const CumsumNode*, const Stmt& self) override { return lower(self); }
  Stmt mutate_Atomic(const AtomicNode*, const Stmt& self) override { return lower(self); }

 private:
  const Target& target_;
};

}  // namespace

Stmt lower_tile_ops(const Stmt& s, const Target& target) {
  return Lowerer(target).mutate(s);
}

}  // namespace tessera::tl
