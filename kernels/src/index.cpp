// Public indexing kernels: argument checks (naming the op, shapes and offending values),
// output allocation, device switch. On the CPU, indices become contiguous i64 and are range-checked
// before any write; on CUDA they stay on the device in their own dtype and the kernels check them
// (a bad one is an error at the next synchronisation), so no op copies indices to the host.
#include "brisk/kernels/index.h"

#include <algorithm>
#include <cmath>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "cpu/index_cpu.h"
#include "cuda/index.h"

namespace brisk::kernels {

namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  BRISK_CHECK(index.defined(), op, ": index is an undefined tensor");
  BRISK_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, op, ": index must be i32 or i64, got ",
              dtype_name(index.dtype()));
}

// A contiguous i64 copy (or the tensor itself) of an i32/i64 index tensor.
Tensor index_i64(const char* op, const Tensor& index) {
  check_index_dtype(op, index);
  return index.dtype() == DType::I64 ? contiguous(index) : cast(index, DType::I64);
}

// Throws unless every index lies in [0, size); runs before any write so that a bad index
// never leaves a half-written output (and never throws inside a parallel loop).
void check_index_range(const char* op, const Tensor& idx, int64_t size, int64_t dim, const Shape& shape) {
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0, end = idx.numel(); i < end; ++i)
    BRISK_CHECK(p[i] >= 0 && p[i] < size, op, ": index ", p[i], " is out of bounds for dim ", dim, " with size ", size,
                " (input shape ", shape, ")");
}

// 0-d tensors behave as shape [1] inside the kernels.
Tensor at_least_1d(const Tensor& t) {
  return t.dim() > 0 ? t : t.as_strided({1}, {1}, t.offset());
}

// gather/scatter: index has the input's ndim and fits inside it at every dim but `dim`.
void check_index_fits(const char* op, const Tensor& index, const Tensor& x, int64_t dim, const char* what) {
  BRISK_CHECK(index.dim() == x.dim(), op, ": index shape ", index.sizes(), " must have as many dims as the ", what,
              " shape ", x.sizes());
  for (int64_t d = 0; d < x.dim(); ++d)
    BRISK_CHECK(d == dim || index.size(d) <= x.size(d), op, ": index shape ", index.sizes(), " exceeds the ", what,
                " shape ", x.sizes(), " at dim ", d);
}

Tensor scatter_impl(const char* op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                    bool accumulate) {
  check_same_device(op, x, src);
  check_same_device(op, x, index);
  BRISK_CHECK(src.dtype() == x.dtype(), op, ": src dtype ", dtype_name(src.dtype()), " differs from input dtype ",
              dtype_name(x.dtype()));
  dim = wrap_dim(dim, x.dim(), op);
  check_index_fits(op, index, x, dim, "input");
  BRISK_CHECK(src.dim() == index.dim(), op, ": src shape ", src.sizes(), " must have as many dims as index shape ",
              index.sizes());
  for (int64_t d = 0; d < index.dim(); ++d)
    BRISK_CHECK(index.size(d) <= src.size(d), op, ": index shape ", index.sizes(), " exceeds src shape ", src.sizes(),
                " at dim ", d);
  Tensor x1 = at_least_1d(x);
  Tensor out = cast(x1, x.dtype());  // a contiguous copy to scatter into
  if (x.device().is_cuda()) {
    check_index_dtype(op, index);
    cuda::scatter(out, dim, at_least_1d(index), at_least_1d(src), accumulate);
  } else {
    Tensor idx = index_i64(op, index);
    check_index_range(op, idx, x1.size(dim), dim, x.sizes());
    if (idx.numel() > 0) cpu::scatter(out, dim, at_least_1d(idx), at_least_1d(src), accumulate);
  }
  return x.dim() > 0 ? out : out.as_strided({}, {}, out.offset());
}

