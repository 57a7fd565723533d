// Statements and on-chip buffers of the CPU emitter.
#include "tl/codegen/cpu/cpu_emitter.h"
#include "tl/ir/visitor.h"

namespace tessera::tl {
namespace {

// Local buffers up to this many bytes live on the stack of the block function (registers, if the
// compiler can); larger ones and all shared / fragment buffers live in the per-thread block arena.
constexpr int64_t kStackLocalBytes = 4096;

bool in_arena(const Buffer& b) {
  if (b->scope == Scope::kGlobal) return false;  // T.make_tensor views: memory the caller owns
  return b->scope != Scope::kLocal || b->numel_const() * type_bytes(b->dtype) > kStackLocalBytes;
}

}  // namespace

void CpuEmitter::line(const std::string& text) {
  out_ << std::string(size_t(indent_) * 2, ' ') << text << "\n";
}

void CpuEmitter::open(const std::string& text) {
  line(text.empty() ? "{" : text + " {");
  ++indent_;
}

void CpuEmitter::close() {
  --indent_;
  line("}");
}

int64_t CpuEmitter::plan_arena(const Stmt& body) {
  int64_t bytes = 0;
  for_each_stmt(body, [&](const Stmt& s) {
    const AllocateNode* a = s.as<AllocateNode>();
    if (!a || !in_arena(a->buffer)) return;
    bytes = (bytes + 63) / 64 * 64;
    arena_offset_[a->buffer.get()] = bytes;
    bytes += a->buffer->numel_const() * type_bytes(a->buffer->dtype);
  });
  return (bytes + 63) / 64 * 64;
}

void CpuEmitter::declare_buffer(const Buffer& b) {
  const std::string name = name_of(b);
  const std::string type = storage_type(b->dtype);
  std::string shape;
  for (size_t d = 0; d < b->shape.size(); ++d) shape += (d ? " x " : "") + expr(b->shape[d]);
  const std::string comment =
      "  // " + std::string(scope_name(b->scope)) + " " + type_name(b->dtype) + " [" + shape + "]";
  auto it = arena_offset_.find(b.get());
  if (b->address.defined()) {  // T.make_tensor: a global tensor at a run-time address
    line(global_pointer_type(b) + " const " + name + " = reinterpret_cast<" + type + "*>(" + expr(b->address) + ");" +
         comment);
  } else if (it != arena_offset_.end()) {
    line(type + "* const __restrict " + name + " = reinterpret_cast<" + type + "*>(tl_arena + " +
         std::to_string(it->second) + ");" + comment);
  } else {
    line("alignas(64) " + type + " " + name + "[" + std::to_string(b->numel_const()) + "];" + comment);
  }
}

void CpuEmitter::stmt(const Stmt& s) {
  if (!s.defined()) return;
  switch (s->kind) {
    case NodeKind::kStore: {
      const StoreNode* st = s.as<StoreNode>();
      line(name_of(st->buffer) + "[" + expr(offset_expr(st->buffer, st->indices)) +
           "] = " + encode(st->buffer->dtype, expr(st->value), st->value.type()) + ";");
      return;
    }
    case NodeKind::kLetStmt: {
      const LetStmtNode* l = s.as<LetStmtNode>();
      line(std::string("const ") + value_type(l->var.type()) + " " + name_of(l->var) + " = " + expr(l->value) + ";");
      stmt(l->body);
      return;
    }
    case NodeKind::kFor: {
      const ForNode* f = s.as<ForNode>();
      if (f->kind == ForKind::kVectorized) return vector_loop(f);
      if (transposed_read_loop(f)) return;
      const std::string v = name_of(f->var), end = unique(v + "_end");
      int64_t ext;
      if (f->kind == ForKind::kUnrolled) {
        line(is_const_int(f->extent, &ext) ? "#pragma GCC unroll " + std::to_string(ext) : "#pragma GCC unroll 8");
      }
      open("for (int32_t " + v + " = " + expr(f->min) + ", " + end + " = " + v + " + " + expr(f->extent) + "; " + v +
           " < " + end + "; ++" + v + ")");
      stmt(f->body);
      close();
      return;
    }
    case NodeKind::kIfThenElse: {
      const IfThenElseNode* i = s.as<IfThenElseNode>();
      open("if (" + expr(i->cond) + ")");
      stmt(i->then_case);
      if (i->else_case.defined()) {
        --indent_;
        open("} else");
        stmt(i->else_case);
      }
      close();
      return;
    }
    case NodeKind::kSeq:
      for (const Stmt& x : s.as<SeqNode>()->stmts) stmt(x);
      return;
    case NodeKind::kAllocate: {
      const AllocateNode* a = s.as<AllocateNode>();
      declare_buffer(a->buffer);
      stmt(a->body);
      return;
    }
    case NodeKind::kEvaluate:
      line(expr(s.as<EvaluateNode>()->value) + ";");
      return;
    default:
      fail_at(s->loc, std::string("codegen cpu: ") + node_kind_name(s->kind) +
                          " was not lowered (internal error: the pass pipeline must lower every tile op)");
  }
}

}  // namespace tessera::tl
