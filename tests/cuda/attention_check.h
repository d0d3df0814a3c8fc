// What the attention tests share: inputs exact in every dtype, the op's output and gradients on a
// device in a dtype, and their comparison against a reference with a relative-error bound per
// dtype (tests/cuda/test_attention.cpp, test_cudnn_attention.cpp).
#pragma once
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <optional>
#include <string>

#include "common/compare.h"
#include "common/gradcheck.h"
#include "cuda/exact_input.h"

namespace brisk::testing {

struct Outputs {
  Tensor y, dq, dk, dv;  // on the CPU
};

struct Inputs {
  Tensor q, k, v, gy;  // f32 on the CPU
};

inline Inputs make_inputs(int64_t B, int64_t H, int64_t T, int64_t D, uint64_t seed) {
  return {exact_input({B, H, T, D}, seed), exact_input({B, H, T, D}, seed + 1), exact_input({B, H, T, D}, seed + 2),
          exact_input({B, H, T, D}, seed + 3)};
}

// The op's output and gradients (for the upstream gradient gy) on `dev` in `dt`.
inline Outputs run(const Inputs& in, DType dt, Device dev, bool causal, std::optional<double> scale = std::nullopt) {
  Tensor q = leaf(in.q.to(dt).to(dev)), k = leaf(in.k.to(dt).to(dev)), v = leaf(in.v.to(dt).to(dev));
  Tensor y = scaled_dot_product_attention(q, k, v, {.is_causal = causal, .scale = scale});
  y.backward(in.gy.to(dt).to(dev));
  return {y.detach().to(kCPU), q.grad().to(kCPU), k.grad().to(kCPU), v.grad().to(kCPU)};
}

inline void expect_outputs_close(const Outputs& got, const Outputs& want, double bound, const std::string& what) {
  const char* names[] = {"output", "dq", "dk", "dv"};
  const Tensor* g[] = {&got.y, &got.dq, &got.dk, &got.dv};
  const Tensor* w[] = {&want.y, &want.dq, &want.dk, &want.dv};
  for (int i = 0; i < 4; ++i) {
    const double e = relative_error(*g[i], *w[i]);
    EXPECT_LE(e, bound) << what << ": " << names[i] << " relative error " << e << " > " << bound;
  }
}

// Relative error bounds against the f32 CPU reference. The fused kernels round P (and dS) to the
// input dtype before the tensor-core products and round their outputs; the blocked path also
// rounds the scores and gradients of P to it, so it is compared with a wider bound. f32 (and
// f64, blocked) differ from the CPU by summation order only.
inline double fused_bound(DType dt) {
  return dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : 1e-5;
}
inline double blocked_bound(DType dt) {
  return dt == DType::BF16 ? 6e-2 : dt == DType::F16 ? 1e-2 : 1e-5;
}

inline std::string describe(DType dt, bool causal, int64_t T, int64_t D) {
  return std::string(dtype_name(dt)) + (causal ? " causal" : " full") + " T=" + std::to_string(T) +
         " D=" + std::to_string(D);
}

}  // namespace brisk::testing
