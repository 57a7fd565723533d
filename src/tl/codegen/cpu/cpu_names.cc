// Identifiers and C++ types of the CPU emitter.
#include <cctype>

#include "tl/codegen/cpu/cpu_emitter.h"

namespace tessera::tl {
namespace {

// Names generated code uses itself, C++ keywords, and common library names.
const std::set<std::string>& reserved() {
  static const std::set<std::string> names = {
      "c",       "rt",      "args",      "arena",    "block",   "tlrt",     "std",      "main",     "auto",
      "bool",    "break",   "case",      "char",     "class",   "const",    "continue", "default",  "delete",
      "do",      "double",  "else",      "enum",     "extern",  "false",    "float",    "for",      "goto",
      "if",      "inline",  "int",       "long",     "new",     "operator", "private",  "public",   "register",
      "return",  "short",   "signed",    "sizeof",   "static",  "struct",   "switch",   "template", "this",
      "true",    "typedef", "union",     "unsigned", "void",    "volatile", "while",    "and",      "or",
      "not",     "xor",     "int32_t",   "int64_t",  "uint8_t", "uint16_t", "uint32_t", "uint64_t", "int8_t",
      "int16_t", "nullptr", "namespace", "using",    "exp",     "exp2",     "log",      "sqrt"};
  return names;
}

std::string sanitize(const std::string& name) {
  std::string s;
  for (char ch : name) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v_" + s;
  if (s.size() >= 2 && s[0] == '_' && (s[1] == '_' || std::isupper(static_cast<unsigned char>(s[1])))) s = "v" + s;
  return s;
}

}  // namespace

std::string CpuEmitter::unique(const std::string& base) {
  std::string name = sanitize(base);
  if (reserved().count(name) || name.rfind("tl_", 0) == 0) name += "_";
  std::string candidate = name;
  for (int i = 1; used_names_.count(candidate); ++i) candidate = name + "_" + std::to_string(i);
  used_names_.insert(candidate);
  return candidate;
}

std::string CpuEmitter::name_of(const Expr& var) {
  auto it = names_.find(var.get());
  if (it != names_.end()) return it->second;
  const VarNode* v = var.as<VarNode>();
  return names_[var.get()] = unique(v ? v->name : "tmp");
}

std::string CpuEmitter::name_of(const Buffer& b) {
  auto it = names_.find(b.get());
  if (it != names_.end()) return it->second;
  return names_[b.get()] = unique(b->name);
}

const char* CpuEmitter::value_type(DataType t) {
  switch (t) {
    case DataType::kBool:
      return "bool";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return "int32_t";
    case DataType::kUInt8:
    case DataType::kUInt16:
      return "int32_t";
    case DataType::kUInt32:
      return "uint32_t";
    case DataType::kInt64:
      return "int64_t";
    case DataType::kUInt64:
      return "uint64_t";
    case DataType::kFloat64:
      return "double";
    case DataType::kHandle:
      return "void*";
    default:
      return "float";
  }
}

const char* CpuEmitter::storage_type(DataType t) {
  switch (t) {
    case DataType::kBool:
      return "bool";
    case DataType::kInt8:
      return "int8_t";
    case DataType::kInt16:
      return "int16_t";
    case DataType::kInt32:
      return "int32_t";
    case DataType::kInt64:
      return "int64_t";
    case DataType::kUInt8:
      return "uint8_t";
    case DataType::kUInt16:
      return "uint16_t";
    case DataType::kUInt32:
      return "uint32_t";
    case DataType::kUInt64:
      return "uint64_t";
    case DataType::kFloat16:
      return "uint16_t";
    case DataType::kBFloat16:
      return "uint16_t";
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    case DataType::kFloat8E4M3:
      return "uint8_t";
    case DataType::kFloat8E5M2:
    case DataType::kFloat4E2M1:
      return "uint8_t";
    case DataType::kHandle:
      return "void";
  }
  return "void";
}

std::string CpuEmitter::global_pointer_type(const Buffer& b) {
  if (b->dtype == DataType::kFloat4E2M1) return "tlrt::nibbles";
  return std::string(storage_type(b->dtype)) + "*";
}

const char* CpuEmitter::dtype_suffix(DataType t) {
  switch (t) {
    case DataType::kBool:
      return "bool";
    case DataType::kInt8:
      return "i8";
    case DataType::kInt16:
      return "i16";
    case DataType::kInt32:
      return "i32";
    case DataType::kInt64:
      return "i64";
    case DataType::kUInt8:
      return "u8";
    case DataType::kUInt16:
      return "u16";
    case DataType::kUInt32:
      return "u32";
    case DataType::kUInt64:
      return "u64";
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat32:
      return "f32";
    case DataType::kFloat64:
      return "f64";
    case DataType::kFloat8E4M3:
      return "e4m3";
    case DataType::kFloat8E5M2:
      return "e5m2";
    case DataType::kFloat4E2M1:
      return "e2m1";
    case DataType::kHandle:
      return "handle";
  }
  return "?";
}

const char* CpuEmitter::vector_type(DataType t) {
  switch (t) {
    case DataType::kFloat64:
      return "tlrt::vd";
    case DataType::kUInt32:
      return "tlrt::vu";
    case DataType::kInt64:
      return "tlrt::vl";
    case DataType::kUInt64:
      return "tlrt::vul";
    case DataType::kBool:
      return "tlrt::vm";
    default:
      return is_float(t) ? "tlrt::vf" : "tlrt::vi";
  }
}

const char* CpuEmitter::raw_type(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "tlrt::vf";
    case DataType::kFloat64:
      return "tlrt::vd";
    case DataType::kInt8:
      return "tlrt::vsb";
    case DataType::kInt16:
      return "tlrt::vs";
    case DataType::kInt32:
      return "tlrt::vi";
    case DataType::kInt64:
      return "tlrt::vl";
    case DataType::kUInt32:
      return "tlrt::vu";
    case DataType::kUInt64:
      return "tlrt::vul";
    case DataType::kBFloat16:
    case DataType::kFloat16:
    case DataType::kUInt16:
      return "tlrt::vh";
    default:
      return "tlrt::vb";  // one-byte types
  }
}

}  // namespace tessera::tl
