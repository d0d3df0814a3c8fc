// The case registry and the header scan behind the CUDA coverage and every-op tests.
#include "cuda/op_cases.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace brisk::testing {

namespace {

std::vector<OpCase>& registry() {
  static std::vector<OpCase> cases;
  return cases;
}

// Declared in the op headers but not ops: no device to run on, or plain helpers.
const std::set<std::string>& not_ops() {
  static const std::set<std::string> names = {
      "pool_output_size",  // shape arithmetic
      "op_name",           // enum names
      "gemm",              // raw row-major GEMM on host pointers (the CPU building block of matmul)
      "cpu_gemm",          // which library computes CPU GEMMs, and its switch
      "set_cpu_gemm",
      "cpu_gemm_available",
      "cpu_gemm_description",
      "cpu_bf16_dot",  // whether CPU bf16 products use AVX512_BF16, and its switch
      "cpu_bf16_dot_available",
      "set_cpu_bf16_dot",
      "randperm",                           // takes no device: always a CPU tensor (samplers use it on the host)
      "fused_residual_layer_norm_enabled",  // reads an environment switch
      "gelu_epilogue_fallback_reason",      // why the last fused GELU product ran unfused
      "dgelu_epilogue",                     // reads an environment switch (matmul_dgelu's epilogue)
      // CPU only: max_pool2d's one-byte argmax for a backward pass (the GPU keeps i64 indices;
      // max_pool2d_taps_supported says false for CUDA tensors and autograd uses max_pool2d there).
      "max_pool2d_taps_supported",
      "max_pool2d_taps",
      "max_pool2d_taps_backward",
  };
  return names;
}

}  // namespace

CaseRegistrar::CaseRegistrar(std::initializer_list<OpCase> cases) {
  for (const OpCase& c : cases) registry().push_back(c);
}

const std::vector<OpCase>& all_cases() {
  return registry();
}

Tensor CaseEnv::input_as(const Shape& sizes, DType dt, uint64_t seed, double lo, double hi) const {
  Generator gen(seed);
  Shape wide = sizes;
  const bool make_strided = strided && !sizes.empty() && shape_numel(sizes) > 1;
  if (make_strided) wide.back() *= 2;
  Tensor base = rand(wide, {.dtype = DType::F64}, &gen);
  base =
      kernels::binary_scalar(kernels::BinaryOp::Add, kernels::binary_scalar(kernels::BinaryOp::Mul, base, hi - lo), lo);
  if (dt == DType::Bool) {
    base = kernels::compare_scalar(kernels::CompareOp::Gt, base, (lo + hi) / 2);
  } else if (!is_floating(dt)) {
    std::vector<double> v = base.to_vector<double>();
    for (double& x : v) x = std::floor(x);
    base = from_vector<double>(v, wide);
  }
  Tensor typed = kernels::cast(base, dt);
  Tensor dev = kernels::to_device(typed, device);
  if (!make_strided) return dev;
  Strides st = contiguous_strides(wide);
  st.back() = 2;
  return dev.as_strided(sizes, st, dev.offset());
}

Tensor CaseEnv::input(const Shape& sizes, uint64_t seed, double lo, double hi) const {
  return input_as(sizes, dtype, seed, lo, hi);
}

Tolerance tolerance_for(DType dt) {
  switch (dt) {
    case DType::F64:
      return {1e-7, 1e-7};
    case DType::F32:
      return {1.3e-6, 1e-5};
    case DType::F16:
      return {1e-3, 1e-5};
    case DType::BF16:
      return {1.6e-2, 1e-5};
    default:
      return {0, 0};
  }
}

std::vector<std::string> declared_kernel_ops() {
  const std::string dir = std::string(BRISK_SOURCE_DIR) + "/kernels/include/brisk/kernels/";
  // A declaration at the start of a line: a return type, then the function's name and '('.
  const std::regex decl(R"(^(?:[A-Za-z_][A-Za-z_0-9:<>]*)\s+([a-z_][a-z_0-9]*)\()");
  std::set<std::string> names;
  for (const char* header :
       {"conv.h", "elementwise.h", "factory.h", "index.h", "linalg.h", "nn.h", "optim.h", "reduce.h"}) {
    std::ifstream in(dir + header);
    if (!in) throw std::runtime_error("cannot read " + dir + header);
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_search(line, m, decl) && !not_ops().count(m[1])) names.insert(m[1]);
    }
  }
  return {names.begin(), names.end()};
}

}  // namespace brisk::testing
