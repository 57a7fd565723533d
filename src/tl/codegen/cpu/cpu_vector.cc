// Vectorized loops of the CPU emitter: the loop runs TESSERA_TL_VW iterations at a time; expressions
// that depend on the loop variable become vectors (tlrt::vf, ...), the others stay scalars. A loop
// whose extent is not a multiple of the lanes ends with one masked iteration (loads and stores of
// inactive lanes never touch memory). Conditions that vary across lanes become masks.
#include <cmath>

#include "tl/codegen/cpu/cpu_emitter.h"
#include "tl/ir/visitor.h"
#include "tl/passes/linear.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

const char* vector_math(Intrinsic op) {
  switch (op) {
    case Intrinsic::kExp:
      return "tlrt::vexp";
    case Intrinsic::kExp2:
      return "tlrt::vexp2";
    case Intrinsic::kLog:
      return "tlrt::vlog";
    case Intrinsic::kLog2:
      return "tlrt::vlog2";
    case Intrinsic::kSqrt:
      return "tlrt::vsqrt";
    case Intrinsic::kRsqrt:
      return "tlrt::vrsqrt";
    case Intrinsic::kAbs:
      return "tlrt::vabs";
    case Intrinsic::kTanh:
      return "tlrt::vtanh";
    case Intrinsic::kSigmoid:
      return "tlrt::vsigmoid";
    case Intrinsic::kFloor:
      return "tlrt::vfloor";
    case Intrinsic::kCeil:
      return "tlrt::vceil";
    case Intrinsic::kTrunc:
      return "tlrt::vtrunc";
    case Intrinsic::kRound:
      return "tlrt::vround";
    case Intrinsic::kSin:
      return "tlrt::vsin";
    case Intrinsic::kCos:
      return "tlrt::vcos";
    case Intrinsic::kErf:
      return "tlrt::verf";
    case Intrinsic::kPow:
      return "tlrt::vpow";
    case Intrinsic::kFma:
      return "tlrt::vfma";
    case Intrinsic::kIsNan:
      return "tlrt::visnan";
    case Intrinsic::kIsInf:
      return "tlrt::visinf";
    case Intrinsic::kDecodeE2M1:
      return "tlrt::vdecode_e2m1";
    case Intrinsic::kExtern:
      return "";
  }
  return "";
}

