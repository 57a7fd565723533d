// Transposed reads of on-chip buffers: a serial loop over i around a vectorized loop over j that reads
// buf[base + i + K * j] (one element per i, a row stride K per j) would gather every vector. Instead,
// per VW rows of i, the emitter transposes VW x VW blocks of the buffer in registers
// (tlrt::transpose_block) into a strip on the stack, and the unchanged vector loop reads the strip's
// row i - i0 contiguously. Loops that do not match (extents not multiples of VW, a symbolic base, the
// buffer written in the loop, lets, other ISAs) keep the per-lane code.
#include <set>

#include "tl/codegen/cpu/cpu_emitter.h"
#include "tl/ir/visitor.h"
#include "tl/passes/linear.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

// The ISA levels whose runtime has a register path for 4- and 8-byte blocks of VW x VW.
bool has_register_transpose(const Target& t) {
  if (t.vector_lanes == 8) return t.isa == "avx2";
  if (t.vector_lanes == 16) return t.isa == "avx512" || t.isa == "avx512bf16" || t.isa == "amx";
  return false;
}

}  // namespace

// ld reads base + i + K * j (K > 1, base constant) of an on-chip buffer of 4- or 8-byte elements.
bool CpuEmitter::column_read(const LoadNode* ld, const Expr& i, const Expr& j, ColumnRead* read) {
  if (ld->buffer->scope == Scope::kGlobal) return false;
  const int bytes = type_bytes(ld->buffer->dtype);
  if (bytes != 4 && bytes != 8) return false;
  Expr rest, base;
  int64_t ci = 0, cj = 0, b = 0;
  if (!linear_in(simplify(offset_expr(ld->buffer, ld->indices)), i, &rest, &ci) || ci != 1 ||
      !linear_in(rest, j, &base, &cj) || cj <= 1 || !is_const_int(simplify(base), &b))
    return false;
  *read = ColumnRead{ld->buffer, b, cj};
  return true;
}

bool CpuEmitter::transposed_read_loop(const ForNode* outer) {
  const int lanes = target_.vector_lanes;
  if (!has_register_transpose(target_) || outer->kind != ForKind::kSerial) return false;
  const ForNode* inner = outer->body.as<ForNode>();
  int64_t mn_i = 0, ext_i = 0, mn_j = 0, ext_j = 0;
  if (!inner || inner->kind != ForKind::kVectorized || !is_const_int(outer->min, &mn_i) ||
      !is_const_int(outer->extent, &ext_i) || !is_const_int(inner->min, &mn_j) || !is_const_int(inner->extent, &ext_j))
    return false;
  if (ext_i < lanes || ext_j < lanes || ext_i % lanes != 0 || ext_j % lanes != 0) return false;

  // Exactly one read (one buffer, base and stride) of an on-chip buffer moving by one element along i and by K != 1
  // along j, from a buffer the loop does not write; no lets (their values would have to be followed).
  bool refuse = false;
  std::set<const BufferNode*> written;
  for_each_stmt(inner->body, [&](const Stmt& s) {
    if (s.as<LetStmtNode>() || s.as<ForNode>()) refuse = true;
    if (const StoreNode* st = s.as<StoreNode>()) written.insert(st->buffer.get());
  });
  if (refuse) return false;
  ColumnRead read, r;
  int candidates = 0;
  for_each_expr(inner->body, [&](const Expr& e) {
    const LoadNode* ld = e.as<LoadNode>();
    if (!ld || !column_read(ld, outer->var, inner->var, &r)) return;
    candidates += !candidates || r.buffer.get() != read.buffer.get() || r.base != read.base || r.stride != read.stride;
    read = r;
  });
  if (candidates != 1 || written.count(read.buffer.get())) return false;
  // The strip lives on the stack: VW rows of the loop's j extent. Long rows keep the per-lane code.
  constexpr int64_t kMaxStripBytes = 32 << 10;
  if (ext_j * lanes * type_bytes(read.buffer->dtype) > kMaxStripBytes) return false;
  // The blocks read every (i, j) of the loop, masked lanes included: all of them inside the buffer.
  const int64_t first = read.base + mn_i + read.stride * mn_j;
  const int64_t last = read.base + mn_i + ext_i - 1 + read.stride * (mn_j + ext_j - 1);
  if (first < 0 || last >= read.buffer->numel_const()) return false;

  const std::string strip = unique("tl_strip"), row0 = unique("tl_ib"), q = unique("tl_q");
  const std::string iv = name_of(outer->var), src = name_of(read.buffer), w = std::to_string(ext_j);
  const std::string l = std::to_string(lanes);
  open("");
  line(std::string("alignas(64) ") + storage_type(read.buffer->dtype) + " " + strip + "[" +
       std::to_string(ext_j * lanes) + "];  // " + l + " rows of the transposed buffer");
  open("for (int32_t " + row0 + " = " + std::to_string(mn_i) + "; " + row0 + " < " + std::to_string(mn_i + ext_i) +
       "; " + row0 + " += " + l + ")");
  open("for (int32_t " + q + " = 0; " + q + " < " + w + "; " + q + " += " + l + ")");
  line("tlrt::transpose_block(" + strip + " + " + q + ", " + w + ", " + src + " + (" + std::to_string(first) + " + (" +
       row0 + " - " + std::to_string(mn_i) + ") + int64_t(" + q + ") * " + std::to_string(read.stride) + "), " +
       std::to_string(read.stride) + ");");
  close();
  open("for (int32_t " + iv + " = " + row0 + "; " + iv + " < " + row0 + " + " + l + "; ++" + iv + ")");
  strip_ = read;
  strip_i_ = outer->var;
  strip_row_ = strip + " + (" + iv + " - " + row0 + ") * " + w + " - " + std::to_string(mn_j);
  vector_loop(inner);
  strip_ = ColumnRead{};
  close();
  close();
  close();
  return true;
}

}  // namespace tessera::tl
