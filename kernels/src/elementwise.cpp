// Public elementwise kernels: argument checks, output allocation, device switch.
#include "brisk/kernels/elementwise.h"

#include "as_dtype.h"
#include "brisk/kernels/dispatch.h"
#include "cpu/cpu_kernels.h"
#include "cuda/copy.h"
#include "cuda/elementwise.h"

namespace brisk::kernels {

const char* op_name(UnaryOp op) {
  static constexpr const char* names[] = {"neg",    "exp",        "log",  "sqrt",    "rsqrt", "abs", "relu",
                                          "gelu",   "gelu",       "silu", "sigmoid", "tanh",  "sin", "cos",
                                          "square", "reciprocal", "sign", "log1p",   "expm1"};
  return names[static_cast<int>(op)];
}
const char* op_name(BinaryOp op) {
  static constexpr const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  return names[static_cast<int>(op)];
}
const char* op_name(CompareOp op) {
  static constexpr const char* names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return names[static_cast<int>(op)];
}

namespace {

bool needs_float(UnaryOp op) {
  return !(op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu || op == UnaryOp::Square ||
           op == UnaryOp::Sign);
}

using detail::as_dtype;

// The caller's output tensor for an elementwise result of `sizes` and `dt` on `device`, checked;
// a fresh one when the caller gave none.
Tensor output_for(const char* op, const Tensor& out, const Shape& sizes, DType dt, Device device) {
  if (!out.defined()) return empty(sizes, dt, device);
  BRISK_CHECK(out.sizes() == sizes && out.dtype() == dt && out.device() == device && out.is_contiguous(), op,
              ": the output tensor is ", out.sizes(), " ", dtype_name(out.dtype()), " on ", out.device().str(),
              out.is_contiguous() ? "" : " (not contiguous)", ", expected a contiguous ", sizes, " ", dtype_name(dt),
              " on ", device.str());
  return out;
}
}  // namespace

Tensor unary(UnaryOp op, const Tensor& x, const Tensor& out_in) {
  BRISK_CHECK(x.dtype() != DType::Bool, op_name(op), ": not defined for bool tensors");
  Tensor in = x;
  if (needs_float(op) && !x.is_floating_point()) in = cast(x, DType::F32);
  Tensor out = output_for(op_name(op), out_in, in.sizes(), in.dtype(), in.device());
  if (in.device().is_cuda())
    cuda::unary(op, in, out);
  else
    cpu::unary(op, in, out);
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out_in) {
  check_same_device(op_name(op), grad, x);
  if (y.defined()) check_same_device(op_name(op), grad, y);
  BRISK_CHECK(grad.sizes() == x.sizes(), op_name(op), " backward: grad shape ", grad.sizes(),
              " differs from input shape ", x.sizes());
  Tensor out = output_for(op_name(op), out_in, x.sizes(), grad.dtype(), grad.device());
  const Tensor xs = as_dtype(x, grad.dtype());
  const Tensor ys = y.defined() ? as_dtype(y, grad.dtype()) : xs;
  if (grad.device().is_cuda())
    cuda::unary_backward(op, grad, xs, ys, out);
  else
    cpu::unary_backward(op, grad, xs, ys, out);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_same_device(name, a, b);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType dt = promote_types(a.dtype(), b.dtype());
  if (dt == DType::Bool) dt = DType::U8;
  if (op == BinaryOp::Div && !is_floating(dt)) dt = DType::F32;  // true division, as PyTorch
  Tensor out = empty(shape, dt, a.device());
  if (a.device().is_cuda())
    cuda::binary(op, as_dtype(a, dt), as_dtype(b, dt), out);
  else
    cpu::binary(op, as_dtype(a, dt), as_dtype(b, dt), out);
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first) {
  DType dt = a.dtype();
  if (dt == DType::Bool) dt = DType::U8;
  if (!is_floating(dt) && (op == BinaryOp::Div || s != static_cast<double>(static_cast<int64_t>(s)))) dt = DType::F32;
  Tensor out = empty(a.sizes(), dt, a.device());
  if (a.device().is_cuda())
    cuda::binary_scalar(op, as_dtype(a, dt), s, scalar_first, out);
  else
    cpu::binary_scalar(op, as_dtype(a, dt), s, scalar_first, out);
  return out;
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_same_device(name, a, b);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, DType::Bool, a.device());
  if (a.device().is_cuda())
    cuda::compare(op, as_dtype(a, dt), as_dtype(b, dt), out);
  else
    cpu::compare(op, as_dtype(a, dt), as_dtype(b, dt), out);
  return out;
}