bool wide(DataType t) {
  return type_bytes(compute_type(t)) == 8;
}
bool is_power_of_two(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

std::string and_mask(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return "(" + a + " & " + b + ")";
}

// Let-bound values of a loop body, fully inlined (variable -> value in terms of outer names).
std::vector<std::pair<Expr, Expr>> body_lets(const Stmt& body) {
  std::vector<std::pair<Expr, Expr>> lets;
  for_each_stmt(body, [&](const Stmt& s) {
    if (const LetStmtNode* l = s.as<LetStmtNode>()) lets.emplace_back(l->var, substitute(l->value, lets));
  });
  return lets;
}

bool has_load(const Expr& e) {
  bool found = false;
  for_each_expr(e, [&](const Expr& x) { found = found || x.as<LoadNode>() || x.as<CallNode>(); });
  return found;
}

// Comparisons of a lane value that moves by +-1 per lane with a bound that does not move: for each, the
// scalar condition under which it holds for all lanes of the iteration starting at `var` (true for
// every lane iff true for the extreme lane). Interior iterations of tiles guarded against tensor
// edges then run without masks.
struct LaneGuards {
  std::vector<const Node*> nodes;
  std::vector<Expr> conds;
  Expr all_true;
};

LaneGuards lane_guards(const Stmt& body, const Expr& var, int lanes) {
  LaneGuards g;
  const auto lets = body_lets(body);
  for_each_expr(body, [&](const Expr& e) {
    const CompareNode* c = e.as<CompareNode>();
    if (!c || c->op == CmpOp::kEQ || c->op == CmpOp::kNE || !is_int(c->a.type())) return;
    const Expr a = substitute(c->a, lets), b = substitute(c->b, lets);
    if (has_load(a) || has_load(b)) return;
    Expr base;
    int64_t coeff = 0;
    CmpOp op = c->op;
    Expr moving, fixed;
    if (linear_in(a, var, &base, &coeff) && (coeff == 1 || coeff == -1) && !uses_var(b, var)) {
      moving = a, fixed = b;
    } else if (linear_in(b, var, &base, &coeff) && (coeff == 1 || coeff == -1) && !uses_var(a, var)) {
      moving = b, fixed = a;
      op = op == CmpOp::kLT ? CmpOp::kGT : op == CmpOp::kLE ? CmpOp::kGE : op == CmpOp::kGT ? CmpOp::kLT : CmpOp::kLE;
    } else {
      return;
    }
    // moving(lane) = base + coeff * (var + lane); "moving < fixed" needs the largest lane value.
    const bool wants_max = op == CmpOp::kLT || op == CmpOp::kLE;
    const bool last_lane = (coeff == 1) == wants_max;
    const Expr at = last_lane ? BinaryNode::make(BinOp::kAdd, var, make_int(lanes - 1)) : var;
    const Expr extreme = simplify(substitute(moving, {{var, at}}));
    const Expr cond = CompareNode::make(op, extreme, fixed);
    g.nodes.push_back(c);
    for (const Expr& seen : g.conds)
      if (structural_equal(seen, cond)) return;
    g.conds.push_back(cond);
    g.all_true = g.all_true.defined() ? LogicalNode::make(true, g.all_true, cond) : cond;
  });
  return g;
}

class ReplaceWithTrue : public IRMutator {
 public:
  explicit ReplaceWithTrue(const std::vector<const Node*>& nodes) : nodes_(nodes) {}

 protected:
  Expr mutate_Compare(const CompareNode* op, const Expr& self) override {
    for (const Node* n : nodes_)
      if (n == op) return IntImmNode::make(DataType::kBool, 1, op->loc);
    return IRMutator::mutate_Compare(op, self);
  }

 private:
  const std::vector<const Node*>& nodes_;
};

}  // namespace

Expr CpuEmitter::inline_vector_lets(const Expr& e) {
  std::vector<std::pair<Expr, Expr>> map;
  for_each_expr(e, [&](const Expr& x) {
    if (const VarNode* v = x.as<VarNode>()) {
      auto it = vector_lets_.find(v);
      if (it != vector_lets_.end()) map.emplace_back(x, it->second);
    }
  });
  return map.empty() ? e : substitute(e, map);
}

std::string CpuEmitter::as_vector(const VExpr& v) {
  if (v.vec) return v.code;
  if (v.type == DataType::kBool) return "tlrt::bmask(" + v.code + ")";
  return std::string("tlrt::splat<") + vector_type(v.type) + ">(" + v.code + ")";
}

std::string CpuEmitter::vconvert(const VExpr& v, DataType to) {
  const DataType from = v.type;
  if (!v.vec) {  // a scalar: convert, then broadcast
    return as_vector(VExpr{cast(to, v.code, from), false, to == DataType::kBool ? to : compute_type(to)});
  }
  const std::string vt = vector_type(to);
  if (to == DataType::kBool) {
    if (from == DataType::kBool) return v.code;
    return wide(from) ? "tlrt::narrow(" + v.code + " != 0)" : "(" + v.code + " != 0)";
  }
  std::string x = v.code;
  if (from == DataType::kBool) x = "(" + x + " & 1)";
  if (std::string(vector_type(from == DataType::kBool ? DataType::kInt32 : from)) != vt)
    x = "__builtin_convertvector(" + x + ", " + vt + ")";
  switch (to) {
    case DataType::kBFloat16:
      return "tlrt::vround_bf16(" + x + ")";
    case DataType::kFloat16:
      return "tlrt::vround_f16(" + x + ")";
    case DataType::kFloat8E4M3:
      return "tlrt::vround_e4m3(" + x + ")";
    case DataType::kFloat8E5M2:
      return "tlrt::vround_e5m2(" + x + ")";
    case DataType::kFloat4E2M1:
      return "tlrt::vround_e2m1(" + x + ")";
    case DataType::kInt8:
      return "tlrt::dec_i8(tlrt::enc_i8(" + x + "))";
    case DataType::kUInt8:
      return "tlrt::dec_u8(tlrt::enc_u8(" + x + "))";
    case DataType::kInt16:
      return "tlrt::dec_i16(tlrt::enc_i16(" + x + "))";
    case DataType::kUInt16:
      return "tlrt::dec_u16(tlrt::enc_u16(" + x + "))";
    default:
      return x;
  }
}

