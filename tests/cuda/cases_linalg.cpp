// CUDA cases of the linalg family: matmul (odd sizes, batched, broadcast batch dims, a shared
// operand on either side, 1-D operands, transposed and strided operands, empty products) and
// linear (with and without bias, the GELU epilogue fused and unfused, a transposed weight, no
// input features), and the GELU MLP's products (linear_gelu_aux and matmul_dgelu, through
// cuBLASLt's auxiliary-matrix epilogues and unfused). Inputs lie in [-1, 1]; the GPU sums in another order than Eigen,
// so the tolerances are scaled (fp32: rtol 1.3e-5, atol 1e-4).
#include <brisk/kernels/linalg.h>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

using kernels::LinearEpilogue;

constexpr double kBlasScale = 10;
// cuBLASLt's fused GELU may evaluate tanh less exactly than the CPU's std::tanh: fp32 rtol 3.9e-4,
// atol 3e-3 (bf16 and f16 are held to the bias-only cases' tolerances there).
constexpr double kGeluScale = 300;

// The transpose of a fresh (cols, rows) input: a column-major (rows, cols) matrix.
Tensor transposed(const CaseEnv& e, int64_t rows, int64_t cols, uint64_t seed) {
  return in(e, {cols, rows}, seed).t();
}

const CaseRegistrar linalg_cases{
    {.op = "matmul",
     .variant = "2-D, odd sizes, K longer than a block",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{kernels::matmul(in(e, {37, 19}, 1), in(e, {19, 23}, 2)),
                                      kernels::matmul(in(e, {5, 300}, 3), in(e, {300, 7}, 4))};
         },
     .tolerance_scale = kBlasScale},
    {.op = "matmul",
     .variant = "batched and broadcast batch dims",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{
               kernels::matmul(in(e, {3, 17, 9}, 5), in(e, {3, 9, 33}, 6)),      // one stride per operand
               kernels::matmul(in(e, {2, 1, 5, 7}, 7), in(e, {1, 3, 7, 6}, 8)),  // (2, 1) x (1, 3): both expanded
               kernels::matmul(in(e, {4, 6, 8}, 9), in(e, {8, 5}, 10)),          // shared right operand: folded
               kernels::matmul(in(e, {6, 8}, 11), in(e, {4, 8, 5}, 12)),         // shared left operand: stride 0
               kernels::matmul(in(e, {2, 3, 4, 5}, 13), in(e, {3, 5, 2}, 14)),   // 4-D against 3-D
           };
         },
     .tolerance_scale = kBlasScale},
    {.op = "matmul",
     .variant = "1-D operands",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor v = in(e, {13}, 15);
           return std::vector<Tensor>{kernels::matmul(v, in(e, {13}, 16)), kernels::matmul(in(e, {7, 13}, 17), v),
                                      kernels::matmul(v, in(e, {13, 5}, 18)), kernels::matmul(v, in(e, {3, 13, 5}, 19)),
                                      kernels::matmul(in(e, {2, 4, 13}, 20), v)};
         },
     .tolerance_scale = kBlasScale},
    {.op = "matmul",
     .variant = "transposed and strided operands",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor at = transposed(e, 11, 9, 21), bt = transposed(e, 9, 14, 22);
           Tensor batched = in(e, {3, 9, 11}, 23).transpose(1, 2);             // (3, 11, 9), column-major
           Tensor rows = in(e, {10, 32}, 24).as_strided({10, 9}, {32, 1}, 0);  // row stride 32 > 9
           Tensor permuted = in(e, {9, 2, 3, 11}, 25).permute({1, 2, 3, 0});   // batch strides not one run
           return std::vector<Tensor>{kernels::matmul(at, bt), kernels::matmul(at, in(e, {9, 14}, 26)),
                                      kernels::matmul(batched, bt), kernels::matmul(rows, bt),
                                      kernels::matmul(permuted, in(e, {9, 4}, 27))};
         },
     .tolerance_scale = kBlasScale},
    {.op = "matmul",
     .variant = "empty products",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{kernels::matmul(in(e, {4, 0}, 28), in(e, {0, 3}, 29)),         // K = 0: zeros
                                      kernels::matmul(in(e, {0, 3}, 30), in(e, {3, 4}, 31)),         // M = 0
                                      kernels::matmul(in(e, {2, 0, 5, 3}, 32), in(e, {3, 6}, 33))};  // empty batch
         },
     .tolerance_scale = kBlasScale},
    {.op = "linear",
     .variant = "with and without bias (bias epilogue)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = in(e, {5, 7, 16}, 40), w = in(e, {24, 16}, 41), b = in(e, {24}, 42);
           return std::vector<Tensor>{kernels::linear(x, w, b), kernels::linear(x, w, Tensor()),
                                      kernels::linear(in(e, {16}, 43), w, b),  // 1-D input: a single row
                                      kernels::linear(in(e, {9, 1}, 44), in(e, {3, 1}, 45), in(e, {3}, 46))};  // K = 1
         },
     .tolerance_scale = kBlasScale},
    {.op = "linear",
     .variant = "transposed weight, strided input, no input features",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = in(e, {16, 6}, 47).t();  // (6, 16) column-major
           Tensor wt = transposed(e, 24, 16, 48);
           return std::vector<Tensor>{kernels::linear(x, wt, in(e, {24}, 49)),
                                      kernels::linear(in(e, {3, 0}, 50), in(e, {4, 0}, 51), in(e, {4}, 52))};
         },
     .tolerance_scale = kBlasScale},
    {.op = "linear",
     .variant = "GELU epilogue, fused and unfused",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = in(e, {6, 33}, 53), w = in(e, {20, 33}, 54), b = in(e, {20}, 55);
           const LinearEpilogue g = LinearEpilogue::GeluTanh;
           return std::vector<Tensor>{
               kernels::linear(x, w, b, g), kernels::linear(x, w, Tensor(), g),
               kernels::linear(in(e, {1, 33}, 56), w, b, g),                               // one row: not fused
               kernels::linear(in(e, {2, 0}, 57), in(e, {5, 0}, 58), in(e, {5}, 59), g)};  // gelu(bias)
         },
     .tolerance_scale = kGeluScale},
    {.op = "linear_gelu_aux",
     .variant = "GELU_AUX_BIAS and GELU_AUX epilogues; unfused for 20 features and one row",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = in(e, {2, 6, 33}, 60), w = in(e, {24, 33}, 61), b = in(e, {24}, 62);
           const kernels::LinearGeluAux fused = kernels::linear_gelu_aux(x, w, b);
           const kernels::LinearGeluAux no_bias = kernels::linear_gelu_aux(x, w, Tensor());
           const kernels::LinearGeluAux odd =
               kernels::linear_gelu_aux(in(e, {6, 33}, 63), in(e, {20, 33}, 64), in(e, {20}, 65));
           const kernels::LinearGeluAux row = kernels::linear_gelu_aux(in(e, {1, 33}, 66), w, b);
           return std::vector<Tensor>{fused.out, fused.pre, no_bias.out, no_bias.pre,
                                      odd.out,   odd.pre,   row.out,     row.pre};
         },
     .tolerance_scale = kGeluScale},
    {.op = "matmul_dgelu",
     .variant = "DGELU epilogue (the bias gradient a ones-vector product); unfused for 20 features",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor g = in(e, {2, 6, 24}, 67), w = in(e, {24, 32}, 68), pre = in(e, {2, 6, 32}, 69);
           const kernels::MatmulDgelu with_bias = kernels::matmul_dgelu(g, w, pre, true);
           const kernels::MatmulDgelu without = kernels::matmul_dgelu(g, w, pre, false);
           const kernels::MatmulDgelu odd =
               kernels::matmul_dgelu(in(e, {6, 24}, 70), in(e, {24, 20}, 71), in(e, {6, 20}, 72), true);
           return std::vector<Tensor>{with_bias.grad_pre, with_bias.grad_bias, without.grad_pre, odd.grad_pre,
                                      odd.grad_bias};
         },
     .tolerance_scale = kGeluScale},
};

}  // namespace
}  // namespace brisk::testing
