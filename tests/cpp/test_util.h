// Shared helpers of the C++ tests: seeded random inputs, float64 reference math, poisoned buffers,
// error expectations, first-mismatch reports and scoped settings (ISA cap, thread count,
// environment variables).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/registry.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"

namespace tessera::test {

// ---- random inputs ----

// A generator seeded from the running test's full name, so every test gets its own reproducible inputs.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  static Rng for_current_test(uint64_t salt = 0) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
    return Rng(std::hash<std::string>{}(name) ^ (salt * 0x9E3779B97F4A7C15ull));
  }
  uint32_t bits32() { return uint32_t(gen_()); }
  uint64_t bits64() { return gen_(); }
  int64_t index(int64_t n) { return int64_t(gen_() % uint64_t(n)); }
  int uniform_int(int lo, int hi) { return lo + int(gen_() % uint64_t(hi - lo + 1)); }  // [lo, hi]
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(gen_); }

 private:
  std::mt19937_64 gen_;
};

// ---- float64 reference math ----

// DeepGEMM's calc_diff: 1 - 2*sum(xy)/sum(x^2+y^2) in float64 (0 for identical inputs).
inline double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, sq = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    sq += x[i] * x[i] + y[i] * y[i];
  }
  return sq == 0 ? 0.0 : 1.0 - 2.0 * xy / sq;
}

// Distance between |x| and the next larger number of a float format with `mantissa_bits` stored bits
// (normal range; f32 subnormals are not produced by the tests' data).
inline double ulp_of(double x, int mantissa_bits) {
  const double a = std::fabs(x);
  if (a == 0 || !std::isfinite(a)) return 0;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  return std::ldexp(1.0, e - 1 - mantissa_bits);
}
inline double bf16_ulp(double x) {
  return ulp_of(x, 7);
}
inline double f32_ulp(double x) {
  return ulp_of(x, 23);
}

// ---- poisoned buffers ----

// NaN patterns no computation produces from finite inputs: a kernel that forgets to write an element
// leaves one of these behind, a kernel that reads padding turns its result into NaN.
constexpr uint16_t kPoisonBf16 = 0x7FA5;
constexpr uint32_t kPoisonF32 = 0x7FA5A5A5u;
constexpr uint8_t kPoisonE4m3 = 0x7F;

inline void fill_poison(std::vector<uint8_t>* bytes, DType dtype) {
  const size_t es = size_t(dtype_storage_bytes(dtype));
  for (size_t i = 0; i + es <= bytes->size(); i += es) {
    switch (dtype) {
      case DType::kBF16:
        std::memcpy(bytes->data() + i, &kPoisonBf16, 2);
        break;
      case DType::kF32:
        std::memcpy(bytes->data() + i, &kPoisonF32, 4);
        break;
      case DType::kF8E4M3:
        (*bytes)[i] = kPoisonE4m3;
        break;
      default:
        (*bytes)[i] = 0xA5;
        break;
    }
  }
}

// ---- comparisons that report the first mismatch ----

// Bitwise comparison of two equally sized buffers of `elem_bytes`-sized elements seen as rows x cols
// with row stride `ld` (elements); reports the first differing coordinate and both values in hex.
inline ::testing::AssertionResult bitwise_equal(const std::vector<uint8_t>& x, const std::vector<uint8_t>& y,
                                                int64_t rows, int64_t cols, int64_t ld, int elem_bytes) {
  if (x.size() != y.size())
    return ::testing::AssertionFailure() << "buffer sizes differ: " << x.size() << " vs " << y.size();
  int64_t differing = 0, first_r = -1, first_c = -1;
  uint64_t first_x = 0, first_y = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t off = size_t((r * ld + c) * elem_bytes);
      if (std::memcmp(x.data() + off, y.data() + off, size_t(elem_bytes)) == 0) continue;
      if (differing++ == 0) {
        first_r = r;
        first_c = c;
        std::memcpy(&first_x, x.data() + off, size_t(elem_bytes));
        std::memcpy(&first_y, y.data() + off, size_t(elem_bytes));
      }
    }
  if (differing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differing << " of " << rows * cols << " elements differ; first at ("
                                       << first_r << ", " << first_c << "): 0x" << std::hex << first_x << " vs 0x"
                                       << first_y << std::dec;
}

// ---- errors ----

