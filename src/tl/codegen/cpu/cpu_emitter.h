// The C++ emitter of the CPU backend. One instance turns one lowered program into one translation unit:
//   cpu_names.cc   identifiers and C++ types of values and buffers
//   cpu_expr.cc    scalar expressions
//   cpu_vector.cc  vectorized loops (expressions over TESSERA_TL_VW lanes, masked tails)
//   cpu_transpose.cc  loops reading an on-chip buffer along its columns: register-block transposes
//   cpu_stmt.cc    statements and buffer allocation
//   cpu_entry.cc   the argument struct, the block function and the exported launch/signature functions
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tl/ir.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

class CpuEmitter {
 public:
  CpuEmitter(const Program& p, const Target& t) : prog_(p), target_(t) {}
  std::string emit();

 private:
  // ---- names and types (cpu_names.cc) ----
  std::string name_of(const Expr& var);
  std::string name_of(const Buffer& b);
  std::string unique(const std::string& base);
  static const char* value_type(DataType t);    // C++ type of a computed value (float for bf16)
  static const char* storage_type(DataType t);  // C++ type of a stored element (uint16_t for bf16)
  static const char* dtype_suffix(DataType t);  // runtime helper suffix: "f32", "bf16", ...
  static const char* vector_type(DataType t);   // vector of the compute type: "tlrt::vf", ...
  static const char* raw_type(DataType t);      // vector of the storage bits: "tlrt::vh" for bf16, ...
  // A kernel argument's pointer: "float*", or "tlrt::nibbles" for packed float4 (runtime/packed_fp4.h).
  static std::string global_pointer_type(const Buffer& b);

  // ---- scalar expressions (cpu_expr.cc) ----
  std::string expr(const Expr& e);
  std::string literal(const Expr& e);
  std::string load(const Buffer& b, const std::vector<Expr>& indices);
  std::string load_at(const Buffer& b, const Expr& offset);  // the element at a flat offset, as a scalar
  std::string encode(DataType buffer_type, const std::string& value, DataType value_type);
  std::string cast(DataType to, const std::string& v, DataType from);
  Expr offset_expr(const Buffer& b, const std::vector<Expr>& indices);  // flattened element offset (int64)

  // ---- statements (cpu_stmt.cc) ----
  void stmt(const Stmt& s);
  void line(const std::string& text);
  void open(const std::string& text);    // "text {" and indent
  void close();                          // "}" and dedent
  int64_t plan_arena(const Stmt& body);  // assigns arena offsets; returns the bytes needed
  void declare_buffer(const Buffer& b);

  // ---- vectorized loops (cpu_vector.cc) ----
  struct VExpr {
    std::string code;
    bool vec = false;
    DataType type = DataType::kInt32;
  };
  void vector_loop(const ForNode* op);
  void vstmt(const Stmt& s, const std::string& mask);
  VExpr vexpr(const Expr& e, const std::string& mask);
  std::string as_vector(const VExpr& v);
  std::string vconvert(const VExpr& v, DataType to);
  std::string vload(const LoadNode* op, const std::string& mask);
  std::string contiguous_address(const LoadNode* op);  // "ptr + base + lane var", or "" (not contiguous)
  bool same_on_chunk_lanes(const Expr& e) const;
  std::string load_key(const LoadNode* op, const std::string& address);
  bool raw_copy(const StoreNode* st, const std::string& mask);
  Expr inline_vector_lets(const Expr& e);

  // ---- transposed reads of on-chip buffers (cpu_transpose.cc) ----
  struct ColumnRead {
    Buffer buffer;
    int64_t base = 0;    // element offset of (i, j) = (0, 0)
    int64_t stride = 0;  // K: elements between consecutive j
  };
  bool transposed_read_loop(const ForNode* outer);  // false: the loop does not match, nothing emitted
  bool column_read(const LoadNode* ld, const Expr& i, const Expr& j, ColumnRead* read);

  // ---- entry points (cpu_entry.cc) ----
  void emit_context();
  void emit_block_function(size_t launch, bool band);  // band: the row-sweep variant (passes/row_sweep.h)
  void emit_launch_function();
  void emit_signature();
  void emit_locals(const std::string& ctx);

  const Program& prog_;
  const Target& target_;
  std::ostringstream out_;
  int indent_ = 0;
  std::map<const void*, std::string> names_;
  std::set<std::string> used_names_;
  std::map<const BufferNode*, int64_t> arena_offset_;  // shared / fragment buffers in the block arena
  std::vector<const LaunchNode*> launches_;            // the program's grids, run in order
  std::vector<int64_t> arena_bytes_;
  std::vector<Stmt> band_bodies_;    // per grid: its row-sweep body, or undefined
  std::vector<bool> block_streams_;  // per grid: its block function has streaming stores
  bool uses_stream_ = false;         // the block function being emitted wrote a streaming store
  // Inside a vectorized loop: the loop variable and the let-bound variables holding vectors.
  const VarNode* vec_var_ = nullptr;
  Expr names_vec_var_;
  bool vec_chunks_aligned_ = false;  // every chunk of the loop starts at a multiple of the lane count
  std::map<const VarNode*, Expr> vector_lets_;
  // Inside a select's sides: contiguous loads its condition already made, by address, with the mask
  // they were made under (vload gives such a load that mask, not its side's).
  std::map<std::string, std::string> loaded_by_condition_;
  std::map<std::string, std::string>* condition_loads_ = nullptr;  // while a select's condition is emitted
  // Inside a transposed-read loop: the column read, the outer variable and the address of row i of the
  // strip (add j). Reads are recognised by their form: simplification rebuilds load nodes.
  ColumnRead strip_;
  Expr strip_i_;
  std::string strip_row_;
};

std::string codegen_cpu(const Program& lowered, const Target& target);

}  // namespace tessera::tl
