// A strict recursive-descent JSON parser (json.h). Depth is bounded so hostile input cannot overflow
// the stack.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/core/json.h"

namespace tessera {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  JsonValue parse_document() {
    skip_ws();
    JsonValue v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail_here("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail_here(const std::string& reason) {
    fail(ErrorCode::kInvalidArgument, what_, ": invalid JSON at byte ", pos_, ": ", reason);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail_here(std::string("expected '") + c + "'");
  }
  bool eat_word(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.substr(pos_, n) == w) {
      pos_ += n;
      return true;
    }
    return false;
  }

  JsonValue parse_value(int depth) {
    if (depth > kMaxDepth) fail_here("nesting deeper than 64");
    if (pos_ >= s_.size()) fail_here("unexpected end of input");
    JsonValue v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = JsonValue::Kind::kObject;
      ++pos_;
      skip_ws();
      if (eat('}')) return v;
      for (;;) {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail_here("expected a string key");
        std::string key = parse_string();
        for (const auto& kv : v.object)
          if (kv.first == key) fail_here("duplicate key \"" + key + "\"");
        skip_ws();
        expect(':');
        skip_ws();
        JsonValue item = parse_value(depth + 1);
        v.object.emplace_back(std::move(key), std::move(item));
        skip_ws();
        if (eat('}')) return v;
        expect(',');
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::kArray;
      ++pos_;
      skip_ws();
      if (eat(']')) return v;
      for (;;) {
        skip_ws();
        v.array.push_back(parse_value(depth + 1));
        skip_ws();
        if (eat(']')) return v;
        expect(',');
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      v.string = parse_string();
      return v;
    }
    if (eat_word("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
      return v;
    }
    if (eat_word("false")) {
      v.kind = JsonValue::Kind::kBool;
      return v;
    }
    if (eat_word("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail_here(std::string("unexpected character '") + c + "'");
  }

  JsonValue parse_number() {
    const size_t start = pos_;
    bool integer = true;
    eat('-');
    if (eat('0')) {
    } else if (pos_ < s_.size() && s_[pos_] >= '1' && s_[pos_] <= '9') {
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    } else {
      fail_here("invalid number");
    }
    if (eat('.')) {
      integer = false;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
        fail_here("digit expected after '.'");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integer = false;
      ++pos_;
      if (!eat('+')) eat('-');
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
        fail_here("digit expected in exponent");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    const std::string text(s_.substr(start, pos_ - start));
    JsonValue v;
    v.kind = JsonValue::Kind::kNumber;
    v.number = std::strtod(text.c_str(), nullptr);
    if (integer) {
      errno = 0;
      const long long n = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) {
        v.is_integer = true;
        v.integer = n;
      }
    }
    return v;
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > s_.size()) fail_here("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      u <<= 4;
      if (h >= '0' && h <= '9')
        u |= unsigned(h - '0');
      else if (h >= 'a' && h <= 'f')
        u |= unsigned(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        u |= unsigned(h - 'A' + 10);
      else
        fail_here("invalid hex digit in \\u escape");
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail_here("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail_here("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail_here("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = parse_hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!eat('\\') || !eat('u')) fail_here("high surrogate without a low surrogate");
            const unsigned lo = parse_hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail_here("invalid low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail_here("lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail_here(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& kv : object)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

const char* JsonValue::kind_name(Kind k) {
  switch (k) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "a boolean";
    case Kind::kNumber:
      return "a number";
    case Kind::kString:
      return "a string";
    case Kind::kArray:
      return "an array";
    case Kind::kObject:
      return "an object";
  }
  return "?";
}

JsonValue json_parse(std::string_view text, const std::string& what) {
  return Parser(text, what).parse_document();
}

}  // namespace tessera
