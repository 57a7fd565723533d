// Output rows of the top-k: indices (+ offset) in int32 or int64, value bits, fills, NaN markers.
#include <cstring>

#include "select/topk_bf16.h"
#include "select/topk_job.h"
#include "select/topk_row.h"

namespace tessera::select::detail {
namespace {

template <class Idx>
void write_indices(const TopkJob& job, int64_t r, const int32_t* index, int64_t count) {
  Idx* out = reinterpret_cast<Idx*>(job.indices + r * job.indices_row_bytes);
  const int64_t offset = job.offsets ? job.offsets[r * job.offsets_stride] : 0;
  for (int64_t j = 0; j < count; ++j) out[j] = Idx(int64_t(index[j]) + offset);
  for (int64_t j = count; j < job.k; ++j) out[j] = Idx(job.options.idx_oob_fill_value);
}

template <class Bits>
void write_values(const TopkJob& job, int64_t r, const int32_t* keys, int64_t count) {
  Bits* out = reinterpret_cast<Bits*>(job.values + r * job.values_row_bytes);
  for (int64_t j = 0; j < count; ++j) out[j] = Bits(key_to_bits(keys[j], job.bf16));
  for (int64_t j = count; j < job.k; ++j) out[j] = Bits(job.value_fill_bits);
}

}  // namespace

void write_row(const TopkJob& job, int64_t r, const int32_t* keys, const int32_t* index, int64_t count) {
  if (job.indices_64) {
    write_indices<int64_t>(job, r, index, count);
  } else {
    write_indices<int32_t>(job, r, index, count);
  }
  if (!job.values) return;
  if (job.bf16) {
    write_values<uint16_t>(job, r, keys, count);
  } else {
    write_values<uint32_t>(job, r, keys, count);
  }
}

void emit_row_bf16(const TopkJob& job, int64_t r, const SelectKernels& kernels, const Bf16Selection& sel) {
  char* idx = job.indices + r * job.indices_row_bytes;
  emit_bf16(kernels, sel, job.k, job.offsets ? job.offsets[r * job.offsets_stride] : 0,
            job.indices_64 ? nullptr : reinterpret_cast<int32_t*>(idx),
            job.indices_64 ? reinterpret_cast<int64_t*>(idx) : nullptr,
            job.values ? reinterpret_cast<uint16_t*>(job.values + r * job.values_row_bytes) : nullptr, nullptr);
}

void write_nan_row(const TopkJob& job, int64_t r) {
  char* idx = job.indices + r * job.indices_row_bytes;
  for (int64_t j = 0; j < job.k; ++j) {
    if (job.indices_64) {
      const int64_t v = kNanRowMarker;
      std::memcpy(idx + 8 * j, &v, 8);
    } else {
      const int32_t v = kNanRowMarker;
      std::memcpy(idx + 4 * j, &v, 4);
    }
  }
  if (!job.values) return;
  char* val = job.values + r * job.values_row_bytes;
  for (int64_t j = 0; j < job.k; ++j) {
    if (job.bf16) {
      const uint16_t nan = 0x7FC0;
      std::memcpy(val + 2 * j, &nan, 2);
    } else {
      const uint32_t nan = 0x7FC00000u;
      std::memcpy(val + 4 * j, &nan, 4);
    }
  }
}

}  // namespace tessera::select::detail
