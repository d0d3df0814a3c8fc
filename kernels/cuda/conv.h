// CUDA entry points of the conv family (internal): conv2d forward and backward through cuDNN 9's
// convolution API, and 2-D pooling forward and backward in brisk's own kernels. See cuda/api.h
// for the conventions; every output below is preallocated, contiguous, and written with `=`.
#pragma once
#include "brisk/core/tensor.h"
#include "brisk/kernels/conv.h"
#include "brisk/kernels/conv_plan.h"
#include "brisk/kernels/device/pool.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// y (N, C_out, OH, OW) = conv2d(x (N, C_in, H, W), w (C_out, C_in / groups, kH, kW)) + b (C_out)
// or undefined; x and w any strides; one float dtype throughout (f16/bf16 accumulate in f32).
BRISK_CUDA_FN void conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o, const Tensor& y)
    BRISK_CUDA_BODY;
// From gy (N, C_out, OH, OW): gx like x, gw like w, gb (C_out); each skipped when undefined.
BRISK_CUDA_FN void conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Conv2dOptions& o,
                                   const Tensor& gx, const Tensor& gw, const Tensor& gb) BRISK_CUDA_BODY;

// The convolution plan cache's counters (brisk/kernels/conv_plan.h), and dropping its plans of
// one device (-1: all, and the counters too).
BRISK_CUDA_FN ConvPlanStats cudnn_conv_plan_stats() BRISK_CUDA_BODY;
BRISK_CUDA_FN void cudnn_conv_clear_plans(int device) BRISK_CUDA_BODY;

// x (N, C, H, W) any strides -> values (N, C, OH, OW) in x's dtype, indices (N, C, OH, OW) i64.
BRISK_CUDA_FN void max_pool2d(const device::PoolShape& g, const Tensor& x, const Tensor& values, const Tensor& indices)
    BRISK_CUDA_BODY;
// gx (N, C, H, W) = scatter-add of gy (N, C, OH, OW) at indices (any strides both); indices out
// of [0, H * W) are reported through the device-error slot.
BRISK_CUDA_FN void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) BRISK_CUDA_BODY;
BRISK_CUDA_FN void avg_pool2d(const device::PoolShape& g, bool count_include_pad, const Tensor& x, const Tensor& y)
    BRISK_CUDA_BODY;
BRISK_CUDA_FN void avg_pool2d_backward(const device::PoolShape& g, bool count_include_pad, const Tensor& gy,
                                       const Tensor& gx) BRISK_CUDA_BODY;
// Sizes come from the tensors: x (N, C, H, W) -> y (N, C, OH, OW).
BRISK_CUDA_FN void adaptive_avg_pool2d(const Tensor& x, const Tensor& y) BRISK_CUDA_BODY;
BRISK_CUDA_FN void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx) BRISK_CUDA_BODY;
BRISK_CUDA_API_END
#if defined(BRISK_WITH_CUDA)
namespace detail {
// conv_kernels.cu. gb (C) = sum of gy (N, C, HW) contiguous over N and HW, one block per channel
// (deterministic).
void channel_sums(const Tensor& gy, const Tensor& gb);
}  // namespace detail
#endif

}  // namespace brisk::kernels::cuda