void triangle_check(const char* op, const Tensor& x) {
  BRISK_CHECK(x.dim() >= 2, op, ": expected a tensor with at least 2 dims, got shape ", x.sizes());
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  BRISK_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  BRISK_CHECK(first.defined(), "cat: tensor 0 is undefined");
  BRISK_CHECK(first.dim() > 0, "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.sizes();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BRISK_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    BRISK_CHECK(t.dtype() == first.dtype(), "cat: tensor ", i, " has dtype ", dtype_name(t.dtype()),
                " but tensor 0 has dtype ", dtype_name(first.dtype()));
    check_same_device("cat", first, t);
    BRISK_CHECK(t.dim() == first.dim(), "cat: tensor ", i, " has shape ", t.sizes(), " with ", t.dim(),
                " dims but tensor 0 has shape ", first.sizes());
    for (int64_t d = 0; d < first.dim(); ++d)
      BRISK_CHECK(d == dim || t.size(d) == first.size(d), "cat: sizes must match except in dim ", dim,
                  ": tensor 0 has shape ", first.sizes(), ", tensor ", i, " has shape ", t.sizes());
    total += t.size(dim);
  }
  out_shape[dim] = total;
  Tensor out = empty(out_shape, first.dtype(), first.device());
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    if (t.numel() > 0) {
      ViewMeta m = narrow_meta(out.sizes(), out.strides(), out.offset(), dim, start, t.size(dim));
      copy_(out.as_strided(m.sizes, m.strides, m.offset), t);
    }
    start += t.size(dim);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  BRISK_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    BRISK_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    BRISK_CHECK(tensors[i].sizes() == first.sizes(), "stack: tensors must have the same shape: tensor 0 has shape ",
                first.sizes(), ", tensor ", i, " has shape ", tensors[i].sizes());
    BRISK_CHECK(tensors[i].dtype() == first.dtype(), "stack: tensor ", i, " has dtype ", dtype_name(tensors[i].dtype()),
                " but tensor 0 has dtype ", dtype_name(first.dtype()));
  }
  dim = wrap_dim(dim, first.dim() + 1, "stack");
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    ViewMeta m = unsqueeze_meta(t.sizes(), t.strides(), t.offset(), dim);
    views.push_back(t.as_strided(m.sizes, m.strides, m.offset));
  }
  return cat(views, dim);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_same_device("index_select", x, index);
  BRISK_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-D, got shape ", index.sizes());
  dim = wrap_dim(dim, x.dim(), "index_select");
  check_index_dtype("index_select", index);
  Tensor x1 = contiguous(at_least_1d(x));
  Shape os = x1.sizes();
  os[dim] = index.numel();
  Tensor out = empty(os, x.dtype(), x.device());
  if (x.device().is_cuda()) {
    cuda::index_select(x1, dim, contiguous(index), out);
  } else {
    Tensor idx = index_i64("index_select", index);
    check_index_range("index_select", idx, x1.size(dim), dim, x.sizes());
    if (out.numel() > 0) cpu::index_select(x1, dim, idx, out);
  }
  if (x.dim() == 0 && index.dim() == 0) return out.as_strided({}, {}, 0);
  return out;
}

