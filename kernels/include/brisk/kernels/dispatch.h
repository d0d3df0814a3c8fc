// Dtype dispatch: one small visitor per family of types, whose default case throws
// "<op>: not implemented for <dtype> on <device>". No macro-generated tables.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

[[noreturn]] void throw_not_implemented(const char* op, DType dt, Device dev);

namespace detail {
// Thrown by the CUDA entry points of a CPU-only build (unreachable there: no CUDA tensor exists).
[[noreturn]] void no_cuda_support(const char* fn);
}  // namespace detail

// Calls f(T{}) for the floating types f64, f32, f16, bf16.
template <class F>
decltype(auto) visit_float(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::F64:
      return f(double{});
    case DType::F32:
      return f(float{});
    case DType::F16:
      return f(Half{});
    case DType::BF16:
      return f(BFloat16{});
    default:
      throw_not_implemented(op, dt, dev);
  }
}

// Calls f(T{}) for the floating and integer types (not bool).
template <class F>
decltype(auto) visit_numeric(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::F64:
      return f(double{});
    case DType::F32:
      return f(float{});
    case DType::F16:
      return f(Half{});
    case DType::BF16:
      return f(BFloat16{});
    case DType::I32:
      return f(int32_t{});
    case DType::I64:
      return f(int64_t{});
    case DType::U8:
      return f(uint8_t{});
    default:
      throw_not_implemented(op, dt, dev);
  }
}

// Calls f(T{}) for every dtype.
template <class F>
decltype(auto) visit_all(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::Bool:
      return f(bool{});
    default:
      return visit_numeric(dt, dev, op, std::forward<F>(f));
  }
}

// Calls f(T{}) for the index types i32, i64.
template <class F>
decltype(auto) visit_index(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::I32:
      return f(int32_t{});
    case DType::I64:
      return f(int64_t{});
    default:
      throw_not_implemented(op, dt, dev);
  }
}

// Names the op being run, and its operands, for errors raised deep inside a library while it
// runs: a failed CUDA, cuBLAS or cuDNN call reports "... (in matmul on [4, 8] f32 cuda:0, ...)".
// A thread-local stack of pointers: cheap enough for every op.
class OpScope {
 public:
  explicit OpScope(const char* op, const Tensor* a = nullptr, const Tensor* b = nullptr, const Tensor* c = nullptr);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  // "in <op> on <shape> <dtype> <device>, ..." for the innermost scope of this thread; "" outside.
  static std::string describe();

 private:
  const char* op_;
  const Tensor* operands_[3];
  OpScope* outer_;
};
// Throws unless every tensor lives on `dev`'s kind; names the op.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_float(const char* op, const Tensor& a);

}  // namespace brisk::kernels
