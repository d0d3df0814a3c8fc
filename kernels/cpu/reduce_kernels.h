// CPU implementations behind kernels/reduce.h (internal header, not installed). Arguments are
// validated and outputs preallocated by the public functions in kernels/src (reduce.cpp,
// softmax.cpp), which switch on the device.
#pragma once
#include <cstdint>
#include <vector>

#include "brisk/core/tensor.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu {

// Declared once per instruction set; cpu::<name> calls the active one (cpu/isa.h).
// clang-format off
BRISK_CPU_KERNELS(
// Reductions of x (any strides) over the dims flagged in `reduced` (x.dim() flags). Outputs are
// contiguous and hold the kept dims in C order (keepdim does not change the layout).
// out: x's dtype for floats, i64 for integers and bool.
void sum(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);
void mean(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);  // floats
void prod(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);
// out: x's dtype; the reduction is not empty.
void amax(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);
void amin(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);
// values (x's dtype; may be undefined) and indices (i64) of the first largest (is_max) or
// smallest element, indices in C order over the reduced dims; the reduction is not empty.
// `op` names the public op in errors.
void arg_extreme(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool is_max, const Tensor& values,
                 const Tensor& indices);
// out = sum of squared deviations / max(0, n - correction), square-rooted with take_sqrt; floats.
void var(const Tensor& x, const std::vector<bool>& reduced, int64_t correction, bool take_sqrt, const Tensor& out);
void logsumexp(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out);  // floats

// Along one dim (already wrapped) of contiguous tensors.
// y: x's shape and dtype (floats).
void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& y);
// grad, y, dx: the same shape and float dtype; dx written (=).
void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& dx);
// y: x's shape; x's dtype for floats, i64 otherwise.
void cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& y);
// values (x's dtype), indices (i64): x's shape with k along dim.
void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
          const Tensor& indices);
// grad (float), indices (i64): the same shape; out: the input's shape, grad's dtype, fully
// written (zeros, then grad added at the indices). Throws when an index is out of range.
void take_along_dim_backward(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& out);
)
// clang-format on

BRISK_CPU_DISPATCH_FN(sum);
BRISK_CPU_DISPATCH_FN(mean);
BRISK_CPU_DISPATCH_FN(prod);
BRISK_CPU_DISPATCH_FN(amax);
BRISK_CPU_DISPATCH_FN(amin);
BRISK_CPU_DISPATCH_FN(arg_extreme);
BRISK_CPU_DISPATCH_FN(var);
BRISK_CPU_DISPATCH_FN(logsumexp);
BRISK_CPU_DISPATCH_FN(softmax);
BRISK_CPU_DISPATCH_FN(softmax_backward);
BRISK_CPU_DISPATCH_FN(cumsum);
BRISK_CPU_DISPATCH_FN(topk);
BRISK_CPU_DISPATCH_FN(take_along_dim_backward);

}  // namespace brisk::kernels::cpu
