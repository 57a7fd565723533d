// JSON string literals, shared by the writers of machine-readable output (`tessera info` limits cache,
// `tessera bench --json`).
#pragma once

#include <string>

namespace tessera {

// s as a JSON string literal: quoted, with '"', '\\' and control characters escaped (bytes >= 0x80 pass
// through, so UTF-8 stays UTF-8).
std::string json_quote(const std::string& s);

}  // namespace tessera
