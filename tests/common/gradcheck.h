// Test helpers: float64 finite-difference gradient checks (central difference, eps 1e-6,
// atol 1e-5, rtol 1e-3, the project's default tolerances) and non-contiguous copies of inputs.
#pragma once
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <functional>
#include <string>
#include <vector>

namespace brisk::testing {

// The storage offset of flat (C-order) element i of t.
inline int64_t element_offset(const Tensor& t, int64_t i) {
  int64_t off = t.offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (i % t.size(d)) * t.stride(d);
    i /= t.size(d);
  }
  return off;
}

// A one-element view of element i, for reading and perturbing in place.
inline Tensor element(const Tensor& t, int64_t i) {
  return t.as_strided({}, {}, element_offset(t, i));
}

// The same values in a non-contiguous layout: every element sits at twice its contiguous
// position inside a bigger buffer, and dims are stored in reverse order.
inline Tensor noncontiguous(const Tensor& t) {
  if (t.dim() == 0) return t.clone().detach();
  Shape rev(t.sizes().rbegin(), t.sizes().rend());
  rev.back() *= 2;
  Tensor big = zeros(rev, {t.dtype(), t.device()});
  // sizes = t.sizes(), strides of the reversed, step-2 buffer.
  Strides rs = contiguous_strides(rev);
  rs.back() *= 2;
  Strides st(static_cast<size_t>(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) st[d] = rs[t.dim() - 1 - d];
  Tensor out = big.as_strided(t.sizes(), st, 0);
  kernels::copy_(out, t.detach());
  EXPECT_FALSE(out.is_contiguous() && t.numel() > 1);
  return out;
}

// Leaf f64 inputs that require grad.
inline Tensor leaf(const Tensor& t) {
  Tensor x = t.detach();
  x.requires_grad_(true);
  return x;
}

// Compares d(sum(fn(x) * w))/dx from autograd with central finite differences, for random w
// (and for every one-hot w when the output is small: the whole Jacobian).
inline void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs, const std::string& what = "", double eps = 1e-6,
                             double atol = 1e-5, double rtol = 1e-3) {
  for (const Tensor& x : inputs) {
    ASSERT_EQ(x.dtype(), DType::F64) << what << ": gradcheck runs in f64";
    ASSERT_TRUE(x.requires_grad()) << what << ": gradcheck inputs must require grad";
  }
  Tensor y0 = fn(inputs);
  const int64_t ny = y0.numel();
  std::vector<Tensor> weights;
  Generator gen(1234);
  weights.push_back(randn(y0.sizes(), {.dtype = DType::F64}, &gen));
  if (ny <= 32) {
    for (int64_t j = 0; j < ny; ++j) {
      Tensor w = zeros(y0.sizes(), {.dtype = DType::F64});
      kernels::fill_(element(w, j), 1.0);
      weights.push_back(w);
    }
  }
  for (const Tensor& w : weights) {
    for (const Tensor& x : inputs) x.set_grad(Tensor());
    Tensor y = fn(inputs);
    y.backward(w);
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& x = inputs[k];
      Tensor g = x.grad();
      for (int64_t i = 0; i < x.numel(); ++i) {
        Tensor xi = element(x, i);
        const double orig = xi.item<double>();
        double fp, fm;
        {
          NoGradGuard ng;
          kernels::fill_(xi, orig + eps);
          fp = (fn(inputs) * w).sum().item<double>();
          kernels::fill_(xi, orig - eps);
          fm = (fn(inputs) * w).sum().item<double>();
          kernels::fill_(xi, orig);
        }
        const double numeric = (fp - fm) / (2 * eps);
        const double analytic = g.defined() ? element(g, i).item<double>() : 0.0;
        EXPECT_NEAR(analytic, numeric, atol + rtol * std::abs(numeric))
            << what << ": input " << k << " element " << i << " (shape " << shape_str(x.sizes()) << ")";
      }
    }
  }
}

// Runs expect_gradcheck on contiguous inputs, then on non-contiguous copies of them.
inline void expect_gradcheck_layouts(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                     const std::vector<Tensor>& values, const std::string& what = "") {
  std::vector<Tensor> contig, strided;
  for (const Tensor& v : values) {
    contig.push_back(leaf(v.to(DType::F64).contiguous().clone().detach()));
    strided.push_back(leaf(noncontiguous(v.to(DType::F64).detach())));
  }
  expect_gradcheck(fn, contig, what + " (contiguous)");
  expect_gradcheck(fn, strided, what + " (non-contiguous)");
}

}  // namespace brisk::testing