std::string CpuEmitter::contiguous_address(const LoadNode* op) {
  const Expr off = inline_vector_lets(offset_expr(op->buffer, op->indices));
  Expr base;
  int64_t coeff = 0;
  if (!linear_in(off, Expr(names_vec_var_), &base, &coeff) || coeff != 1) return "";
  return name_of(op->buffer) + " + " + expr(base) + " + " + name_of(names_vec_var_);
}

// Whether e has one value on all lanes of every chunk of the vector loop: with chunks starting at
// multiples of the lane count, v - v mod c and v div c (c a multiple of it) do, as do sums and
// products of such terms. (A warp's base thread, tid - tid % 32, is one.)
bool CpuEmitter::same_on_chunk_lanes(const Expr& e) const {
  if (!uses_var(e, names_vec_var_)) return true;
  if (!vec_chunks_aligned_) return false;
  const int64_t lanes = target_.vector_lanes;
  auto lane_var = [&](const Expr& x) { return x.as<VarNode>() == vec_var_; };
  auto chunk_multiple = [&](const Expr& x) {
    int64_t c = 0;
    return is_const_int(x, &c) && c > 0 && c % lanes == 0;
  };
  if (const CastNode* c = e.as<CastNode>())
    return is_int(e.type()) && is_int(c->value.type()) && same_on_chunk_lanes(c->value);
  const BinaryNode* b = e.as<BinaryNode>();
  if (b == nullptr) return false;
  switch (b->op) {
    case BinOp::kSub: {
      const BinaryNode* m = b->b.as<BinaryNode>();
      if (lane_var(b->a) && m != nullptr && m->op == BinOp::kFloorMod && lane_var(m->a) && chunk_multiple(m->b))
        return true;
      return same_on_chunk_lanes(b->a) && same_on_chunk_lanes(b->b);
    }
    case BinOp::kDiv:
    case BinOp::kFloorDiv:
      if (lane_var(b->a) && chunk_multiple(b->b)) return true;
      return same_on_chunk_lanes(b->a) && same_on_chunk_lanes(b->b);
    case BinOp::kAdd:
    case BinOp::kMul:
      return same_on_chunk_lanes(b->a) && same_on_chunk_lanes(b->b);
    default:
      return false;
  }
}

std::string CpuEmitter::load_key(const LoadNode* op, const std::string& address) {
  return std::string(dtype_suffix(op->buffer->dtype)) + ":" + address;
}