Tensor compare_scalar(CompareOp op, const Tensor& a, double s) {
  Tensor out = empty(a.sizes(), DType::Bool, a.device());
  if (a.device().is_cuda())
    cuda::compare_scalar(op, a, s, out);
  else
    cpu::compare_scalar(op, a, s, out);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  BRISK_CHECK(cond.dtype() == DType::Bool || cond.dtype() == DType::U8, "where: condition must be bool or u8, got ",
              dtype_name(cond.dtype()));
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, dt, a.device());
  if (a.device().is_cuda())
    cuda::where(cond, as_dtype(a, dt), as_dtype(b, dt), out);
  else
    cpu::where(cond, as_dtype(a, dt), as_dtype(b, dt), out);
  return out;
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  BRISK_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  BRISK_CHECK(!(lo && hi) || *lo <= *hi, "clamp: min ", *lo, " is greater than max ", *hi);
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::clamp(x, lo, hi, out);
  else
    cpu::clamp(x, lo, hi, out);
  return out;
}

Tensor clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_same_device("clamp", grad, x);
  Tensor out = empty(x.sizes(), grad.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::clamp_backward(grad, as_dtype(x, grad.dtype()), lo, hi, out);
  else
    cpu::clamp_backward(grad, as_dtype(x, grad.dtype()), lo, hi, out);
  return out;
}

void copy_(const Tensor& dst, const Tensor& src, bool non_blocking) {
  BRISK_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor argument");
  BRISK_CHECK(broadcast_shapes(src.sizes(), dst.sizes(), "copy_") == dst.sizes(), "copy_: source shape ", src.sizes(),
              " cannot be broadcast to destination shape ", dst.sizes());
  if (dst.device() == src.device()) {
    if (dst.device().is_cpu())
      cpu::copy(dst, src);
    else
      cuda::copy(dst, src);
    dst.bump_version();
    return;
  }
  // Across devices: convert and lay out on the source's side, move contiguous bytes, and
  // scatter into a strided destination on its own side.
  Tensor s = src.dtype() == dst.dtype() ? src : cast(src, dst.dtype());
  if (s.sizes() != dst.sizes()) {
    Tensor tmp = empty(dst.sizes(), dst.dtype(), s.device());
    copy_(tmp, s);
    s = tmp;
  }
  s = contiguous(s);
  if (dst.is_contiguous()) {
    copy_bytes(dst.data_ptr(), dst.device(), s.data_ptr(), s.device(), dst.nbytes(), non_blocking);
  } else {
    Tensor staged = empty(dst.sizes(), dst.dtype(), dst.device());
    copy_bytes(staged.data_ptr(), staged.device(), s.data_ptr(), s.device(), staged.nbytes(), non_blocking);
    copy_(dst, staged);
  }
  dst.bump_version();
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  if (x.device().is_cpu())
    cpu::copy(out, x);
  else
    cuda::copy(out, x);
  return out;
}

Tensor reshaped(const Tensor& x, const Shape& sizes) {
  Strides st;
  if (compute_view_strides(x.sizes(), x.strides(), sizes, st)) return x.as_strided(sizes, st, x.offset());
  Tensor c = contiguous(x);
  return c.as_strided(sizes, contiguous_strides(sizes), c.offset());
}

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = empty(x.sizes(), dtype, x.device());
  if (x.device().is_cpu())
    cpu::copy(out, x);
  else
    cuda::copy(out, x);
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  Tensor out = empty(x.sizes(), x.dtype(), device);
  copy_(out, x, non_blocking);
  return out;
}

void fill_(const Tensor& t, double v) {
  if (t.device().is_cpu())
    cpu::fill(t, v);
  else
    cuda::fill(t, v);
  t.bump_version();
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  check_same_device("add_", dst, src);
  BRISK_CHECK(broadcast_shapes(src.sizes(), dst.sizes(), "add_") == dst.sizes(), "add_: cannot add shape ", src.sizes(),
              " into shape ", dst.sizes());
  if (dst.device().is_cuda())
    cuda::add_(dst, as_dtype(src, dst.dtype()), alpha);
  else
    cpu::add_(dst, as_dtype(src, dst.dtype()), alpha);
  dst.bump_version();
}

void mul_scalar_(const Tensor& dst, double s) {
  if (dst.device().is_cuda())
    cuda::mul_scalar_(dst, s);
  else
    cpu::mul_scalar_(dst, s);
  dst.bump_version();
}

}  // namespace brisk::kernels
