// The element-wise reductions every CPU path shares: MPI user ops for 16-bit floats, brisk's
// ring and halving-doubling algorithms, and the world of one.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "transport.h"

namespace brisk::dist::detail {
namespace {

// Integer sums and products wrap modulo 2^bits like MPI's, computed in the unsigned type so
// that overflow is defined behaviour.
template <class T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if constexpr (sizeof(T) < sizeof(unsigned)) {
    return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
  } else {
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  }
}

// One loop per (type, op) so the compiler vectorises each (restrict: dst and src never alias).
template <class T>
void reduce_typed(T* __restrict dst, const T* __restrict src, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      if constexpr (std::is_integral_v<T>) {
        for (int64_t i = 0; i < n; ++i) dst[i] = wrap_add(dst[i], src[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
      }
      break;
    case ReduceOp::Prod:
      if constexpr (std::is_integral_v<T>) {
        for (int64_t i = 0; i < n; ++i) dst[i] = wrap_mul(dst[i], src[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] *= src[i];
      }
      break;
    // MPI_MAX / MPI_MIN: inout = (in > inout) ? in : inout.
    case ReduceOp::Max:
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > dst[i] ? src[i] : dst[i];
      break;
    case ReduceOp::Min:
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] < dst[i] ? src[i] : dst[i];
      break;
  }
}

// Half and BFloat16: widen a block to f32, reduce there, round back once.
template <class H>
void reduce_16bit(H* dst, const H* src, int64_t n, ReduceOp op) {
  constexpr int64_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    int64_t m = n - i0 < kBlock ? n - i0 : kBlock;
    for (int64_t i = 0; i < m; ++i) {
      a[i] = static_cast<float>(dst[i0 + i]);
      b[i] = static_cast<float>(src[i0 + i]);
    }
    reduce_typed<float>(a, b, m, op);
    for (int64_t i = 0; i < m; ++i) dst[i0 + i] = H(a[i]);
  }
}

}  // namespace

void check_collective_dtype(const char* op, DType dt) {
  BRISK_CHECK(dt != DType::Bool, op, ": bool tensors are not supported by collectives (use u8)");
}

void reduce_into(void* dst, const void* src, int64_t n, DType dt, ReduceOp op) {
  switch (dt) {
    case DType::F64:
      return reduce_typed(static_cast<double*>(dst), static_cast<const double*>(src), n, op);
    case DType::F32:
      return reduce_typed(static_cast<float*>(dst), static_cast<const float*>(src), n, op);
    case DType::F16:
      return reduce_16bit(static_cast<Half*>(dst), static_cast<const Half*>(src), n, op);
    case DType::BF16:
      return reduce_16bit(static_cast<BFloat16*>(dst), static_cast<const BFloat16*>(src), n, op);
    case DType::I32:
      return reduce_typed(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, op);
    case DType::I64:
      return reduce_typed(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, op);
    case DType::U8:
      return reduce_typed(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n, op);
    default:
      BRISK_THROW("reduce: not implemented for ", dtype_name(dt));
  }
}

namespace {
template <class T>
void divide_typed(T* p, int64_t n, int d) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(p[i]) / static_cast<float>(d));
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(d));
  }
}
}  // namespace

void divide_by(void* buf, int64_t n, DType dt, int divisor) {
  if (divisor == 1) return;
  switch (dt) {
    case DType::F64:
      return divide_typed(static_cast<double*>(buf), n, divisor);
    case DType::F32:
      return divide_typed(static_cast<float*>(buf), n, divisor);
    case DType::F16:
      return divide_typed(static_cast<Half*>(buf), n, divisor);
    case DType::BF16:
      return divide_typed(static_cast<BFloat16*>(buf), n, divisor);
    case DType::I32:
      return divide_typed(static_cast<int32_t*>(buf), n, divisor);
    case DType::I64:
      return divide_typed(static_cast<int64_t*>(buf), n, divisor);
    case DType::U8:
      return divide_typed(static_cast<uint8_t*>(buf), n, divisor);
    default:
      BRISK_THROW("all_reduce(avg): not implemented for ", dtype_name(dt));
  }
}

void Transport::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

#if !BRISK_WITH_CUDA
void* host_alloc(size_t bytes) {
  return ::operator new (bytes, std::align_val_t{64});
}
void host_free(void* p) {
  ::operator delete (p, std::align_val_t{64});
}
#endif

}  // namespace brisk::dist::detail
