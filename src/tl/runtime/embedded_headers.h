// The runtime headers generated kernels include (include/tessera/tl/runtime.h and runtime/*.h), embedded
// into libtessera at build time (embed_headers.cmake), so a kernel can be compiled wherever tessera runs.
#pragma once

#include <string>
#include <vector>

namespace tessera::tl {

struct EmbeddedFile {
  const char* path;  // relative to an include root, e.g. "tessera/tl/runtime.h"
  const char* text;
};

const std::vector<EmbeddedFile>& embedded_runtime_headers();

}  // namespace tessera::tl