void index_add_(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  check_same_device("index_add_", dst, src);
  check_same_device("index_add_", dst, index);
  BRISK_CHECK(src.dtype() == dst.dtype(), "index_add_: src dtype ", dtype_name(src.dtype()),
              " differs from destination dtype ", dtype_name(dst.dtype()));
  BRISK_CHECK(index.dim() <= 1, "index_add_: index must be 0-d or 1-D, got shape ", index.sizes());
  dim = wrap_dim(dim, dst.dim(), "index_add_");
  check_index_dtype("index_add_", index);
  Tensor d1 = at_least_1d(dst), s1 = at_least_1d(src);
  bool ok = s1.dim() == d1.dim() && s1.size(dim) == index.numel();
  for (int64_t d = 0; ok && d < d1.dim(); ++d) ok = d == dim || s1.size(d) == d1.size(d);
  BRISK_CHECK(ok, "index_add_: src shape ", src.sizes(), " must match destination shape ", dst.sizes(),
              " except at dim ", dim, ", where it must equal the index length ", index.numel());
  Tensor idx = dst.device().is_cuda() ? contiguous(index) : index_i64("index_add_", index);
  if (dst.device().is_cpu()) check_index_range("index_add_", idx, d1.size(dim), dim, dst.sizes());
  if (s1.numel() == 0) return;
  Tensor work = d1.is_contiguous() ? d1 : contiguous(d1);
  if (dst.device().is_cuda())
    cuda::index_add(work, dim, idx, contiguous(s1));
  else
    cpu::index_add(work, dim, idx, contiguous(s1));
  if (!work.is_same(d1)) copy_(d1, work);
  dst.bump_version();
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_same_device("gather", x, index);
  dim = wrap_dim(dim, x.dim(), "gather");
  check_index_fits("gather", index, x, dim, "input");
  check_index_dtype("gather", index);
  Tensor x1 = at_least_1d(x);
  Tensor out = empty(index.sizes(), x.dtype(), x.device());
  if (x.device().is_cuda()) {
    cuda::gather(x1, dim, at_least_1d(index), at_least_1d(out));
    return out;
  }
  Tensor idx = index_i64("gather", index);
  check_index_range("gather", idx, x1.size(dim), dim, x.sizes());
  if (out.numel() > 0) cpu::gather(x1, dim, at_least_1d(idx), at_least_1d(out));
  return out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl("scatter", x, dim, index, src, false);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl("scatter_add", x, dim, index, src, true);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_same_device("masked_fill", x, mask);
  BRISK_CHECK(mask.dtype() == DType::Bool || mask.dtype() == DType::U8, "masked_fill: mask must be bool, got ",
              dtype_name(mask.dtype()));
  BRISK_CHECK(broadcast_shapes(mask.sizes(), x.sizes(), "masked_fill") == x.sizes(), "masked_fill: mask shape ",
              mask.sizes(), " cannot be broadcast to input shape ", x.sizes());
  if (x.device().is_cuda()) {
    Tensor out = empty(x.sizes(), x.dtype(), x.device());
    cuda::masked_fill(x, mask, value, out);
    return out;
  }
  return where(mask, full({}, value, {x.dtype(), x.device()}), x);
}

Tensor tril(const Tensor& x, int64_t k) {
  triangle_check("tril", x);
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  if (x.device().is_cuda())
    cuda::triangle(contiguous(x), k, /*lower=*/true, out);
  else
    cpu::triangle(contiguous(x), k, /*lower=*/true, out);
  return out;
}

