// Software pipelining for the CPU: a T.Pipelined(n, num_stages=s) loop becomes a serial loop whose body
// first prefetches (into L2) the global source tiles that its T.copy statements will read s - 1
// iterations later; the copies themselves stay where the author wrote them. (There are no asynchronous
// copies to overlap on a CPU core; the hardware prefetch of whole tiles is the overlap it has.)
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

Stmt plan_pipeline(const Stmt& s);

}  // namespace tessera::tl
