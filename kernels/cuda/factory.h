// CUDA entry points of the factories (internal): fills where element i (in row-major order) gets
// the value the CPU computes for it, from the shared per-element functions of device/factory.h
// and device/random.h. See cuda/api.h for the conventions.
#pragma once
#include "brisk/core/tensor.h"
#include "brisk/kernels/device/factory.h"
#include "brisk/kernels/device/random.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// t[i] = f(i) stored in t's dtype, any dtype and strides (no broadcast dims); `op` names the
// factory in errors.
BRISK_CUDA_FN void fill_indexed(const Tensor& t, const char* op, const device::ArangeValues& f) BRISK_CUDA_BODY;
BRISK_CUDA_FN void fill_indexed(const Tensor& t, const char* op, const device::LinspaceValues& f) BRISK_CUDA_BODY;
BRISK_CUDA_FN void fill_indexed(const Tensor& t, const char* op, const device::UniformDraw& f) BRISK_CUDA_BODY;
BRISK_CUDA_FN void fill_indexed(const Tensor& t, const char* op, const device::NormalDraw& f) BRISK_CUDA_BODY;
BRISK_CUDA_FN void fill_indexed(const Tensor& t, const char* op, const device::RandintDraw& f) BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
