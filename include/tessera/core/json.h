// JSON in tessera: string literals for the writers of machine-readable output (`tessera info` limits
// cache, `tessera bench --json`), and a small strict parser for the readers of configs and file headers
// (model configs, safetensors headers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// s as a JSON string literal: quoted, with '"', '\\' and control characters escaped (bytes >= 0x80 pass
// through, so UTF-8 stays UTF-8).
std::string json_quote(const std::string& s);

// One parsed JSON value. Numbers keep their double value and whether their text was an integer
// (no fraction or exponent), whose exact value is then in `integer`.
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  bool is_integer = false;
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in document order

  const JsonValue* find(std::string_view key) const;  // nullptr when absent (objects only)
  static const char* kind_name(Kind k);
};

// Parses RFC 8259 JSON strictly: one value, surrounded only by whitespace; duplicate object keys,
// trailing commas, comments, NaN/Infinity and invalid UTF-16 escapes are errors. Throws
// Error(kInvalidArgument) "<what>: invalid JSON at byte N: <reason>".
JsonValue json_parse(std::string_view text, const std::string& what);

}  // namespace tessera
