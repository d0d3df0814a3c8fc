// Differentiable elementwise ops and the arithmetic operators (namespace brisk, found by ADL).
// Binary ops broadcast like NumPy; their gradients are summed back to each input's shape.
#pragma once
#include <optional>
#include <string_view>

#include "brisk/core/tensor.h"

namespace brisk {

Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: None (erf, the default) or Tanh.
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
// Given a tensor nobody else holds (a temporary: `relu(conv(x))`, or std::move of the last
// handle), these write their result over its memory instead of allocating: the same values and
// gradients, one activation fewer to allocate and keep (docs/how-brisk-works.md, "Reusing memory
// nobody else can see"). With any other handle, view or saved copy alive they allocate as usual.
Tensor relu(Tensor&& x);
Tensor sigmoid(Tensor&& x);
Tensor tanh(Tensor&& x);
Tensor exp(Tensor&& x);
// cond ? a : b (gradient flows to a where cond, to b elsewhere).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Comparisons give Bool tensors (no gradient).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);

// Operators. Scalars keep the tensor's dtype.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double s);
Tensor operator<=(const Tensor& a, double s);
Tensor operator>(const Tensor& a, double s);
Tensor operator>=(const Tensor& a, double s);

// In-place updates (no graph; for optimizers and initialisation under NoGradGuard).
// Throw when `t` requires grad and grad mode is on, as PyTorch does for leaves.
// `other` must broadcast to t's shape; t keeps its dtype. Every one bumps t's version, so a
// graph that saved t refuses to run its backward (see Node::saved).
const Tensor& add_(const Tensor& t, const Tensor& other, double alpha = 1.0);
const Tensor& add_(const Tensor& t, double s);
const Tensor& sub_(const Tensor& t, const Tensor& other, double alpha = 1.0);
const Tensor& sub_(const Tensor& t, double s);
const Tensor& mul_(const Tensor& t, const Tensor& other);
const Tensor& mul_(const Tensor& t, double s);
const Tensor& div_(const Tensor& t, const Tensor& other);
const Tensor& div_(const Tensor& t, double s);
const Tensor& fill_(const Tensor& t, double v);
const Tensor& zero_(const Tensor& t);
const Tensor& copy_(const Tensor& dst, const Tensor& src);
const Tensor& clamp_(const Tensor& t, std::optional<double> min, std::optional<double> max);

}  // namespace brisk
