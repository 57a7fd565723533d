// A validated top-k call: raw pointers, byte strides and options, shared by the scheduler and the
// output writer (src/select/topk_api.cc builds it).
#pragma once

#include <cstdint>

#include "tessera/select.h"

namespace tessera::cpu {
struct SelectKernelTable;
}

namespace tessera::select::detail {

using SelectKernels = cpu::SelectKernelTable;  // select/topk_row.h
struct Bf16Selection;

struct TopkJob {
  const char* input;
  int64_t input_row_bytes;  // row stride in bytes
  bool bf16;
  int64_t rows, cols;
  int k;
  const int32_t* begin;  // nullptr = 0
  int64_t begin_stride;
  const int32_t* end;  // nullptr = cols
  int64_t end_stride;
  char* values;  // nullptr = not returned
  int64_t values_row_bytes;
  char* indices;
  int64_t indices_row_bytes;
  bool indices_64;
  const int32_t* offsets;  // nullptr = none
  int64_t offsets_stride;
  TopkOptions options;
  uint32_t value_fill_bits;  // value_oob_fill_value in the input's format

  int64_t row_begin(int64_t r) const { return begin ? begin[r * begin_stride] : 0; }
  int64_t row_end(int64_t r) const { return end ? end[r * end_stride] : cols; }
  const char* row_data(int64_t r) const { return input + r * input_row_bytes; }
};

// Writes row r's selected entries (count <= k, already in output order) and the fills after them.
void write_row(const TopkJob& job, int64_t r, const int32_t* keys, const int32_t* index, int64_t count);
// Writes row r of a bf16 input from its selection (select/topk_bf16.h): k entries in index order.
void emit_row_bf16(const TopkJob& job, int64_t r, const SelectKernels& kernels, const Bf16Selection& sel);
// Marks row r as containing NaN: every index kNanRowMarker, every value a quiet NaN.
void write_nan_row(const TopkJob& job, int64_t r);

// Runs every row over the thread pool. Returns the first row (lowest index) that held a NaN when
// options.abort_when_nan_found is set (that row is left unwritten), or -1.
int64_t run_topk(const TopkJob& job);

}  // namespace tessera::select::detail
