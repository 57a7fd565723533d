#include "select/topk_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace tessera::test {
namespace {

int elem_bytes(const TopkCase& c) {
  return c.bf16 ? 2 : 4;
}
int64_t row_stride(const TopkCase& c) {
  return c.cols + c.row_pad;
}

uint32_t raw_bits(const TopkCase& c, const TopkInputs& in, int64_t r, int64_t col) {
  const size_t off = size_t((r * row_stride(c) + col) * elem_bytes(c));
  if (c.bf16) {
    uint16_t h;
    std::memcpy(&h, in.data.data() + off, 2);
    return h;
  }
  uint32_t u;
  std::memcpy(&u, in.data.data() + off, 4);
  return u;
}

float as_float(const TopkCase& c, uint32_t bits) {
  return c.bf16 ? bf16_to_f32(uint16_t(bits)) : f32_from_bits(bits);
}

// The reference order, written independently of the library's key map: NaNs with the sign bit clear
// rank above +inf (larger payload higher), NaNs with the sign bit set below -inf (larger payload
// lower), -0 just below +0, equal values by ascending index.
struct Ranked {
  uint32_t bits;
  float value;
  int64_t index;
};
int rank_class(const Ranked& x) {
  if (!std::isnan(x.value)) return 1;
  return std::signbit(x.value) ? 0 : 2;
}
bool ranks_higher(const Ranked& a, const Ranked& b) {
  const int ca = rank_class(a), cb = rank_class(b);
  if (ca != cb) return ca > cb;
  if (ca == 2 && a.bits != b.bits) return a.bits > b.bits;
  if (ca == 0 && a.bits != b.bits) return a.bits < b.bits;
  if (ca == 1 && a.value != b.value) return a.value > b.value;
  if (ca == 1 && std::signbit(a.value) != std::signbit(b.value)) return !std::signbit(a.value);
  return a.index < b.index;
}

std::vector<Ranked> reference_row(const TopkCase& c, const TopkInputs& in, int64_t r) {
  const int64_t b = c.use_begin ? in.begin[size_t(r)] : 0, e = c.use_end ? in.end[size_t(r)] : c.cols;
  std::vector<Ranked> all;
  for (int64_t i = b; i < e; ++i) {
    const uint32_t bits = raw_bits(c, in, r, i);
    all.push_back({bits, as_float(c, bits), i});
  }
  std::stable_sort(all.begin(), all.end(), ranks_higher);
  if (int64_t(all.size()) > c.k) all.resize(size_t(c.k));
  return all;
}

float draw(Dist d, Rng& rng) {
  switch (d) {
    case Dist::kNormal:
      return float(rng.normal());
    case Dist::kScaled:
      return float(rng.normal() * 1e4 + 100);
    case Dist::kFewValues:
      return float(rng.uniform_int(-4, 3)) * 0.5f;
    case Dist::kSignedZeros:
      return rng.index(2) ? 0.0f : -0.0f;
    case Dist::kInfinities: {
      const int64_t u = rng.index(16);
      return u == 0 ? INFINITY : u == 1 ? -INFINITY : float(rng.normal());
    }
    case Dist::kRawBits: {
      uint32_t bits = rng.bits32();
      if ((bits & 0x7F800000u) == 0x7F800000u) bits &= ~0x00800000u;  // no NaN/inf
      return f32_from_bits(bits);
    }
  }
  return 0;
}

}  // namespace

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kNormal:
      return "normal";
    case Dist::kScaled:
      return "scaled";
    case Dist::kFewValues:
      return "few_values";
    case Dist::kSignedZeros:
      return "signed_zeros";
    case Dist::kInfinities:
      return "infinities";
    case Dist::kRawBits:
      return "raw_bits";
  }
  return "?";
}

std::string TopkCase::str() const {
  std::ostringstream os;
  os << "rows=" << rows << " cols=" << cols << " k=" << k << (bf16 ? " bf16" : " fp32") << (idx64 ? " i64" : " i32")
     << (with_values ? "" : " no_values") << (sorted ? " sorted" : "") << (sorted_index ? " sorted_index" : "")
     << (use_begin ? " begin" : "") << (use_end ? " end" : "") << (use_offset ? " offset" : "") << " pad=" << row_pad
     << " dist=" << dist_name(dist) << (abort_on_nan ? "" : " mark_nan");
  return os.str();
}

TopkInputs make_inputs(const TopkCase& c, Rng& rng) {
  TopkInputs in;
  in.data.resize(size_t(c.rows * row_stride(c) * elem_bytes(c)));
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t i = 0; i < row_stride(c); ++i) {
      const float v = draw(c.dist, rng);
      const size_t off = size_t((r * row_stride(c) + i) * elem_bytes(c));
      if (c.bf16) {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(in.data.data() + off, &h, 2);
      } else {
        std::memcpy(in.data.data() + off, &v, 4);
      }
    }
  for (int64_t r = 0; r < c.rows; ++r) {
    // Ends cover short rows (<= k, including 0) and long ones; begins stay below their end.
    const int64_t e = c.use_end
                          ? (rng.index(4) == 0 ? rng.index(std::min<int64_t>(c.k, c.cols) + 1) : rng.index(c.cols + 1))
                          : c.cols;
    in.end.push_back(int32_t(e));
    in.begin.push_back(int32_t(c.use_begin ? rng.index(e / 3 + 1) : 0));
    in.offset.push_back(int32_t(rng.uniform_int(-1000000, 1000000)));
  }
  return in;
}

void put_nan(const TopkCase& c, TopkInputs* in, int64_t r, int64_t col, bool negative) {
  const size_t off = size_t((r * row_stride(c) + col) * elem_bytes(c));
  if (c.bf16) {
    const uint16_t h = negative ? 0xFFC1 : 0x7FC1;
    std::memcpy(in->data.data() + off, &h, 2);
  } else {
    const uint32_t u = negative ? 0xFFC00001u : 0x7FC00001u;
    std::memcpy(in->data.data() + off, &u, 4);
  }
}