std::string CpuEmitter::vload(const LoadNode* op, const std::string& mask) {
  const std::string ptr = name_of(op->buffer), sfx = dtype_suffix(op->buffer->dtype);
  ColumnRead read;
  if (strip_.buffer.get() == op->buffer.get() && column_read(op, strip_i_, names_vec_var_, &read) &&
      read.base == strip_.base && read.stride == strip_.stride)
    return "tlrt::ld_" + sfx + "(" + strip_row_ + " + " + name_of(names_vec_var_) + ")";
  if (const std::string addr = contiguous_address(op); !addr.empty()) {
    const std::string key = load_key(op, addr);
    const auto made = loaded_by_condition_.find(key);
    const std::string& m = made != loaded_by_condition_.end() ? made->second : mask;
    if (condition_loads_) condition_loads_->emplace(key, m);
    return m.empty() ? "tlrt::ld_" + sfx + "(" + addr + ")" : "tlrt::ld_" + sfx + "_m(" + addr + ", " + m + ")";
  }
  const Expr off = inline_vector_lets(offset_expr(op->buffer, op->indices));
  if (mask.empty() && same_on_chunk_lanes(off))  // one element for the whole chunk: load it once
    return as_vector(VExpr{load_at(op->buffer, off), false, compute_type(op->buffer->dtype)});
  const VExpr offs = vexpr(CastNode::make(DataType::kInt64, off), mask);
  return "tlrt::ld_" + sfx + "_g(" + ptr + ", " + vconvert(offs, DataType::kInt64) + ", " +
         (mask.empty() ? "tlrt::all_m()" : mask) + ")";
}

