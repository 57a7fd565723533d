// tessera/tl/printer.h - a readable, TileLang-like text form of the IR (for messages, debugging and
// the TESSERA_TL_PRINT_IR environment variable).
#pragma once

#include <string>

#include "tessera/tl/ir.h"

namespace tessera::tl {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s, int indent = 0);
std::string to_string(const Region& r);
std::string to_string(const Program& p);

}  // namespace tessera::tl
