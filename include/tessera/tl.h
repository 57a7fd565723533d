// tessera/tl.h - the tile language for C++ callers, in one include. See docs/tl.md.
//
//   tessera/tl/types.h     element types, memory scopes, source locations
//   tessera/tl/ir.h        expressions, statements, buffers, programs
//   tessera/tl/expr_ops.h  arithmetic on IR expressions and the T.* helpers
//   tessera/tl/builder.h   KernelBuilder: records a program statement by statement
//   tessera/tl/target.h    what a kernel is compiled for
//   tessera/tl/kernel.h    compiling programs and calling them
//   tessera/tl/printer.h   the TileLang-like text form of the IR
// Not included: tessera/tl/runtime.h and tessera/tl/runtime/, which only generated kernels include.
#pragma once

#include "tessera/tl/builder.h"
#include "tessera/tl/expr_ops.h"
#include "tessera/tl/ir.h"
#include "tessera/tl/kernel.h"
#include "tessera/tl/printer.h"
#include "tessera/tl/target.h"
#include "tessera/tl/types.h"