Tensor triu(const Tensor& x, int64_t k) {
  triangle_check("triu", x);
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  if (x.device().is_cuda())
    cuda::triangle(contiguous(x), k, /*lower=*/false, out);
  else
    cpu::triangle(contiguous(x), k, /*lower=*/false, out);
  return out;
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  BRISK_CHECK(x.defined(), "pad: undefined input");
  const int64_t nd = x.dim(), np = static_cast<int64_t>(pads.size()) / 2;
  BRISK_CHECK(pads.size() % 2 == 0, "pad: pads must have an even length, got ", pads);
  BRISK_CHECK(np <= nd, "pad: pads ", pads, " pad ", np, " dims but the input shape ", x.sizes(), " has only ", nd);
  Shape os = x.sizes();
  // Output coordinate o along a padded dim reads input coordinate o - left.
  Shape src_start(nd, 0), dst_start(nd, 0), len = x.sizes();
  for (int64_t i = 0; i < np; ++i) {
    const int64_t d = nd - 1 - i, l = pads[2 * i], r = pads[2 * i + 1];
    os[d] = x.size(d) + l + r;
    BRISK_CHECK(os[d] >= 0, "pad: pads ", pads, " give dim ", d, " of input shape ", x.sizes(), " a negative size ",
                os[d]);
    dst_start[d] = std::max<int64_t>(0, l);
    src_start[d] = std::max<int64_t>(0, -l);
    len[d] = std::min(os[d], x.size(d) + l) - dst_start[d];
  }
  // Filled where it lives (full() would build it on the host first).
  Tensor out = empty(os, x.dtype(), x.device());
  fill_(out, value);
  if (std::all_of(len.begin(), len.end(), [](int64_t n) { return n > 0; })) {
    int64_t xo = x.offset(), oo = out.offset();
    for (int64_t d = 0; d < nd; ++d) {
      xo += src_start[d] * x.stride(d);
      oo += dst_start[d] * out.stride(d);
    }
    copy_(out.as_strided(len, out.strides(), oo), x.as_strided(len, x.strides(), xo));
  }
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  if (indices.defined() && indices.device().is_cuda()) {
    check_index_dtype("one_hot", indices);
    Tensor idx = contiguous(indices);
    if (num_classes == -1) {
      BRISK_CHECK(idx.numel() > 0, "one_hot: cannot infer num_classes from an empty tensor of shape ", indices.sizes());
      num_classes = cuda::index_max(idx) + 1;  // synchronises: the shape depends on the values
    }
    BRISK_CHECK(num_classes >= 0, "one_hot: num_classes must be -1 or non-negative, got ", num_classes);
    Shape os = indices.sizes();
    os.push_back(num_classes);
    Tensor out = empty(os, DType::I64, indices.device());
    cuda::one_hot(idx, num_classes, out);
    return out;
  }
  Tensor idx = index_i64("one_hot", indices);
  const int64_t* p = idx.data<int64_t>();
  if (num_classes == -1) {
    BRISK_CHECK(idx.numel() > 0, "one_hot: cannot infer num_classes from an empty tensor of shape ", indices.sizes());
    num_classes = *std::max_element(p, p + idx.numel()) + 1;
  }
  BRISK_CHECK(num_classes >= 0, "one_hot: num_classes must be -1 or non-negative, got ", num_classes);
  for (int64_t i = 0, end = idx.numel(); i < end; ++i)
    BRISK_CHECK(p[i] >= 0 && p[i] < num_classes, "one_hot: class index ", p[i], " is out of range [0, ", num_classes,
                ") (indices shape ", indices.sizes(), ")");
  Shape os = indices.sizes();
  os.push_back(num_classes);
  Tensor out = zeros(os, {.dtype = DType::I64});
  if (out.numel() > 0) cpu::one_hot(idx, num_classes, out);
  return out;
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  BRISK_CHECK(probs.defined(), "multinomial: undefined probs");
  check_float("multinomial", probs);
  BRISK_CHECK(probs.dim() == 1 || probs.dim() == 2, "multinomial: probs must be 1-D or 2-D, got shape ", probs.sizes());
  const int64_t n = probs.size(-1), rows = probs.dim() == 2 ? probs.size(0) : 1;
  BRISK_CHECK(n > 0, "multinomial: probs of shape ", probs.sizes(), " has no categories");
  BRISK_CHECK(num_samples > 0, "multinomial: num_samples must be positive, got ", num_samples);
  BRISK_CHECK(replacement || num_samples <= n, "multinomial: cannot draw ", num_samples,
              " samples without replacement from ", n, " categories");
  Tensor p = cast(probs, DType::F64);  // always a fresh contiguous copy
  if (probs.device().is_cuda()) {
    // The rows are validated on the device, by the kernel that draws from them.
    Generator& g = gen ? *gen : default_generator();
    const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(rows * num_samples));
    Tensor out = empty({rows, num_samples}, DType::I64, probs.device());
    cuda::multinomial(p.as_strided({rows, n}, {n, 1}, p.offset()), num_samples, replacement, seed, base, out);
    return probs.dim() == 1 ? out.as_strided({num_samples}, {1}, out.offset()) : out;
  }
  const double* w = p.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = w[r * n + i];
      BRISK_CHECK(std::isfinite(v) && v >= 0, "multinomial: probs must be finite and non-negative, got ", v, " in row ",
                  r, " (shape ", probs.sizes(), ")");
      total += v;
      nonzero += v > 0;
    }
    BRISK_CHECK(total > 0, "multinomial: row ", r, " of probs (shape ", probs.sizes(), ") sums to zero");
    BRISK_CHECK(replacement || nonzero >= num_samples, "multinomial: row ", r, " has only ", nonzero,
                " nonzero categories, too few to draw ", num_samples, " samples without replacement");
  }
  Generator& g = gen ? *gen : default_generator();
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(rows * num_samples));
  Tensor out = empty({rows, num_samples}, DType::I64, kCPU);
  cpu::multinomial(p.as_strided({rows, n}, {n, 1}, p.offset()), num_samples, replacement, seed, base, out);
  return probs.dim() == 1 ? out.as_strided({num_samples}, {1}, out.offset()) : out;
}

}  // namespace brisk::kernels
