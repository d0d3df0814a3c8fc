// Shared argument checks for the kernels.
#include "brisk/kernels/dispatch.h"

namespace brisk::kernels {

void throw_not_implemented(const char* op, DType dt, Device dev) {
  BRISK_THROW(op, ": not implemented for ", dtype_name(dt), " on ", dev.is_cpu() ? "cpu" : "cuda");
}

void require_cpu(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw_not_implemented(op, t.dtype(), t.device());
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  BRISK_CHECK(a.device() == b.device(), op, ": tensors are on different devices: ", a.device().str(), " and ",
              b.device().str(), " (move them with .to(device))");
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  BRISK_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch: ", dtype_name(a.dtype()), " vs ", dtype_name(b.dtype()));
}

void check_float(const char* op, const Tensor& a) {
  BRISK_CHECK(a.is_floating_point(), op, ": expected a floating-point tensor, got ", dtype_name(a.dtype()));
}

}  // namespace brisk::kernels
