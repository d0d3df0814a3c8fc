// Every public kernel op as a runnable case, shared by the CUDA coverage test (recording mode,
// no GPU needed) and the every-op test (a real GPU against the CPU). A case makes its inputs on
// the CPU from a fixed seed, moves them to the device under test, runs the op (forward and, as
// separate cases, backward kernels), and returns its outputs; the harness moves them back and
// compares. Cases register themselves from the cases_*.cpp files, one per kernel family.
#pragma once
#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/elementwise.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace brisk::testing {

struct CaseEnv {
  Device device = kCPU;
  DType dtype = DType::F32;
  bool strided = false;  // inputs are non-contiguous views (every other element of a wider buffer)

  // Uniform values in [lo, hi) of `sizes` in this env's dtype on its device; the same values on
  // every device for a given seed. With `strided`, a view with stride 2 along the last dim.
  Tensor input(const Shape& sizes, uint64_t seed, double lo = -2.0, double hi = 2.0) const;
  // Like input() in a given dtype (e.g. I64 class indices with lo/hi bounds, or Bool masks).
  Tensor input_as(const Shape& sizes, DType dt, uint64_t seed, double lo, double hi) const;
  // A CPU tensor moved to this env's device (made contiguous; never strided).
  Tensor on_device(const Tensor& cpu) const { return kernels::to_device(cpu, device); }
};

struct OpCase {
  std::string op;       // the public kernel function this case runs (as declared in the headers)
  std::string variant;  // what this case exercises, for messages ("relu", "keepdim", ...)
  // The dtypes the case runs in; every case covers at least F32, F16 and BF16.
  std::vector<DType> dtypes = {DType::F32, DType::F16, DType::BF16};
  std::function<std::vector<Tensor>(const CaseEnv&)> run;
  // Multiplies the per-dtype tolerances (matmul- and reduction-heavy ops differ more between
  // the CPU's and the GPU's summation orders).
  double tolerance_scale = 1.0;
  // Outputs compared exactly (indices, masks, integer results) regardless of dtype.
  bool exact = false;
};

// The floating dtypes most cases run in.
inline const std::vector<DType> kFloatingDTypes = {DType::F64, DType::F32, DType::F16, DType::BF16};

// An input of uniform values in [-1, 1) (the range the products and convolutions are checked in).
inline Tensor in(const CaseEnv& e, const Shape& s, uint64_t seed) {
  return e.input(s, seed, -1.0, 1.0);
}

// Registers cases at static-initialisation time: `const CaseRegistrar conv_cases{{...}, {...}};`
// (a name of the file's own: the files are compiled together in unity batches).
struct CaseRegistrar {
  CaseRegistrar(std::initializer_list<OpCase> cases);
};
const std::vector<OpCase>& all_cases();

// Per-dtype comparison tolerances (rtol, atol).
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance_for(DType dt);

// Names of the functions declared in the kernels library's op headers (conv, elementwise,
// factory, index, linalg, nn, optim, reduce), read from the source tree, minus helpers that are
// not ops (listed with their reason in op_cases.cpp).
std::vector<std::string> declared_kernel_ops();

}  // namespace brisk::testing
