// Differentiable indexing ops: each computes through kernels/index.h and records a node whose
// backward is the adjoint indexing op (gather <-> scatter_add, index_select -> index_add_,
// cat -> narrow, pad -> pad with negated pads, masks -> the same mask on the gradient).
#include "brisk/autograd/ops_index.h"

#include <algorithm>

#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_shape.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/index.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;

namespace {

// `t` placed at the origin of a zero tensor of `shape` (t fits inside it): the gradient of a
// src that is larger than its index.
Tensor zero_extend(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  Tensor z = zeros(shape, {t.dtype(), t.device()});
  kernels::copy_(z.as_strided(t.sizes(), z.strides(), z.offset()), t);
  return z;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  profiler::Scope prof_scope("cat");
  Tensor out = kernels::cat(tensors, dim);
  const int64_t d = wrap_dim(dim, tensors[0].dim(), "cat");
  std::vector<int64_t> sizes;
  sizes.reserve(tensors.size());
  for (const Tensor& t : tensors) sizes.push_back(t.size(d));
  record("cat", tensors, out, [d, sizes](const GradCtx& g) -> std::vector<Tensor> {
    const Tensor& gr = g.grad();
    std::vector<Tensor> r(sizes.size());
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (g.needs(i)) {
        ViewMeta m = narrow_meta(gr.sizes(), gr.strides(), gr.offset(), d, start, sizes[i]);
        r[i] = gr.as_strided(m.sizes, m.strides, m.offset);
      }
      start += sizes[i];
    }
    return r;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  profiler::Scope prof_scope("stack");
  Tensor out = kernels::stack(tensors, dim);
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  const size_t n = tensors.size();
  record("stack", tensors, out, [d, n](const GradCtx& g) -> std::vector<Tensor> {
    const Tensor& gr = g.grad();
    std::vector<Tensor> r(n);
    for (size_t i = 0; i < n; ++i) {
      if (!g.needs(i)) continue;
      ViewMeta m = select_meta(gr.sizes(), gr.strides(), gr.offset(), d, static_cast<int64_t>(i));
      r[i] = gr.as_strided(m.sizes, m.strides, m.offset);
    }
    return r;
  });
  return out;
}

namespace {

// The pieces of x along dim with the given sizes (summing to its size there), as views recorded
// by one node: its backward is a single cat of the pieces' gradients (zeros for a piece that got
// none), where one narrow node per piece would each scatter into a zero tensor of x's full size
// and the engine would then add those up (a transformer's q/k/v split paid 3 full-size zero
// fills, copies and 2 adds per layer).
std::vector<Tensor> split_pieces(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    ViewMeta m = narrow_meta(x.sizes(), x.strides(), x.offset(), dim, start, s);
    out.push_back(x.as_strided(m.sizes, m.strides, m.offset));
    start += s;
  }
  record("split", {x}, out, [dim](const GradCtx& g) -> std::vector<Tensor> {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < g.num_grads(); ++i) grads.push_back(g.grad(i));
    return {kernels::cat(grads, dim)};
  });
  return out;
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  BRISK_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.size(dim);
  BRISK_CHECK(split_size > 0 || (split_size == 0 && size == 0), "split: split_size must be positive, got ", split_size,
              " (dim ", dim, " of shape ", x.sizes(), ")");
  if (size == 0) return {narrow(x, dim, 0, 0)};
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < size; start += split_size) sizes.push_back(std::min(split_size, size - start));
  return split_pieces(x, sizes, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  BRISK_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    BRISK_CHECK(s >= 0, "split: split sizes ", sizes, " contain a negative size");
    total += s;
  }
  BRISK_CHECK(total == x.size(dim), "split: split sizes ", sizes, " sum to ", total, " but dim ", dim, " of shape ",
              x.sizes(), " has size ", x.size(dim));
  return split_pieces(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  BRISK_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  BRISK_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.size(dim);
  if (size == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(x, (size + chunks - 1) / chunks, dim);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  profiler::Scope prof_scope("index_select");
  Tensor out = kernels::index_select(x, dim, index);
  record("index_select", {x}, out,
         [in = x.sizes(), dim, index](const GradCtx& g) -> std::vector<Tensor> {
           Tensor z = zeros(in, {g.grad().dtype(), g.grad().device()});
           kernels::index_add_(z, dim, index, g.grad());
           return {z};
         },
         {index});
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  profiler::Scope prof_scope("gather");
  Tensor out = kernels::gather(x, dim, index);
  record("gather", {x}, out,
         [in = x.sizes(), dim, index](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::scatter_add(zeros(in, {g.grad().dtype(), g.grad().device()}), dim, index, g.grad())};
         },
         {index});
  return out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  profiler::Scope prof_scope("scatter");
  Tensor out = kernels::scatter(x, dim, index, src);
  record("scatter", {x, src}, out,
         [dim, index, src_shape = src.sizes()](const GradCtx& g) -> std::vector<Tensor> {
           const Tensor& gr = g.grad();
           Tensor gx, gsrc;
           // Overwritten positions of x do not reach the output.
           if (g.needs(0)) gx = kernels::scatter(gr, dim, index, zeros(index.sizes(), {gr.dtype(), gr.device()}));
           // With duplicate targets only the last write reaches the output; the others get zero.
           if (g.needs(1)) {
             Tensor pos = arange(index.numel()).as_strided(index.sizes(), contiguous_strides(index.sizes()), 0);
             Tensor last = kernels::scatter(zeros(gr.sizes(), {.dtype = DType::I64}), dim, index, pos);
             Tensor won = kernels::compare(kernels::CompareOp::Eq, kernels::gather(last, dim, index), pos);
             Tensor picked = kernels::gather(gr, dim, index);
             gsrc = zero_extend(kernels::where(won, picked, zeros({}, {gr.dtype(), gr.device()})), src_shape);
           }
           return {gx, gsrc};
         },
         {index});
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  profiler::Scope prof_scope("scatter_add");
  Tensor out = kernels::scatter_add(x, dim, index, src);
  record("scatter_add", {x, src}, out,
         [dim, index, src_shape = src.sizes()](const GradCtx& g) -> std::vector<Tensor> {
           Tensor gsrc;
           if (g.needs(1)) gsrc = zero_extend(kernels::gather(g.grad(), dim, index), src_shape);
           return {g.needs(0) ? g.grad() : Tensor(), gsrc};
         },
         {index});
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  profiler::Scope prof_scope("masked_fill");
  Tensor out = kernels::masked_fill(x, mask, value);
  record("masked_fill", {x}, out,
         [mask](const GradCtx& g) -> std::vector<Tensor> { return {kernels::masked_fill(g.grad(), mask, 0.0)}; },
         {mask});
  return out;
}

Tensor tril(const Tensor& x, int64_t k) {
  Tensor out = kernels::tril(x, k);
  record("tril", {x}, out, [k](const GradCtx& g) -> std::vector<Tensor> { return {kernels::tril(g.grad(), k)}; });
  return out;
}

Tensor triu(const Tensor& x, int64_t k) {
  Tensor out = kernels::triu(x, k);
  record("triu", {x}, out, [k](const GradCtx& g) -> std::vector<Tensor> { return {kernels::triu(g.grad(), k)}; });
  return out;
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  profiler::Scope prof_scope("pad");
  Tensor out = kernels::pad(x, pads, value);
  std::vector<int64_t> back(pads.size());
  std::transform(pads.begin(), pads.end(), back.begin(), [](int64_t p) { return -p; });
  // Padding by the negated amounts crops the padding away and zero-fills what was cropped.
  record("pad", {x}, out,
         [back](const GradCtx& g) -> std::vector<Tensor> { return {kernels::pad(g.grad(), back, 0.0)}; });
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  return kernels::one_hot(indices, num_classes);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  return kernels::multinomial(probs, num_samples, replacement, gen);
}

}  // namespace brisk