TopkOutputs run_topk(const TopkCase& c, const TopkInputs& in, int64_t out_pad) {
  const DType vt = c.bf16 ? DType::kBF16 : DType::kF32, it = c.idx64 ? DType::kI64 : DType::kI32;
  const int64_t ld = c.k + out_pad;
  TopkOutputs out;
  out.indices.resize(size_t(c.rows * ld * (c.idx64 ? 8 : 4)));
  if (!out.indices.empty()) std::memset(out.indices.data(), 0xA5, out.indices.size());
  if (c.with_values) {
    out.values.resize(size_t(c.rows * ld * elem_bytes(c)));
    fill_poison(&out.values, vt);
  }
  const TensorView input(const_cast<uint8_t*>(in.data.data()), vt, {c.rows, c.cols}, {row_stride(c), 1});
  const TensorView begin(const_cast<int32_t*>(in.begin.data()), DType::kI32, {c.rows});
  const TensorView end(const_cast<int32_t*>(in.end.data()), DType::kI32, {c.rows});
  const TensorView offset(const_cast<int32_t*>(in.offset.data()), DType::kI32, {c.rows});
  const TensorView idx(out.indices.data(), it, {c.rows, c.k}, {ld, 1});
  const TensorView val(out.values.data(), vt, {c.rows, c.k}, {ld, 1});
  select::TopkOptions o;
  o.sorted = c.sorted;
  o.sorted_index = c.sorted_index;
  o.idx_oob_fill_value = c.idx_fill;
  o.value_oob_fill_value = c.value_fill;
  o.abort_when_nan_found = c.abort_on_nan;
  select::topk(input, c.k, c.use_begin ? &begin : nullptr, c.use_end ? &end : nullptr, c.with_values ? &val : nullptr,
               idx, c.use_offset ? &offset : nullptr, o);
  return out;
}

int64_t output_index(const TopkCase& c, const TopkOutputs& out, int64_t r, int64_t j) {
  const size_t ld = out.indices.size() / size_t(c.rows) / (c.idx64 ? 8 : 4);
  if (c.idx64) {
    int64_t v;
    std::memcpy(&v, out.indices.data() + (size_t(r) * ld + size_t(j)) * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, out.indices.data() + (size_t(r) * ld + size_t(j)) * 4, 4);
  return v;
}

::testing::AssertionResult check_topk(const TopkCase& c, const TopkInputs& in, const TopkOutputs& out,
                                      const std::vector<int64_t>& nan_rows) {
  const size_t ld = out.indices.size() / size_t(std::max<int64_t>(c.rows, 1)) / (c.idx64 ? 8 : 4);
  auto value_bits = [&](int64_t r, int64_t j) -> uint32_t {
    const size_t off = (size_t(r) * ld + size_t(j)) * size_t(elem_bytes(c));
    uint32_t v = 0;
    std::memcpy(&v, out.values.data() + off, size_t(elem_bytes(c)));
    return v;
  };
  const uint32_t fill_bits = c.bf16 ? f32_to_bf16(c.value_fill) : f32_bits(c.value_fill);
  const int64_t fill_idx = c.idx64 ? c.idx_fill : int64_t(int32_t(c.idx_fill));
  for (int64_t r = 0; r < c.rows; ++r) {
    auto fail = [&](int64_t j, const std::string& what) {
      return ::testing::AssertionFailure() << c.str() << ": row " << r << " entry " << j << ": " << what;
    };
    if (std::find(nan_rows.begin(), nan_rows.end(), r) != nan_rows.end()) {
      for (int64_t j = 0; j < c.k; ++j) {
        if (output_index(c, out, r, j) != select::kNanRowMarker) return fail(j, "NaN row index is not the marker");
        if (c.with_values && !std::isnan(as_float(c, value_bits(r, j)))) return fail(j, "NaN row value is not NaN");
      }
      continue;
    }
    const std::vector<Ranked> ref = reference_row(c, in, r);
    const int64_t off = c.use_offset ? in.offset[size_t(r)] : 0;
    std::vector<int64_t> got, want;
    for (int64_t j = 0; j < int64_t(ref.size()); ++j) {
      const int64_t stored = output_index(c, out, r, j);
      const int64_t col = c.idx64 ? stored - off : int64_t(int32_t(uint32_t(stored) - uint32_t(off)));
      got.push_back(col);
      want.push_back(ref[size_t(j)].index);
      if (col < 0 || col >= c.cols) return fail(j, "index " + std::to_string(col) + " out of range");
      if (c.with_values && value_bits(r, j) != raw_bits(c, in, r, col))
        return fail(j, "value " + hex(value_bits(r, j)) + " is not input[" + std::to_string(col) +
                           "] = " + hex(raw_bits(c, in, r, col)));
    }
    for (int64_t j = int64_t(ref.size()); j < c.k; ++j) {
      if (output_index(c, out, r, j) != fill_idx)
        return fail(j, "fill index " + std::to_string(output_index(c, out, r, j)));
      if (c.with_values && value_bits(r, j) != fill_bits) return fail(j, "fill value " + hex(value_bits(r, j)));
    }
    if (!c.sorted) {  // sorted: exact reference order; sorted_index: ascending; neither: the same set
      std::sort(want.begin(), want.end());
      if (!c.sorted_index) std::sort(got.begin(), got.end());
    }
    for (size_t j = 0; j < got.size(); ++j)
      if (got[j] != want[j])
        return fail(int64_t(j), "index " + std::to_string(got[j]) + ", reference " + std::to_string(want[j]));
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::test
