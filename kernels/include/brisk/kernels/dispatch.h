// Dtype dispatch: one small visitor per family of types, whose default case throws
// "<op>: not implemented for <dtype> on <device>". No macro-generated tables.
#pragma once
#include <cstdint>
#include <type_traits>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

[[noreturn]] void throw_not_implemented(const char* op, DType dt, Device dev);

// Calls f(T{}) for the floating types f64, f32, f16, bf16.
template <class F>
decltype(auto) visit_float(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::F64: return f(double{});
    case DType::F32: return f(float{});
    case DType::F16: return f(Half{});
    case DType::BF16: return f(BFloat16{});
    default: throw_not_implemented(op, dt, dev);
  }
}

// Calls f(T{}) for the floating and integer types (not bool).
template <class F>
decltype(auto) visit_numeric(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::F64: return f(double{});
    case DType::F32: return f(float{});
    case DType::F16: return f(Half{});
    case DType::BF16: return f(BFloat16{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    case DType::U8: return f(uint8_t{});
    default: throw_not_implemented(op, dt, dev);
  }
}

// Calls f(T{}) for every dtype.
template <class F>
decltype(auto) visit_all(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::Bool: return f(bool{});
    default: return visit_numeric(dt, dev, op, std::forward<F>(f));
  }
}

// Calls f(T{}) for the index types i32, i64.
template <class F>
decltype(auto) visit_index(DType dt, Device dev, const char* op, F&& f) {
  switch (dt) {
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    default: throw_not_implemented(op, dt, dev);
  }
}

// Throws "<op>: not implemented for <dtype> on cuda" unless t lives on the CPU (every kernel runs
// on the CPU today; the CUDA versions arrive with their own issue).
void require_cpu(const char* op, const Tensor& t);
// Throws unless every tensor lives on `dev`'s kind; names the op.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_float(const char* op, const Tensor& a);

}  // namespace brisk::kernels
