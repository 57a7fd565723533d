// Verification: the program is well formed - every variable is used inside the scope that defines it,
// every buffer is a parameter or allocated in the kernel, and tile operations get operands of the
// scopes and ranks they accept, and every dynamic dimension is a dimension of a tensor parameter. Throws
// Error(kInvalidArgument) "<file>:<line>: <op>: <rule>".
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

void verify_program(const Program& p);

}  // namespace tessera::tl