CpuEmitter::VExpr CpuEmitter::vexpr(const Expr& e, const std::string& mask) {
  bool lane = false;
  for_each_expr(e, [&](const Expr& x) {
    if (const VarNode* v = x.as<VarNode>()) lane = lane || v == vec_var_ || vector_lets_.count(v);
  });
  if (!lane) return VExpr{expr(e), false, e.type() == DataType::kBool ? e.type() : compute_type(e.type())};
  const DataType t = e.type() == DataType::kBool ? DataType::kBool : compute_type(e.type());
  auto vec = [&](const std::string& code) { return VExpr{code, true, t}; };

  switch (e->kind) {
    case NodeKind::kVar: {
      const VarNode* v = e.as<VarNode>();
      if (v == vec_var_) return vec("(tlrt::iota() + " + name_of(e) + ")");
      return vec(name_of(e));
    }
    case NodeKind::kBinary: {
      const BinaryNode* b = e.as<BinaryNode>();
      const VExpr x = vexpr(b->a, mask), y = vexpr(b->b, mask);
      const std::string a = as_vector(x);
      int64_t k = 0;
      const bool integer = is_int(t), pow2 = integer && !y.vec && is_const_int(b->b, &k) && is_power_of_two(k);
      const std::string cv = as_vector(y);
      const std::string& shift = y.code;  // a uniform shift count stays scalar (vector << int)
      switch (b->op) {
        case BinOp::kAdd:
          return vec("(" + a + " + " + cv + ")");
        case BinOp::kSub:
          return vec("(" + a + " - " + cv + ")");
        case BinOp::kMul:
          return vec("(" + a + " * " + cv + ")");
        case BinOp::kDiv:
        case BinOp::kFloorDiv:
          if (!integer)
            return vec(b->op == BinOp::kDiv ? "(" + a + " / " + cv + ")" : "tlrt::vfloor(" + a + " / " + cv + ")");
          if (pow2) return vec("(" + a + " >> " + std::to_string(__builtin_ctzll(uint64_t(k))) + ")");
          return vec("tlrt::vfloordiv(" + a + ", " + cv + ")");
        case BinOp::kFloorMod:
          if (!integer) return vec("(" + a + " - tlrt::vfloor(" + a + " / " + cv + ") * " + cv + ")");
          if (pow2) return vec("(" + a + " & " + std::to_string(k - 1) + ")");
          return vec("tlrt::vfloormod(" + a + ", " + cv + ")");
        case BinOp::kMin:
          return vec("tlrt::vmin(" + a + ", " + cv + ")");
        case BinOp::kMax:
          return vec("tlrt::vmax(" + a + ", " + cv + ")");
        case BinOp::kBitAnd:
          return vec("(" + a + " & " + cv + ")");
        case BinOp::kBitOr:
          return vec("(" + a + " | " + cv + ")");
        case BinOp::kBitXor:
          return vec("(" + a + " ^ " + cv + ")");
        case BinOp::kShl:
          return vec("(" + a + " << " + shift + ")");
        case BinOp::kShr:
          return vec("(" + a + " >> " + shift + ")");
      }
      break;
    }
    case NodeKind::kCompare: {
      const CompareNode* c = e.as<CompareNode>();
      const std::string code =
          "(" + as_vector(vexpr(c->a, mask)) + " " + cmpop_name(c->op) + " " + as_vector(vexpr(c->b, mask)) + ")";
      return vec(wide(c->a.type()) ? "tlrt::narrow" + code : code);
    }
    case NodeKind::kLogical: {
      const LogicalNode* l = e.as<LogicalNode>();
      return vec("(" + as_vector(vexpr(l->a, mask)) + (l->is_and ? " & " : " | ") + as_vector(vexpr(l->b, mask)) + ")");
    }
    case NodeKind::kNot:
      return vec("(~" + as_vector(vexpr(e.as<NotNode>()->a, mask)) + ")");
    case NodeKind::kSelect: {
      const SelectNode* s = e.as<SelectNode>();
      // The contiguous loads the condition makes, with their masks (an enclosing condition's record
      // gets them too).
      std::map<std::string, std::string> made;
      std::map<std::string, std::string>* const enclosing = condition_loads_;
      condition_loads_ = &made;
      const VExpr c = vexpr(s->cond, mask);
      condition_loads_ = enclosing;
      if (enclosing) enclosing->insert(made.begin(), made.end());
      if (!c.vec) {
        return vec("(" + c.code + " ? " + vconvert(vexpr(s->t, mask), t) + " : " + vconvert(vexpr(s->f, mask), t) +
                   ")");
      }
      // Each side's loads only touch the lanes that select it, except loads the condition made already:
      // those keep the condition's mask, so the host compiler sees the same load twice and keeps one
      // (FP8 casts test the scaled value for NaN, then scale it again on both sides: three loads and
      // multiplies). Lanes a side does not select are discarded, whatever such a load gave them.
      const std::map<std::string, std::string> outer = loaded_by_condition_;
      loaded_by_condition_.insert(made.begin(), made.end());
      const std::string tm = and_mask(c.code, mask), fm = and_mask("(~" + c.code + ")", mask);
      const std::string sides = vconvert(vexpr(s->t, tm), t) + ", " + vconvert(vexpr(s->f, fm), t);
      loaded_by_condition_ = outer;
      return vec("tlrt::vsel(" + c.code + ", " + sides + ")");
    }
    case NodeKind::kCast: {
      const CastNode* c = e.as<CastNode>();
      return VExpr{vconvert(vexpr(c->value, mask), c->type), true, t};
    }
    case NodeKind::kCall: {
      const CallNode* c = e.as<CallNode>();
      if (c->op == Intrinsic::kExtern)
        fail_at(e->loc, "codegen cpu: runtime call '" + c->extern_name + "' inside a vectorized loop (internal error)");
      std::string code = std::string(vector_math(c->op)) + "(";
      for (size_t i = 0; i < c->args.size(); ++i) {
        const DataType at = c->op == Intrinsic::kDecodeE2M1 ? DataType::kInt32 : compute_type(c->args[i].type());
        code += (i ? ", " : "") + vconvert(vexpr(c->args[i], mask), at);
      }
      return vec(code + ")");
    }
    case NodeKind::kLoad:
      return vec(vload(e.as<LoadNode>(), mask));
    default:
      break;
  }
  fail_at(e->loc, std::string("codegen cpu: ") + node_kind_name(e->kind) + " cannot be vectorized (internal error)");
}

