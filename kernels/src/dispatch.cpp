// Shared argument checks for the kernels.
#include "brisk/kernels/dispatch.h"

namespace brisk::kernels {

void throw_not_implemented(const char* op, DType dt, Device dev) {
  BRISK_THROW(op, ": not implemented for ", dtype_name(dt), " on ", dev.is_cpu() ? "cpu" : "cuda");
}

namespace {
thread_local OpScope* tl_scope = nullptr;
}

void detail::no_cuda_support(const char* fn) {
  BRISK_THROW(fn, ": this build of brisk has no CUDA support (rebuild with the CUDA toolkit and cuDNN installed)");
}

OpScope::OpScope(const char* op, const Tensor* a, const Tensor* b, const Tensor* c)
    : op_(op), operands_{a, b, c}, outer_(tl_scope) {
  tl_scope = this;
}

OpScope::~OpScope() {
  tl_scope = outer_;
}

std::string OpScope::describe() {
  if (!tl_scope) return "";
  std::string s = std::string("in ") + tl_scope->op_;
  bool first = true;
  for (const Tensor* t : tl_scope->operands_) {
    if (!t || !t->defined()) continue;
    s += first ? " on " : ", ";
    first = false;
    s += brisk::detail::str_cat(t->sizes(), " ", dtype_name(t->dtype()), " ", t->device().str());
  }
  return s;
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
