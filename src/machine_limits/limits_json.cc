// The cache file format: one flat JSON object, a key per MachineLimits field (except from_cache and
// cache_file, which describe the in-memory copy). The reader accepts any flat object of strings,
// numbers and booleans in any order and requires every field.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <type_traits>
#include <variant>

#include "tessera/core/json.h"
#include "tessera/info.h"

namespace tessera {
namespace {

using Member = std::variant<std::string MachineLimits::*, int MachineLimits::*, int64_t MachineLimits::*,
                            double MachineLimits::*, bool MachineLimits::*>;
struct Field {
  const char* name;
  Member member;
};

const Field kFields[] = {
    {"cpu_model", &MachineLimits::cpu_model},
    {"logical_cpus", &MachineLimits::logical_cpus},
    {"threads", &MachineLimits::threads},
    {"version", &MachineLimits::version},
    {"isa", &MachineLimits::isa},
    {"l2_bytes", &MachineLimits::l2_bytes},
    {"l3_bytes", &MachineLimits::l3_bytes},
    {"fp32_peak_gflops_1t", &MachineLimits::fp32_peak_gflops_1t},
    {"fp32_peak_gflops", &MachineLimits::fp32_peak_gflops},
    {"bf16_peak_gflops_1t", &MachineLimits::bf16_peak_gflops_1t},
    {"bf16_peak_gflops", &MachineLimits::bf16_peak_gflops},
    {"bf16_native", &MachineLimits::bf16_native},
    {"bf16_vector_peak_gflops_1t", &MachineLimits::bf16_vector_peak_gflops_1t},
    {"bf16_vector_peak_gflops", &MachineLimits::bf16_vector_peak_gflops},
    {"fp32_kernel", &MachineLimits::fp32_kernel},
    {"bf16_kernel", &MachineLimits::bf16_kernel},
    {"stream_kernel", &MachineLimits::stream_kernel},
    {"dram_read_gbps_1t", &MachineLimits::dram_read_gbps_1t},
    {"dram_read_gbps", &MachineLimits::dram_read_gbps},
    {"dram_copy_gbps_1t", &MachineLimits::dram_copy_gbps_1t},
    {"dram_copy_gbps", &MachineLimits::dram_copy_gbps},
    {"l2_copy_gbps_1t", &MachineLimits::l2_copy_gbps_1t},
    {"l2_copy_gbps", &MachineLimits::l2_copy_gbps},
    {"shm_copy_gbps", &MachineLimits::shm_copy_gbps},
    {"measure_seconds", &MachineLimits::measure_seconds},
    {"measured_unix_time", &MachineLimits::measured_unix_time},
};

void append_string(std::string& out, const std::string& s) {
  out += json_quote(s);
}

// A parsed value: text for strings, the number for numbers and booleans (1/0).
struct Value {
  bool is_string = false, is_bool = false;
  std::string text;
  double number = 0;
};

class FlatParser {
 public:
  explicit FlatParser(const std::string& s) : s_(s) {}

  bool parse(std::map<std::string, Value>* out) {
    if (!eat('{')) return false;
    if (eat('}')) return at_end();
    do {
      std::string key;
      Value v;
      if (!string(&key) || !eat(':') || !value(&v)) return false;
      (*out)[key] = v;
    } while (eat(','));
    return eat('}') && at_end();
  }

 private:
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  bool at_end() {
    skip_space();
    return i_ == s_.size();
  }
  bool string(std::string* out) {
    if (!eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        c = s_[i_++];
        if (c == 'u') {
          if (i_ + 4 > s_.size()) return false;
          const long code = std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16);
          if (code > 0x7F) return false;  // the writer only escapes control characters
          c = char(code);
          i_ += 4;
        } else if (c == 'n') {
          c = '\n';
        } else if (c == 't') {
          c = '\t';
        } else if (c != '"' && c != '\\' && c != '/') {
          return false;
        }
      }
      *out += c;
    }
    return eat('"');
  }
  bool value(Value* v) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == '"') return v->is_string = true, string(&v->text);
    for (const char* word : {"true", "false"}) {
      if (s_.compare(i_, std::char_traits<char>::length(word), word) == 0) {
        i_ += std::char_traits<char>::length(word);
        v->is_bool = true;
        v->number = word[0] == 't';
        return true;
      }
    }
    const char* begin = s_.c_str() + i_;
    char* end = nullptr;
    v->number = std::strtod(begin, &end);
    if (end == begin) return false;
    i_ += size_t(end - begin);
    return true;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

std::string machine_limits_to_json(const MachineLimits& m) {
  std::string out = "{";
  bool first = true;
  for (const Field& f : kFields) {
    if (!first) out += ", ";
    first = false;
    append_string(out, f.name);
    out += ": ";
    char buf[64];
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(m.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            append_string(out, m.*member);
          } else if constexpr (std::is_same_v<T, bool>) {
            out += m.*member ? "true" : "false";
          } else if constexpr (std::is_same_v<T, double>) {
            std::snprintf(buf, sizeof buf, "%.17g", m.*member);
            out += buf;
          } else {
            out += std::to_string(m.*member);
          }
        },
        f.member);
  }
  return out + "}";
}

bool machine_limits_from_json(const std::string& text, MachineLimits* out) {
  std::map<std::string, Value> values;
  if (!FlatParser(text).parse(&values)) return false;
  MachineLimits m;
  for (const Field& f : kFields) {
    const auto it = values.find(f.name);
    if (it == values.end()) return false;
    const Value& v = it->second;
    bool ok = true;
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(m.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            ok = v.is_string;
            m.*member = v.text;
          } else if constexpr (std::is_same_v<T, bool>) {
            ok = v.is_bool;
            m.*member = v.number != 0;
          } else {
            ok = !v.is_string && !v.is_bool;
            m.*member = T(v.number);
          }
        },
        f.member);
    if (!ok) return false;
  }
  *out = m;
  return true;
}

}  // namespace tessera
