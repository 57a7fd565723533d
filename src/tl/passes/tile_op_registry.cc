// The tile-op registry (see tile_op_registry.h).
#include "tl/passes/tile_op_registry.h"

#include <algorithm>

namespace tessera::tl {
namespace {

const std::vector<TileOpImpl>& all_impls() {
  static const std::vector<TileOpImpl> impls = [] {
    std::vector<TileOpImpl> v;
    register_reference_tile_ops(&v);
    register_cpu_tile_ops(&v);
    return v;
  }();
  return impls;
}

}  // namespace

std::vector<const TileOpImpl*> tile_op_impls(NodeKind op, const Target& target) {
  std::vector<const TileOpImpl*> out;
  for (const TileOpImpl& impl : all_impls())
    if (impl.op == op && (impl.target.empty() || impl.target == target.name)) out.push_back(&impl);
  std::stable_sort(out.begin(), out.end(),
                   [](const TileOpImpl* a, const TileOpImpl* b) { return a->priority > b->priority; });
  return out;
}

const Expr& runtime_handle() {
  static const Expr rt = VarNode::make("rt", DataType::kHandle);
  return rt;
}

}  // namespace tessera::tl
