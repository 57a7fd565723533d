// The parameter description a kernel library carries (tessera_tl_signature_v1): enough to check and
// bind the arguments of a call without the program that produced it (the AOT path has only the .so).
//
//   tessera-tl-signature 1
//   kernel gemm
//   symbols M N
//   tensor A bfloat16 M 1024      <- dims: a constant or the name of a symbol
//   scalar alpha float32
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tl/ir.h"

namespace tessera::tl {

struct KernelSignature {
  struct Dim {
    int64_t value = 0;  // the constant, when symbol < 0
    int symbol = -1;    // index into symbols
  };
  struct Param {
    std::string name;
    bool is_tensor = false;
    DataType dtype = DataType::kFloat32;
    std::vector<Dim> dims;
  };
  std::string kernel;
  std::vector<std::string> symbols;
  std::vector<Param> params;
};

// Throws Error(kInvalidArgument) at the tensor's source line when a dim is neither a constant nor a
// symbol (T.Tensor((M * 2, K)) is not supported: declare a symbol for that dimension).
std::string kernel_signature(const Program& p);
// Throws Error(kRuntime) on malformed text.
KernelSignature parse_signature(const std::string& text);

}  // namespace tessera::tl
