// Kernel signatures (see signature.h).
#include "tl/runtime/signature.h"

#include <sstream>

#include "tessera/core/error.h"

namespace tessera::tl {

std::string kernel_signature(const Program& p) {
  std::ostringstream os;
  os << "tessera-tl-signature 1\nkernel " << p.name << "\nsymbols";
  for (const Expr& s : p.symbols) os << " " << s.as<VarNode>()->name;
  os << "\n";
  for (const Param& prm : p.params) {
    if (!prm.buffer) {
      os << "scalar " << prm.name << " " << type_name(prm.scalar.type()) << "\n";
      continue;
    }
    os << "tensor " << prm.name << " " << type_name(prm.buffer->dtype);
    for (size_t d = 0; d < prm.buffer->shape.size(); ++d) {
      const Expr& e = prm.buffer->shape[d];
      int64_t v;
      if (is_const_int(e, &v)) {
        os << " " << v;
      } else if (const VarNode* var = e.as<VarNode>()) {
        os << " " << var->name;
      } else {
        fail_at(prm.buffer->loc, "T.Tensor '" + prm.name + "': dimension " + std::to_string(d) +
                                     " must be a constant or a T.dynamic symbol, not an expression");
      }
    }
    os << "\n";
  }
  return os.str();
}

KernelSignature parse_signature(const std::string& text) {
  KernelSignature sig;
  std::istringstream in(text);
  std::string line;
  auto bad = [&](const std::string& why) -> void {
    fail(ErrorCode::kRuntime, "tl: malformed kernel signature (", why, ") in:\n", text);
  };
  if (!std::getline(in, line) || line != "tessera-tl-signature 1") bad("unknown version line '" + line + "'");
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "kernel") {
      ls >> sig.kernel;
    } else if (word == "symbols") {
      for (std::string s; ls >> s;) sig.symbols.push_back(s);
    } else if (word == "tensor" || word == "scalar") {
      KernelSignature::Param p;
      std::string dtype;
      p.is_tensor = word == "tensor";
      if (!(ls >> p.name >> dtype)) bad("parameter line '" + line + "'");
      p.dtype = type_from_name(dtype);
      for (std::string d; ls >> d;) {
        KernelSignature::Dim dim;
        bool found = false;
        for (size_t i = 0; i < sig.symbols.size(); ++i)
          if (sig.symbols[i] == d) dim.symbol = int(i), found = true;
        if (!found) {
          try {
            dim.value = std::stoll(d);
          } catch (...) {
            bad("dimension '" + d + "'");
          }
        }
        p.dims.push_back(dim);
      }
      sig.params.push_back(p);
    } else if (!word.empty()) {
      bad("line '" + line + "'");
    }
  }
  if (sig.kernel.empty()) bad("no kernel name");
  return sig;
}

}  // namespace tessera::tl
