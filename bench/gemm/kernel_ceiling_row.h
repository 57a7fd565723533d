// The GEMM suite's diagnostic row: the packed bf16 GEMM's micro-kernel alone over packed panels in L2
// (tessera::measure_gemm_kernel_ceiling), as a percent of the bf16 peak measured right after it. The
// summary divides the M >= 128 rows by it: what the driver around the kernel keeps of the kernel's rate.
#pragma once

#include <vector>

#include "bench.h"

namespace tessera::bench {

// The row's op is "bf16_ukr_<kernel set>" (m = a-block rows, n = b-block columns, k = kc, per thread).
constexpr const char* kKernelCeilingOpPrefix = "bf16_ukr_";

// Measures the row; false (and nothing added) where no kernel set is measured (below AVX512_BF16).
bool add_kernel_ceiling_row(const MachineLimits& start, std::vector<Row>* rows);

}  // namespace tessera::bench
