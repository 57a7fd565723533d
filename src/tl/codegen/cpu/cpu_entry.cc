// The translation unit around the kernel body: the argument context, the block function and the two
// exported C functions of the kernel ABI (tessera/tl/runtime/abi.h).
#include "tl/codegen/cpu/cpu_emitter.h"
#include "tl/ir/visitor.h"
#include "tl/passes/row_sweep.h"
#include "tl/passes/tile_op_registry.h"
#include "tl/runtime/signature.h"

namespace tessera::tl {

void CpuEmitter::emit_context() {
  open("struct tl_ctx");
  line("const TlRuntime* rt;");
  line("int64_t grid[3];");
  line("bool tl_stream;  // outputs exceed the cache: write them with non-temporal stores");
  for (const Param& p : prog_.params) {
    if (p.buffer) {
      line(global_pointer_type(p.buffer) + " " + name_of(p.buffer) + ";");
      for (size_t d = 0; d + 1 < p.buffer->strides.size(); ++d) line("int64_t " + name_of(p.buffer->strides[d]) + ";");
    } else {
      line(std::string(value_type(p.scalar.type())) + " " + name_of(p.scalar) + ";");
    }
  }
  for (const Expr& s : prog_.symbols) line("int32_t " + name_of(s) + ";");
  --indent_;
  line("};");
  line("");
}

void CpuEmitter::emit_locals(const std::string& ctx) {
  line("const TlRuntime* const rt = " + ctx + ".rt;");
  line("(void)rt;");
  for (const Param& p : prog_.params) {
    if (p.buffer) {
      const std::string n = name_of(p.buffer);
      line(global_pointer_type(p.buffer) + " const " + n + " = " + ctx + "." + n + ";");
      for (size_t d = 0; d + 1 < p.buffer->strides.size(); ++d) {
        const std::string s = name_of(p.buffer->strides[d]);
        line("const int64_t " + s + " = " + ctx + "." + s + ";");
      }
    } else {
      const std::string n = name_of(p.scalar);
      line(std::string("const ") + value_type(p.scalar.type()) + " " + n + " = " + ctx + "." + n + ";");
    }
  }
  for (const Expr& s : prog_.symbols) line("const int32_t " + name_of(s) + " = " + ctx + "." + name_of(s) + ";");
}

void CpuEmitter::emit_block_function(size_t index, bool band) {
  const LaunchNode* launch = launches_[index];
  const std::string id = std::to_string(index);
  if (band) {
    line("// T.Kernel #" + id + " by bands: every block of grid dimension 0 for one (by, bz), row by row, so a");
    line("// thread streams whole rows of the tensors (src/tl/passes/row_sweep.h)");
  } else {
    line("// T.Kernel #" + id + " (" + launch->loc.str() + "): " + std::to_string(arena_bytes_[index]) +
         " bytes of shared/fragment buffers per thread");
  }
  // A template on the streaming decision: each instance has its stores fixed at compile time (no flag
  // test per store in the vector loops).
  line("template <bool tl_stream>");
  open(std::string(band ? "void tl_band_" : "void tl_block_") + id +
       "(void* tl_ctx_ptr, int64_t tl_block_id, void* tl_arena_ptr)");
  line("const tl_ctx& c = *static_cast<const tl_ctx*>(tl_ctx_ptr);");
  line("char* const tl_arena = static_cast<char*>(tl_arena_ptr);");
  line("(void)tl_arena;");
  emit_locals("c");
  static const char* const kIndex[] = {"tl_block_id % c.grid[0]", "tl_block_id / c.grid[0] % c.grid[1]",
                                       "tl_block_id / (c.grid[0] * c.grid[1])"};
  static const char* const kBandIndex[] = {"", "tl_block_id % c.grid[1]", "tl_block_id / c.grid[1]"};
  for (size_t d = band ? 1 : 0; d < launch->block_vars.size(); ++d)
    line("const int32_t " + name_of(launch->block_vars[d]) + " = int32_t(" + (band ? kBandIndex : kIndex)[d] + ");");
  uses_stream_ = false;
  stmt(band ? band_bodies_[index] : launch->body);
  if (!band) block_streams_.push_back(uses_stream_);
  close();
  line("");
}

void CpuEmitter::emit_launch_function() {
  open("TESSERA_TL_EXPORT int tessera_tl_launch_v1(const TlRuntime* rt, const TlLaunchArgs* tl_args)");
  line("if (rt->abi_version != TESSERA_TL_ABI_VERSION) return 1;");
  line("tl_ctx c;");
  line("c.rt = rt;");
  for (size_t i = 0; i < prog_.params.size(); ++i) {
    const Param& p = prog_.params[i];
    const std::string idx = std::to_string(i);
    if (p.buffer) {
      const std::string n = name_of(p.buffer);
      line("c." + n + " = static_cast<" + storage_type(p.buffer->dtype) + "*>(tl_args->data[" + idx + "]);");
      for (size_t d = 0; d + 1 < p.buffer->strides.size(); ++d)
        line("c." + name_of(p.buffer->strides[d]) + " = tl_args->strides[" + idx + "][" + std::to_string(d) + "];");
    } else {
      const bool flt = is_float(p.scalar.type());
      line("c." + name_of(p.scalar) + " = " + value_type(p.scalar.type()) + "(tl_args->" + (flt ? "floats" : "ints") +
           "[" + idx + "]);");
    }
  }
  for (size_t i = 0; i < prog_.symbols.size(); ++i)
    line("c." + name_of(prog_.symbols[i]) + " = int32_t(tl_args->symbols[" + std::to_string(i) + "]);");
  // Bytes of the global tensors the kernel writes decide whether stores stream past the cache.
  std::set<const BufferNode*> written;
  std::string out_bytes = "0";
  for_each_stmt(prog_.body, [&](const Stmt& s) {
    const StoreNode* st = s.as<StoreNode>();
    if (!st || st->buffer->scope != Scope::kGlobal || !written.insert(st->buffer.get()).second) return;
    std::string bytes = std::to_string(type_bytes(st->buffer->dtype));
    for (const Expr& d : st->buffer->shape) bytes += " * int64_t(" + expr(d) + ")";
    out_bytes += " + " + bytes;
  });
  open("");
  emit_locals("c");
  line("c.tl_stream = (" + out_bytes + ") > rt->stream_bytes;");
  close();
  for (size_t n = 0; n < launches_.size(); ++n) {  // grids run one after another
    const LaunchNode* launch = launches_[n];
    open("");
    emit_locals("c");
    for (size_t d = 0; d < 3; ++d)
      line("c.grid[" + std::to_string(d) +
           "] = " + (d < launch->grid.size() ? "int64_t(" + expr(launch->grid[d]) + ")" : "1") + ";");
    close();
    open("if (c.grid[0] > 0 && c.grid[1] > 0 && c.grid[2] > 0)");
    auto instance = [&](const std::string& fn) {
      return block_streams_[n] ? "c.tl_stream ? " + fn + "<true> : " + fn + "<false>" : fn + "<false>";
    };
    const std::string arena = std::to_string(arena_bytes_[n]), id = std::to_string(n);
    if (band_bodies_[n].defined()) {
      // Bands when each thread gets several (the pool balances runs of them); else single blocks.
      line("const int64_t tl_bands = c.grid[1] * c.grid[2];");
      open("if (c.grid[0] > 1 && tl_bands >= 4 * int64_t(rt->num_threads()))");
      line("rt->launch(tl_bands, " + arena + ", " + instance("tl_band_" + id) + ", &c);");
      --indent_;
      open("} else");
    }
    line("rt->launch(c.grid[0] * c.grid[1] * c.grid[2], " + arena + ", " + instance("tl_block_" + id) + ", &c);");
    if (band_bodies_[n].defined()) close();
    close();
  }
  line("return 0;");
  close();
  line("");
}

void CpuEmitter::emit_signature() {
  const std::string sig = kernel_signature(prog_);
  std::string escaped;
  for (char ch : sig)
    escaped += ch == '\n'                  ? std::string("\\n")
               : (ch == '"' || ch == '\\') ? std::string("\\") + ch
                                           : std::string(1, ch);
  open("TESSERA_TL_EXPORT const char* tessera_tl_signature_v1()");
  line("return \"" + escaped + "\";");
  close();
}

std::string CpuEmitter::emit() {
  const Stmt& body = prog_.body;
  if (const SeqNode* seq = body.as<SeqNode>()) {
    for (const Stmt& s : seq->stmts) launches_.push_back(s.as<LaunchNode>());
  } else {
    launches_.push_back(body.as<LaunchNode>());
  }
  for (const LaunchNode* l : launches_)
    if (!l) fail_at(prog_.loc, "codegen cpu: the program body must be a sequence of T.Kernel grids (internal error)");
  names_[runtime_handle().get()] = "rt";  // the TlRuntime pointer runtime calls take
  // Names: parameters first so they keep the author's spelling.
  for (const Param& p : prog_.params) p.buffer ? (void)name_of(p.buffer) : (void)name_of(p.scalar);
  for (const Expr& s : prog_.symbols) name_of(s);
  for (const LaunchNode* l : launches_) arena_bytes_.push_back(plan_arena(l->body));

  line("// Generated by tessera tl for target " + target_.str() + ": kernel '" + prog_.name + "'.");
  line("// Blocks of a grid run in parallel on tessera's thread pool (rt->launch); each block runs on one");
  line("// thread with its shared/fragment buffers in a per-thread arena.");
  line("#define TESSERA_TL_VW " + std::to_string(target_.vector_lanes > 0 ? target_.vector_lanes : 4));
  line("#include \"tessera/tl/runtime.h\"");
  line("");
  open("namespace");
  --indent_;
  line("");
  emit_context();
  for (size_t n = 0; n < launches_.size(); ++n) {
    band_bodies_.push_back(row_sweep_body(launches_[n]));
    emit_block_function(n, false);
    if (band_bodies_[n].defined()) emit_block_function(n, true);
  }
  line("}  // namespace");
  line("");
  emit_launch_function();
  emit_signature();
  return out_.str();
}

std::string codegen_cpu(const Program& lowered, const Target& target) {
  return CpuEmitter(lowered, target).emit();
}

}  // namespace tessera::tl
