// How kernels/src reaches the CUDA implementations (internal header). Each family header in
// kernels/cuda/ declares its entry points between BRISK_CUDA_API_BEGIN and BRISK_CUDA_API_END:
//
//   BRISK_CUDA_FN void unary(UnaryOp op, const Tensor& x, const Tensor& out) BRISK_CUDA_BODY;
//
// In a CUDA build that is a plain declaration, defined in the family's .cu file. In a CPU-only
// build it becomes an inline function that throws; it is never reached there, because no CUDA
// tensor can be made without CUDA support, but it lets kernels/src switch on the device with no
// #if. Entry points take tensors (outputs preallocated by kernels/src, arguments validated),
// launch on the current stream of the tensors' device, and never synchronise with the host
// unless their declaration says so.
#pragma once
#include "brisk/kernels/dispatch.h"

#if defined(BRISK_WITH_CUDA)
#define BRISK_CUDA_FN
#define BRISK_CUDA_BODY
#define BRISK_CUDA_API_BEGIN
#define BRISK_CUDA_API_END
#else
#define BRISK_CUDA_FN inline
#define BRISK_CUDA_BODY \
  { ::brisk::kernels::detail::no_cuda_support(__func__); }
#define BRISK_CUDA_API_BEGIN _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"")
#define BRISK_CUDA_API_END _Pragma("GCC diagnostic pop")
#endif
