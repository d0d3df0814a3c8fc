// Public elementwise kernels: argument checks, output allocation, device switch.
#include "brisk/kernels/elementwise.h"

#include "brisk/kernels/dispatch.h"
#include "cpu/cpu_kernels.h"
#include "cuda/copy.h"

namespace brisk::kernels {

const char* op_name(UnaryOp op) {
  static constexpr const char* names[] = {"neg",  "exp",     "log",  "sqrt", "rsqrt",  "abs",        "relu",
                                          "gelu", "gelu",    "silu", "sigmoid", "tanh", "sin",       "cos",
                                          "square", "reciprocal", "sign", "log1p", "expm1"};
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

Tensor as_dtype(const Tensor& t, DType dt) { return t.dtype() == dt ? t : cast(t, dt); }

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  require_cpu(op_name(op), x);
  BRISK_CHECK(x.dtype() != DType::Bool, op_name(op), ": not defined for bool tensors");
  Tensor in = x;
  if (needs_float(op) && !x.is_floating_point()) in = cast(x, DType::F32);
  Tensor out = empty(in.sizes(), in.dtype(), in.device());
  cpu::unary(op, in, out);
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y) {
  require_cpu(op_name(op), grad);
  BRISK_CHECK(grad.sizes() == x.sizes(), op_name(op), " backward: grad shape ", grad.sizes(),
              " differs from input shape ", x.sizes());
  Tensor out = empty(x.sizes(), grad.dtype(), grad.device());
  cpu::unary_backward(op, grad, as_dtype(x, grad.dtype()), y.defined() ? as_dtype(y, grad.dtype()) : x, out);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_same_device(name, a, b);
  require_cpu(name, a);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType dt = promote_types(a.dtype(), b.dtype());
  if (dt == DType::Bool) dt = DType::U8;
  if (op == BinaryOp::Div && !is_floating(dt)) dt = DType::F32;  // true division, as PyTorch
  Tensor out = empty(shape, dt, a.device());
  cpu::binary(op, as_dtype(a, dt), as_dtype(b, dt), out);
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first) {
  require_cpu(op_name(op), a);
  DType dt = a.dtype();
  if (dt == DType::Bool) dt = DType::U8;
  if (!is_floating(dt) && (op == BinaryOp::Div || s != static_cast<double>(static_cast<int64_t>(s)))) dt = DType::F32;
  Tensor out = empty(a.sizes(), dt, a.device());
  cpu::binary_scalar(op, as_dtype(a, dt), s, scalar_first, out);
  return out;
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_same_device(name, a, b);
  require_cpu(name, a);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, DType::Bool, a.device());
  cpu::compare(op, as_dtype(a, dt), as_dtype(b, dt), out);
  return out;
}

Tensor compare_scalar(CompareOp op, const Tensor& a, double s) {
  require_cpu(op_name(op), a);
  Tensor out = empty(a.sizes(), DType::Bool, a.device());
  cpu::compare_scalar(op, a, s, out);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  require_cpu("where", a);
  BRISK_CHECK(cond.dtype() == DType::Bool || cond.dtype() == DType::U8, "where: condition must be bool or u8, got ",
              dtype_name(cond.dtype()));
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, dt, a.device());
  cpu::where(cond, as_dtype(a, dt), as_dtype(b, dt), out);
  return out;
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  require_cpu("clamp", x);
  BRISK_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  BRISK_CHECK(!(lo && hi) || *lo <= *hi, "clamp: min ", *lo, " is greater than max ", *hi);
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  cpu::clamp(x, lo, hi, out);
  return out;
}

Tensor clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  require_cpu("clamp", x);
  Tensor out = empty(x.sizes(), grad.dtype(), x.device());
  cpu::clamp_backward(grad, as_dtype(x, grad.dtype()), lo, hi, out);
  return out;
}

void copy_(const Tensor& dst, const Tensor& src, bool non_blocking) {
  BRISK_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor argument");
  BRISK_CHECK(broadcast_shapes(src.sizes(), dst.sizes(), "copy_") == dst.sizes(), "copy_: source shape ",
              src.sizes(), " cannot be broadcast to destination shape ", dst.sizes());
  if (dst.device() == src.device()) {
    if (dst.device().is_cpu()) cpu::copy(dst, src);
    else cuda::copy(dst, src);
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
  if (x.device().is_cpu()) cpu::copy(out, x);
  else cuda::copy(out, x);
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = empty(x.sizes(), dtype, x.device());
  if (x.device().is_cpu()) cpu::copy(out, x);
  else cuda::copy(out, x);
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  Tensor out = empty(x.sizes(), x.dtype(), device);
  copy_(out, x, non_blocking);
  return out;
}

void fill_(const Tensor& t, double v) {
  if (t.device().is_cpu()) cpu::fill(t, v);
  else cuda::fill(t, v);
  t.bump_version();
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  check_same_device("add_", dst, src);
  require_cpu("add_", dst);
  BRISK_CHECK(broadcast_shapes(src.sizes(), dst.sizes(), "add_") == dst.sizes(), "add_: cannot add shape ",
              src.sizes(), " into shape ", dst.sizes());
  cpu::add_(dst, as_dtype(src, dst.dtype()), alpha);
  dst.bump_version();
}

void mul_scalar_(const Tensor& dst, double s) {
  require_cpu("mul_", dst);
  cpu::mul_scalar_(dst, s);
  dst.bump_version();
}

}  // namespace brisk::kernels