// Runs fn and expects a tessera::Error with `code` whose message contains every needle.
inline ::testing::AssertionResult throws_error(const std::function<void()>& fn, ErrorCode code,
                                               std::initializer_list<std::string> needles) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (e.code() != code)
      return ::testing::AssertionFailure() << "threw code '" << error_code_name(e.code()) << "' instead of '"
                                           << error_code_name(code) << "': " << msg;
    for (const std::string& n : needles)
      if (msg.find(n) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << n << "\": " << msg;
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-tessera exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}
inline ::testing::AssertionResult throws_invalid(const std::function<void()>& fn,
                                                 std::initializer_list<std::string> needles) {
  return throws_error(fn, ErrorCode::kInvalidArgument, needles);
}

// ---- scoped settings ----

// Caps the ISA for the scope, restoring the previous level afterwards (cap = active level restores
// min(best, old cap) exactly).
class IsaCapScope {
 public:
  explicit IsaCapScope(Isa cap) : saved_(active_isa()) { set_isa_cap(cap); }
  ~IsaCapScope() { set_isa_cap(saved_); }
  IsaCapScope(const IsaCapScope&) = delete;
  IsaCapScope& operator=(const IsaCapScope&) = delete;

 private:
  Isa saved_;
};

// Sets the pool size for the scope and restores the previous size.
class NumThreadsScope {
 public:
  explicit NumThreadsScope(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~NumThreadsScope() { set_num_threads(saved_); }
  NumThreadsScope(const NumThreadsScope&) = delete;
  NumThreadsScope& operator=(const NumThreadsScope&) = delete;

 private:
  int saved_;
};

// Sets environment variable `name` for the scope (tuning overrides read on every call) and restores
// its previous value, or its absence, afterwards.
class EnvScope {
 public:
  EnvScope(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvScope() {
    if (had_old_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::string name_, old_;
  bool had_old_ = false;
};

// The levels of this build's CPU family (x86 or ARM), scalar first.
inline std::vector<Isa> all_isas() {
  int n = 0;
  const Isa* levels = host_isa_levels(&n);
  return std::vector<Isa>(levels, levels + n);
}
// True when this CPU runs `isa` (a level of the other family never is).
inline bool isa_supported(Isa isa) {
  return isa_includes(cpu_features().best, isa);
}

// TESSERA_TEST_EMULATED=1 (scripts/test_arm64.sh): the tests run under an instruction-set emulator,
// tens of times slower than a CPU; suites whose full sizes take minutes there run smaller cases.
inline bool emulated() {
  const char* e = std::getenv("TESSERA_TEST_EMULATED");
  return e && std::strcmp(e, "1") == 0;
}

// The next lower level of this family that gets the same kernel tables as `level` for every slot in
// `slots` (so the same code runs), or nullptr. Emulated runs skip such a level: it proves nothing the
// lower one does not.
inline const char* same_kernels_as_lower_level(Isa level, const std::vector<cpu::Slot>& slots) {
  const std::vector<Isa> levels = all_isas();
  for (size_t i = 1; i < levels.size(); ++i) {
    if (levels[i] != level) continue;
    for (cpu::Slot s : slots) {
      const cpu::KernelChoice hi = cpu::choose_kernel_at(s, level, "tests"),
                              lo = cpu::choose_kernel_at(s, levels[i - 1], "tests");
      if (hi.impl == nullptr || lo.impl == nullptr || hi.table != lo.table) return nullptr;
      if (hi.table == nullptr && std::strcmp(hi.impl->name, lo.impl->name) != 0) return nullptr;  // portable code
    }
    return isa_name(levels[i - 1]);
  }
  return nullptr;
}

// Every slot of the library's kernels (the tile language's generated code aside).
inline std::vector<cpu::Slot> library_slots() {
  std::vector<cpu::Slot> slots;
  for (int s = 0; s < int(cpu::Slot::kCount); ++s)
    if (cpu::Slot(s) != cpu::Slot::kTlVector) slots.push_back(cpu::Slot(s));
  return slots;
}

// The GEMM slots the gemm suites exercise.
inline std::vector<cpu::Slot> gemm_slots() {
  return {cpu::Slot::kGemmPacked, cpu::Slot::kGemmFinalize, cpu::Slot::kGemvBf16, cpu::Slot::kGemvFp8,
          cpu::Slot::kGemvFp4};
}

// Formats a number as hex for messages.
inline std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

}  // namespace tessera::test

namespace tessera {
// Readable parameter values in GoogleTest / ctest names.
inline void PrintTo(Isa isa, std::ostream* os) {
  *os << isa_name(isa);
}
}  // namespace tessera
