// tessera::select::topk: argument validation (everything is checked before any output is written),
// then the scheduler (topk_schedule.cc).
#include <climits>
#include <cmath>

#include "select/topk_job.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/select.h"

namespace tessera::select {
namespace {

constexpr const char* kFn = "topk";

void check_row_vector(const char* arg, const TensorView& t, int64_t rows) {
  check_defined(kFn, arg, t);
  check_dtype(kFn, arg, t, {DType::kI32});
  check_ndim(kFn, arg, t, {1});
  check_dim(kFn, arg, t, 0, rows, "the number of input rows");
}

void check_output(const char* arg, const TensorView& t, int64_t rows, int k) {
  check_defined(kFn, arg, t);
  check_ndim(kFn, arg, t, {2});
  check_dim(kFn, arg, t, 0, rows, "the number of input rows");
  check_dim(kFn, arg, t, 1, k, "topk");
  check_row_major(kFn, arg, t);
}

// Range checks on begin/end values (done before any output is touched).
void check_ranges(const detail::TopkJob& job) {
  for (int64_t r = 0; r < job.rows; ++r) {
    const int64_t b = job.row_begin(r), e = job.row_end(r);
    TESSERA_CHECK(e >= 0 && e <= job.cols, kFn, ": argument 'end' must hold values in [0, vocab_size = ", job.cols,
                  "], got end[", r, "] = ", e);
    TESSERA_CHECK(b >= 0 && b <= e, kFn, ": argument 'begin' must hold values in [0, end[i]], got begin[", r, "] = ", b,
                  " with end[", r, "] = ", e);
    // int32 indices: every index the row can return, shifted by its offset, must stay an int32.
    if (job.offsets && !job.indices_64 && e > b) {
      const int64_t off = job.offsets[r * job.offsets_stride], lo = off + b, hi = off + e - 1;
      TESSERA_CHECK(lo >= INT32_MIN && hi <= INT32_MAX, kFn, ": argument 'output_idx_offset' moves row ", r,
                    "'s indices [", b, ", ", e, ") to [", lo, ", ", hi,
                    "], outside int32: use int64 indices "
                    "(indices_type=int64) or a smaller offset");
    }
  }
}

}  // namespace

std::pair<int, int> get_stride_requirement() {
  return {1024, 32};
}

void topk(const TensorView& input, int topk, const TensorView* begin, const TensorView* end,
          const TensorView* output_val, const TensorView& output_idx, const TensorView* output_idx_offset,
          const TopkOptions& options) {
  check_defined(kFn, "input", input);
  check_dtype(kFn, "input", input, {DType::kBF16, DType::kF32});
  check_ndim(kFn, "input", input, {2});
  const int64_t rows = input.size(0), cols = input.size(1);
  TESSERA_CHECK(input.stride(1) == 1 || cols <= 1, kFn,
                ": argument 'input' must have stride(1) == 1 (contiguous rows), got strides ", input.strides_str());
  TESSERA_CHECK(cols < int64_t(INT_MAX), kFn, ": argument 'input' must have fewer than 2^31 - 1 columns, got ", cols);
  TESSERA_CHECK(topk >= 1 && topk <= kMaxTopk, kFn, ": argument 'topk' must be in [1, ", kMaxTopk, "], got ", topk);
  TESSERA_CHECK(!(options.sorted && options.sorted_index), kFn,
                ": arguments 'sorted' and 'sorted_index' cannot both be True");
  TESSERA_CHECK(!(options.sorted && !output_val), kFn,
                ": argument 'sorted' needs the values (return_value=True / output_val given)");
  if (begin) check_row_vector("begin", *begin, rows);
  if (end) check_row_vector("end", *end, rows);
  if (output_idx_offset) check_row_vector("output_idx_offset", *output_idx_offset, rows);
  check_output("output_idx", output_idx, rows, topk);
  check_dtype(kFn, "output_idx", output_idx, {DType::kI32, DType::kI64});
  const bool idx64 = output_idx.dtype == DType::kI64;
  TESSERA_CHECK(idx64 || (options.idx_oob_fill_value >= INT32_MIN && options.idx_oob_fill_value <= INT32_MAX), kFn,
                ": argument 'idx_oob_fill_value' must fit the int32 indices, got ", options.idx_oob_fill_value);
  if (output_val) {
    check_output("output_val", *output_val, rows, topk);
    TESSERA_CHECK(output_val->dtype == input.dtype, kFn, ": argument 'output_val' must have the input's dtype ",
                  dtype_name(input.dtype), ", got ", dtype_name(output_val->dtype));
    check_no_overlap(kFn, "output_val", *output_val, "output_idx", output_idx);
  }
  const TensorView* inputs[] = {&input, begin, end, output_idx_offset};
  const char* input_names[] = {"input", "begin", "end", "output_idx_offset"};
  for (int i = 0; i < 4; ++i) {
    if (!inputs[i]) continue;
    check_no_overlap(kFn, "output_idx", output_idx, input_names[i], *inputs[i]);
    if (output_val) check_no_overlap(kFn, "output_val", *output_val, input_names[i], *inputs[i]);
  }

  detail::TopkJob job{};
  job.input = static_cast<const char*>(input.data);
  job.input_row_bytes = input.stride(0) * dtype_storage_bytes(input.dtype);
  job.bf16 = input.dtype == DType::kBF16;
  job.rows = rows;
  job.cols = cols;
  job.k = topk;
  job.begin = begin ? begin->ptr<const int32_t>() : nullptr;
  job.begin_stride = begin ? begin->stride(0) : 0;
  job.end = end ? end->ptr<const int32_t>() : nullptr;
  job.end_stride = end ? end->stride(0) : 0;
  job.values = output_val ? static_cast<char*>(output_val->data) : nullptr;
  job.values_row_bytes = output_val ? output_val->stride(0) * dtype_storage_bytes(output_val->dtype) : 0;
  job.indices = static_cast<char*>(output_idx.data);
  job.indices_row_bytes = output_idx.stride(0) * (idx64 ? 8 : 4);
  job.indices_64 = idx64;
  job.offsets = output_idx_offset ? output_idx_offset->ptr<const int32_t>() : nullptr;
  job.offsets_stride = output_idx_offset ? output_idx_offset->stride(0) : 0;
  job.options = options;
  job.value_fill_bits = job.bf16 ? f32_to_bf16(options.value_oob_fill_value) : f32_bits(options.value_oob_fill_value);
  check_ranges(job);
  if (rows == 0) return;

  const int64_t nan_row = detail::run_topk(job);
  TESSERA_CHECK(nan_row < 0, kFn, ": argument 'input' row ", nan_row,
                " contains NaN (abort_when_nan_found=True); rows without NaN were written, rows with NaN were "
                "left untouched");
}

}  // namespace tessera::select
