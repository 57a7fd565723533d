// A small writer for one JSON object (string, number, integer and boolean values; NaN becomes null).
// Used by the bench reports and by `tessera info --json`.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/json.h"

namespace tessera::bench {

class JsonObject {
 public:
  JsonObject& add(const char* key, const std::string& value);
  JsonObject& add(const char* key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const char* key, double value);
  JsonObject& add(const char* key, int64_t value);
  JsonObject& add(const char* key, int value) { return add(key, int64_t(value)); }
  JsonObject& add(const char* key, bool value);
  JsonObject& add_null(const char* key);
  std::string str() const { return text_ + "}"; }

 private:
  void key(const char* k);
  std::string text_ = "{";
};

using tessera::json_quote;  // the shared escaping (tessera/core/json.h)

}  // namespace tessera::bench
