// Scalar expressions of the CPU emitter.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tl/codegen/cpu/cpu_emitter.h"
#include "tl/passes/simplify.h"

namespace tessera::tl {
namespace {

std::string float_literal(double v, bool is_f32) {
  if (std::isnan(v)) return is_f32 ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(v)) return std::string(v < 0 ? "(-" : "(") + (is_f32 ? "__builtin_inff())" : "__builtin_inf())");
  char buf[64];
  if (is_f32) {
    const float f = float(v);
    std::snprintf(buf, sizeof buf, "%.9g", double(f));
    if (std::strtof(buf, nullptr) != f) std::snprintf(buf, sizeof buf, "%a", double(f));
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  std::string s = buf;
  if (s.find_first_of(".epx") == std::string::npos && s.find("inf") == std::string::npos) s += ".0";
  return is_f32 ? s + "f" : s;
}

const char* math_function(Intrinsic op) {
  switch (op) {
    case Intrinsic::kExp:
      return "tlrt::exp";
    case Intrinsic::kExp2:
      return "tlrt::exp2";
    case Intrinsic::kLog:
      return "std::log";
    case Intrinsic::kLog2:
      return "std::log2";
    case Intrinsic::kSqrt:
      return "std::sqrt";
    case Intrinsic::kRsqrt:
      return "tlrt::rsqrt";
    case Intrinsic::kAbs:
      return "std::abs";
    case Intrinsic::kTanh:
      return "tlrt::tanh";
    case Intrinsic::kSigmoid:
      return "tlrt::sigmoid";
    case Intrinsic::kFloor:
      return "std::floor";
    case Intrinsic::kCeil:
      return "std::ceil";
    case Intrinsic::kTrunc:
      return "std::trunc";
    case Intrinsic::kRound:
      return "std::nearbyint";
    case Intrinsic::kSin:
      return "std::sin";
    case Intrinsic::kCos:
      return "std::cos";
    case Intrinsic::kErf:
      return "std::erf";
    case Intrinsic::kPow:
      return "std::pow";
    case Intrinsic::kFma:
      return "std::fma";
    case Intrinsic::kIsNan:
      return "std::isnan";
    case Intrinsic::kIsInf:
      return "std::isinf";
    case Intrinsic::kDecodeE2M1:
      return "tlrt::decode_e2m1";
    case Intrinsic::kExtern:
      return "";
  }
  return "";
}

bool is_power_of_two(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

}  // namespace

std::string CpuEmitter::literal(const Expr& e) {
  if (const IntImmNode* i = e.as<IntImmNode>()) {
    switch (i->type) {
      case DataType::kBool:
        return i->value ? "true" : "false";
      case DataType::kInt64:
        return "int64_t(" + std::to_string(i->value) + "LL)";
      case DataType::kUInt32:
        return std::to_string(uint32_t(i->value)) + "u";
      case DataType::kUInt64:
        return std::to_string(uint64_t(i->value)) + "ull";
      default:
        return std::to_string(i->value);
    }
  }
  const FloatImmNode* f = e.as<FloatImmNode>();
  return float_literal(f->value, f->type != DataType::kFloat64);
}

Expr CpuEmitter::offset_expr(const Buffer& b, const std::vector<Expr>& indices) {
  const bool global = b->scope == Scope::kGlobal;
  Expr off;
  for (size_t d = 0; d < indices.size(); ++d) {
    Expr idx = global ? CastNode::make(DataType::kInt64, indices[d]) : indices[d];
    int64_t s;
    Expr term = is_const_int(b->strides[d], &s) && s == 1 ? idx : BinaryNode::make(BinOp::kMul, idx, b->strides[d]);
    off = off.defined() ? BinaryNode::make(BinOp::kAdd, off, term) : term;
  }
  return simplify(off);
}

std::string CpuEmitter::load(const Buffer& b, const std::vector<Expr>& indices) {
  return load_at(b, offset_expr(b, indices));
}

std::string CpuEmitter::load_at(const Buffer& b, const Expr& offset) {
  const std::string ref = name_of(b) + "[" + expr(offset) + "]";
  switch (b->dtype) {
    case DataType::kBFloat16:
      return "tlrt::bf16_to_f32(" + ref + ")";
    case DataType::kFloat16:
      return "tlrt::f16_to_f32(" + ref + ")";
    case DataType::kFloat8E4M3:
      return "tlrt::e4m3_to_f32(" + ref + ")";
    case DataType::kFloat8E5M2:
      return "tlrt::e5m2_to_f32(" + ref + ")";
    case DataType::kFloat4E2M1:
      return "tlrt::e2m1_to_f32(" + ref + ")";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kUInt8:
    case DataType::kUInt16:
      return "int32_t(" + ref + ")";
    default:
      return ref;
  }
}

std::string CpuEmitter::encode(DataType buffer_type, const std::string& value, DataType from) {
  switch (buffer_type) {
    case DataType::kBFloat16:
      return "tlrt::f32_to_bf16(float(" + value + "))";
    case DataType::kFloat16:
      return "tlrt::f32_to_f16(float(" + value + "))";
    case DataType::kFloat8E4M3:
      return "tlrt::f32_to_e4m3(float(" + value + "))";
    case DataType::kFloat8E5M2:
      return "tlrt::f32_to_e5m2(float(" + value + "))";
    case DataType::kFloat4E2M1:
      return "tlrt::f32_to_e2m1(float(" + value + "))";
    case DataType::kBool:
      return from == DataType::kBool ? value : "((" + value + ") != 0)";
    default:
      if (compute_type(from) == buffer_type) return value;
      return std::string(storage_type(buffer_type)) + "(" + value + ")";
  }
}

std::string CpuEmitter::cast(DataType to, const std::string& v, DataType from) {
  if (to == DataType::kBool) return from == DataType::kBool ? v : "((" + v + ") != 0)";
  switch (to) {
    case DataType::kBFloat16:
      return "tlrt::round_bf16(float(" + v + "))";
    case DataType::kFloat16:
      return "tlrt::round_f16(float(" + v + "))";
    case DataType::kFloat8E4M3:
      return "tlrt::round_e4m3(float(" + v + "))";
    case DataType::kFloat8E5M2:
      return "tlrt::round_e5m2(float(" + v + "))";
    case DataType::kFloat4E2M1:
      return "tlrt::round_e2m1(float(" + v + "))";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kUInt8:
    case DataType::kUInt16:
      // narrow integers wrap like C conversions, then compute as int32
      return "int32_t(" + std::string(storage_type(to)) + "(" + v + "))";
    default:
      return std::string(value_type(to)) + "(" + v + ")";
  }
}

std::string CpuEmitter::expr(const Expr& e) {
  switch (e->kind) {
    case NodeKind::kIntImm:
    case NodeKind::kFloatImm:
      return literal(e);
    case NodeKind::kVar:
      return name_of(e);
    case NodeKind::kBinary: {
      const BinaryNode* b = e.as<BinaryNode>();
      const std::string a = expr(b->a), c = expr(b->b);
      const bool integer = is_int(b->type);
      int64_t k = 0;
      const bool pow2 = integer && is_const_int(b->b, &k) && is_power_of_two(k);
      switch (b->op) {
        case BinOp::kAdd:
          return "(" + a + " + " + c + ")";
        case BinOp::kSub:
          return "(" + a + " - " + c + ")";
        case BinOp::kMul:
          return "(" + a + " * " + c + ")";
        case BinOp::kDiv:
        case BinOp::kFloorDiv:
          if (!integer) return b->op == BinOp::kDiv ? "(" + a + " / " + c + ")" : "std::floor(" + a + " / " + c + ")";
          if (pow2) return "(" + a + " >> " + std::to_string(__builtin_ctzll(uint64_t(k))) + ")";
          return std::string("tlrt::floordiv<") + value_type(b->type) + ">(" + a + ", " + c + ")";
        case BinOp::kFloorMod:
          if (!integer) return "(" + a + " - std::floor(" + a + " / " + c + ") * " + c + ")";
          if (pow2) return "(" + a + " & " + std::to_string(k - 1) + ")";
          return std::string("tlrt::floormod<") + value_type(b->type) + ">(" + a + ", " + c + ")";
        case BinOp::kMin:
          return std::string("tlrt::min<") + value_type(b->type) + ">(" + a + ", " + c + ")";
        case BinOp::kMax:
          return std::string("tlrt::max<") + value_type(b->type) + ">(" + a + ", " + c + ")";
        case BinOp::kBitAnd:
          return "(" + a + " & " + c + ")";
        case BinOp::kBitOr:
          return "(" + a + " | " + c + ")";
        case BinOp::kBitXor:
          return "(" + a + " ^ " + c + ")";
        case BinOp::kShl:
          return "(" + a + " << " + c + ")";
        case BinOp::kShr:
          return "(" + a + " >> " + c + ")";
      }
      return "";
    }
    case NodeKind::kCompare: {
      const CompareNode* c = e.as<CompareNode>();
      return "(" + expr(c->a) + " " + cmpop_name(c->op) + " " + expr(c->b) + ")";
    }
    case NodeKind::kLogical: {
      const LogicalNode* l = e.as<LogicalNode>();
      return "(" + expr(l->a) + (l->is_and ? " && " : " || ") + expr(l->b) + ")";
    }
    case NodeKind::kNot:
      return "(!" + expr(e.as<NotNode>()->a) + ")";
    case NodeKind::kSelect: {
      const SelectNode* s = e.as<SelectNode>();
      return "(" + expr(s->cond) + " ? " + expr(s->t) + " : " + expr(s->f) + ")";
    }
    case NodeKind::kCast: {
      const CastNode* c = e.as<CastNode>();
      return cast(c->type, expr(c->value), c->value.type());
    }
    case NodeKind::kCall: {
      const CallNode* c = e.as<CallNode>();
      std::string s = c->op == Intrinsic::kExtern ? c->extern_name : math_function(c->op);
      s += "(";
      for (size_t i = 0; i < c->args.size(); ++i) s += (i ? ", " : "") + expr(c->args[i]);
      return s + ")";
    }
    case NodeKind::kLoad: {
      const LoadNode* l = e.as<LoadNode>();
      return load(l->buffer, l->indices);
    }
    case NodeKind::kAddressOf: {
      const AddressOfNode* a = e.as<AddressOfNode>();
      return "(" + name_of(a->buffer) + " + " + expr(offset_expr(a->buffer, a->indices)) + ")";
    }
    default:
      fail_at(e->loc, std::string("codegen cpu: unexpected expression node ") + node_kind_name(e->kind));
  }
}

}  // namespace tessera::tl