void CpuEmitter::vstmt(const Stmt& s, const std::string& mask) {
  switch (s->kind) {
    case NodeKind::kStore: {
      const StoreNode* st = s.as<StoreNode>();
      if (raw_copy(st, mask)) return;
      const std::string ptr = name_of(st->buffer), sfx = dtype_suffix(st->buffer->dtype);
      const std::string value =
          vconvert(vexpr(st->value, mask),
                   st->buffer->dtype == DataType::kBool ? DataType::kBool : compute_type(st->buffer->dtype));
      const Expr off = inline_vector_lets(offset_expr(st->buffer, st->indices));
      Expr base;
      int64_t coeff = 0;
      if (linear_in(off, Expr(names_vec_var_), &base, &coeff) && coeff == 1) {
        const std::string addr = ptr + " + " + expr(base) + " + " + name_of(names_vec_var_);
        if (!mask.empty()) {
          line("tlrt::st_" + sfx + "_m(" + addr + ", " + value + ", " + mask + ");");
        } else if (st->buffer->scope == Scope::kGlobal) {
          line("tlrt::st_" + sfx + "_nt(" + addr + ", " + value + ", tl_stream);");
          uses_stream_ = true;
        } else {
          line("tlrt::st_" + sfx + "(" + addr + ", " + value + ");");
        }
      } else {
        const VExpr offs = vexpr(CastNode::make(DataType::kInt64, off), mask);
        line("tlrt::st_" + sfx + "_s(" + ptr + ", " + vconvert(offs, DataType::kInt64) + ", " + value + ", " +
             (mask.empty() ? "tlrt::all_m()" : mask) + ");");
      }
      return;
    }
    case NodeKind::kLetStmt: {
      const LetStmtNode* l = s.as<LetStmtNode>();
      const VExpr v = vexpr(l->value, mask);
      if (v.vec) {
        line(std::string("const ") + vector_type(l->var.type()) + " " + name_of(l->var) + " = " +
             vconvert(v, l->var.type()) + ";");
        vector_lets_[l->var.as<VarNode>()] = inline_vector_lets(l->value);
      } else {
        line(std::string("const ") + value_type(l->var.type()) + " " + name_of(l->var) + " = " + v.code + ";");
      }
      vstmt(l->body, mask);
      return;
    }
    case NodeKind::kIfThenElse: {
      const IfThenElseNode* i = s.as<IfThenElseNode>();
      const VExpr c = vexpr(i->cond, mask);
      if (!c.vec) {
        open("if (" + c.code + ")");
        vstmt(i->then_case, mask);
        if (i->else_case.defined()) {
          --indent_;
          open("} else");
          vstmt(i->else_case, mask);
        }
        close();
        return;
      }
      const std::string m = unique("tl_m"), cond = unique("tl_c");
      open("");
      line("const tlrt::vm " + cond + " = " + c.code + ";");
      line("const tlrt::vm " + m + " = " + and_mask(cond, mask) + ";");
      open("if (tlrt::any(" + m + "))");
      vstmt(i->then_case, m);
      close();
      if (i->else_case.defined()) {
        const std::string me = unique("tl_m");
        line("const tlrt::vm " + me + " = " + and_mask("(~" + cond + ")", mask) + ";");
        open("if (tlrt::any(" + me + "))");
        vstmt(i->else_case, me);
        close();
      }
      close();
      return;
    }
    case NodeKind::kSeq:
      for (const Stmt& x : s.as<SeqNode>()->stmts) vstmt(x, mask);
      return;
    default:
      fail_at(s->loc, std::string("codegen cpu: ") + node_kind_name(s->kind) +
                          " inside a vectorized loop (internal error: the vectorize pass must refuse it)");
  }
}

