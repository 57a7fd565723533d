#include "json_writer.h"

#include <cmath>
#include <cstdio>

namespace tessera::bench {

void JsonObject::key(const char* k) {
  if (text_.size() > 1) text_ += ", ";
  text_ += json_quote(k) + ": ";
}

JsonObject& JsonObject::add(const char* k, const std::string& value) {
  key(k);
  text_ += json_quote(value);
  return *this;
}

JsonObject& JsonObject::add(const char* k, double value) {
  key(k);
  if (!std::isfinite(value)) {
    text_ += "null";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    text_ += buf;
  }
  return *this;
}

JsonObject& JsonObject::add(const char* k, int64_t value) {
  key(k);
  text_ += std::to_string(value);
  return *this;
}

JsonObject& JsonObject::add(const char* k, bool value) {
  key(k);
  text_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::add_null(const char* k) {
  key(k);
  text_ += "null";
  return *this;
}

}  // namespace tessera::bench