// Same-dtype contiguous copies (T.copy between buffers of one dtype) move the stored bits: no decode,
// no re-rounding. A guarded source (Select(in_bounds, load, 0)) becomes a masked load that reads zeros.
// float4 moves its codes (packed in global tensors, a byte each on chip: runtime/packed_fp4.h).
bool CpuEmitter::raw_copy(const StoreNode* st, const std::string& mask) {
  Expr value = st->value, cond;
  if (const SelectNode* sel = value.as<SelectNode>()) {
    double z = 1;
    if (!is_const_number(sel->f, &z) || z != 0 || std::signbit(z)) return false;
    cond = sel->cond;
    value = sel->t;
  }
  const LoadNode* ld = value.as<LoadNode>();
  if (!ld || ld->buffer->dtype != st->buffer->dtype) return false;
  Expr sbase, dbase;
  int64_t sc = 0, dc = 0;
  if (!linear_in(inline_vector_lets(offset_expr(ld->buffer, ld->indices)), names_vec_var_, &sbase, &sc) || sc != 1 ||
      !linear_in(inline_vector_lets(offset_expr(st->buffer, st->indices)), names_vec_var_, &dbase, &dc) || dc != 1)
    return false;
  const std::string raw = raw_type(st->buffer->dtype), v = name_of(names_vec_var_);
  const std::string src = name_of(ld->buffer) + " + " + expr(sbase) + " + " + v;
  const std::string dst = name_of(st->buffer) + " + " + expr(dbase) + " + " + v;
  std::string load_mask = mask;
  if (cond.defined()) {
    const VExpr c = vexpr(cond, mask);
    load_mask = and_mask(c.vec ? c.code : "tlrt::bmask(" + c.code + ")", mask);
  }
  const std::string bits = load_mask.empty() ? "tlrt::raw_load<" + raw + ">(" + src + ")"
                                             : "tlrt::raw_load_m<" + raw + ">(" + src + ", " + load_mask + ")";
  if (!mask.empty()) {
    line("tlrt::raw_store_m<" + raw + ">(" + dst + ", " + bits + ", " + mask + ");");
  } else if (st->buffer->scope == Scope::kGlobal) {
    line("tlrt::raw_store_nt<" + raw + ">(" + dst + ", " + bits + ", tl_stream);");
    uses_stream_ = true;
  } else {
    line("tlrt::raw_store<" + raw + ">(" + dst + ", " + bits + ");");
  }
  return true;
}

void CpuEmitter::vector_loop(const ForNode* op) {
  const int lanes = target_.vector_lanes;
  const std::string v = name_of(op->var), end = unique(v + "_end");
  int64_t mn = 0, ext = 0;
  const bool known_min = is_const_int(op->min, &mn);
  const bool known = known_min && is_const_int(op->extent, &ext);
  vec_var_ = op->var.as<VarNode>();
  names_vec_var_ = op->var;
  vec_chunks_aligned_ = known_min && mn >= 0 && mn % lanes == 0;
  open("");
  line("const int32_t " + end + " = " + expr(op->min) + " + " + expr(op->extent) + ";");
  line("int32_t " + v + " = " + expr(op->min) + ";");
  if (!known || ext >= lanes) {
    open("for (; " + v + " + " + std::to_string(lanes) + " <= " + end + "; " + v + " += " + std::to_string(lanes) +
         ")");
    const LaneGuards guards = lane_guards(op->body, op->var, lanes);
    if (guards.all_true.defined()) {
      open("if (" + expr(simplify(guards.all_true)) + ")");  // every lane inside the tensor: no masks
      vstmt(simplify(ReplaceWithTrue(guards.nodes).mutate(op->body)), "");
      vector_lets_.clear();
      --indent_;
      open("} else");
      vstmt(op->body, "");
      close();
    } else {
      vstmt(op->body, "");
    }
    close();
  }
  if (!known || ext % lanes != 0) {
    open("if (" + v + " < " + end + ")");
    line("const tlrt::vm tl_tail = tlrt::first_n(" + end + " - " + v + ");");
    vstmt(op->body, "tl_tail");
    close();
  }
  close();
  vec_var_ = nullptr;
  vec_chunks_aligned_ = false;
  vector_lets_.clear();
}

}  // namespace tessera::tl
