// Tensor: a cheap shared handle over a TensorImpl (sizes, strides, offset, dtype, storage
// and an opaque autograd slot). Core holds data and view metadata only: the math lives in
// kernels/ and the graph in autograd/. Methods marked [autograd] are declared here for
// convenience (`loss.backward()`, `h.flatten(1)`) and defined in the autograd library;
// core itself never calls them.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string_view>
#include <tuple>
#include <vector>

#include "brisk/core/dtype.h"
#include "brisk/core/enums.h"
#include "brisk/core/shape.h"
#include "brisk/core/storage.h"
#include "brisk/util/error.h"

namespace brisk {

// The autograd layer hangs its per-tensor state (grad, grad_fn, hooks) off this slot.
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

class Tensor;
struct ValuesIndices;

// The dims a reduction method takes, as libtorch's IntArrayRef: one dim (x.sum(1)), a braced
// list (x.sum({0, 2})) or a std::vector; {} is every dim.
class DimList {
 public:
  DimList() = default;
  DimList(int64_t dim) : dims_{dim} {}                            // NOLINT: x.sum(1) reads well
  DimList(std::initializer_list<int64_t> dims) : dims_(dims) {}   // NOLINT
  DimList(std::vector<int64_t> dims) : dims_(std::move(dims)) {}  // NOLINT
  const std::vector<int64_t>& vec() const { return dims_; }

 private:
  std::vector<int64_t> dims_;
};

struct TensorImpl {
  Storage storage;
  Shape sizes;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::F32;
  // Made by as_strided (every view, and detach()): the bytes may be shared with another tensor,
  // so autograd refuses to record an in-place op on it (see docs/how-brisk-works.md, autograd).
  bool is_view = false;
  std::shared_ptr<AutogradMetaBase> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // --- metadata ---------------------------------------------------------------
  const Shape& sizes() const { return checked()->sizes; }
  const Strides& strides() const { return checked()->strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(checked()->sizes.size()); }
  int64_t numel() const { return shape_numel(checked()->sizes); }
  int64_t offset() const { return checked()->offset; }
  DType dtype() const { return checked()->dtype; }
  Device device() const { return checked()->storage->device(); }
  const Storage& storage() const { return checked()->storage; }
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  // True when the bytes live in page-locked host memory (see pin_memory()).
  bool is_pinned() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  // The version counter of the storage (shared with every view and detached handle), bumped by
  // in-place kernels so autograd can detect a saved tensor that changed before backward.
  uint32_t version() const { return checked()->storage ? checked()->storage->version() : 0; }
  void bump_version() const {
    if (checked()->storage) checked()->storage->bump_version();
  }

  // Pointer to the first element (storage base + offset).
  void* data_ptr() const;
  template <class T>
  T* data() const {
    BRISK_CHECK(dtype_of_v<T> == dtype(), "Tensor::data<", dtype_name(dtype_of_v<T>), ">: tensor has dtype ",
                dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  // The single value of a one-element tensor (copied to the host if needed), converted to T.
  template <class T>
  T item() const;
  // All values as a flat vector in logical (C) order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;

  // A view sharing this storage with the given metadata; no autograd history.
  Tensor as_strided(Shape sizes, Strides strides, int64_t offset) const;
  // Same storage and metadata, no autograd history, does not require grad.
  Tensor detach() const;
  // Points this tensor (and every handle sharing its impl) at src's storage and metadata,
  // keeping its autograd state: how modules move parameters between devices and dtypes in place.
  void set_data(const Tensor& src) const;

  // --- autograd state [autograd] ---------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool flag = true);
  Tensor grad() const;  // undefined tensor when there is none
  void set_grad(const Tensor& g) const;
  bool is_leaf() const;
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  // Registers fn(grad) to run once this leaf's gradient is final in a backward pass.
  void register_hook(std::function<void(const Tensor&)> fn) const;
  void retain_grad() const;

  // --- differentiable method sugar [autograd] ------------------------------------
  Tensor view(const Shape& sizes) const;
  Tensor reshape(const Shape& sizes) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;
  Tensor squeeze(int64_t dim = kAllDims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // A copy on `device` (this tensor itself when already there), differentiable: the gradient
  // flows back to this tensor's device. non_blocking: see copy_bytes.
  Tensor to(Device device, bool non_blocking = false) const;

  // --- libtorch-style op methods [autograd] --------------------------------------
  // The same ops as the free functions (brisk::exp(x) == x.exp()), with libtorch's names and
  // argument order, so chains read left to right: x.abs().add(0.2).pow(2.5).sum().
  // Elementwise (differentiable).
  Tensor abs() const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor square() const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(GeluApproximation approximate = GeluApproximation::None) const;
  Tensor silu() const;
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  Tensor clamp_min(double min) const;
  Tensor clamp_max(double max) const;
  // Arithmetic: this + alpha * other, this - alpha * other, this * other, this / other.
  Tensor add(const Tensor& other, double alpha = 1.0) const;
  Tensor add(double other) const;
  Tensor sub(const Tensor& other, double alpha = 1.0) const;
  Tensor sub(double other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(double other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(double other) const;
  // Comparisons give Bool tensors (no gradient).
  Tensor eq(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(double other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(double other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(double other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(double other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(double other) const;
  // libtorch's self.where(condition, other): this where condition is true, other elsewhere.
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, double value) const;

  // Reductions over dims (DimList: x.sum(1), x.sum({0, 2}), a std::vector; empty = all dims).
  Tensor sum() const;
  Tensor sum(const DimList& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const DimList& dims, bool keepdim = false) const;
  Tensor prod(const DimList& dims = {}, bool keepdim = false) const;
  Tensor amax(const DimList& dims = {}, bool keepdim = false) const;
  Tensor amin(const DimList& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const DimList& dims = {}, bool keepdim = false) const;
  // sum((x - mean)^2) / max(0, n - correction) over dims; std is its square root. correction 1
  // (Bessel) is libtorch's unbiased = true, 0 its unbiased = false.
  Tensor var(const DimList& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const DimList& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  // Over everything (0-d), or along one dim as (values, indices): auto [v, i] = x.max(1);
  Tensor max() const;
  Tensor min() const;
  ValuesIndices max(int64_t dim, bool keepdim = false) const;
  ValuesIndices min(int64_t dim, bool keepdim = false) const;
  // i64 indices (not differentiable); with no dim, into the flattened tensor.
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // Matrix products and indexing.
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;  // 2-D x 2-D only
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // In-place updates, returning *this (const as in libtorch: the handle is shared, the data
  // changes). Refused on a tensor that requires grad while grad mode is on (wrap them in a
  // NoGradGuard); a change to a tensor that a graph saved for its backward makes that backward
  // throw (the version check) instead of computing a wrong gradient.
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& add_(double other) const;
  const Tensor& sub_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& sub_(double other) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(double other) const;
  const Tensor& zero_() const;
  const Tensor& fill_(double value) const;
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& clamp_(std::optional<double> min, std::optional<double> max = std::nullopt) const;

 private:
  TensorImpl* checked() const {
    BRISK_CHECK(impl_ != nullptr, "Tensor: operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

// What max/min along a dim and topk return, as PyTorch's (values, indices) pair:
// `auto [v, i] = x.max(1);`. indices are i64. Converts to libtorch's std::tuple.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
  operator std::tuple<Tensor, Tensor>() const { return {values, indices}; }
};

// The dtype factories use when none is given (F32 at start; a floating type, as in PyTorch):
//   set_default_dtype(DType::F64);  // zeros({2}), randn({3}), nn layers' parameters: f64 now
// Process-wide; integer factories (arange, randint) and from_vector / tensor<T> are unaffected.
DType get_default_dtype();
void set_default_dtype(DType dtype);

// What a factory makes: libtorch's TensorOptions as an aggregate,
//   zeros({2, 3}, {.dtype = DType::F64, .device = cuda_device(), .requires_grad = true}).
// dtype defaults to get_default_dtype() at the point the options are made.
struct TensorOptions {
  DType dtype = get_default_dtype();
  Device device = kCPU;
  bool requires_grad = false;  // the result is a leaf that requires grad (floating dtypes only)
};

// Allocates an uninitialised contiguous tensor (the one primitive every factory builds on).
Tensor empty(const Shape& sizes, DType dtype = get_default_dtype(), Device device = kCPU);
Tensor empty(const Shape& sizes, const TensorOptions& options);
// Applies options.requires_grad to a freshly made tensor (what every factory ends with).
Tensor apply_requires_grad(Tensor t, const TensorOptions& options);
// The autograd library installs how a tensor is made to require grad (core cannot reach it).
using RequiresGradSetter = void (*)(const Tensor& t);
void register_requires_grad_setter(RequiresGradSetter fn);
// A tensor over a copy of host data.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, Device device = kCPU);
template <class T>
Tensor tensor(std::initializer_list<T> values, Device device = kCPU) {
  return from_vector<T>(std::vector<T>(values), Shape{static_cast<int64_t>(values.size())}, device);
}

// Memory category new storages are counted under on this thread (default: Other).
MemoryCategory current_memory_category();
class MemoryCategoryGuard {
 public:
  explicit MemoryCategoryGuard(MemoryCategory c);
  ~MemoryCategoryGuard();
  MemoryCategoryGuard(const MemoryCategoryGuard&) = delete;
  MemoryCategoryGuard& operator=(const MemoryCategoryGuard&) = delete;

 private:
  MemoryCategory prev_;
};

// Device <-> host byte copies; core routes CUDA copies through a hook the CUDA build installs.
// With non_blocking, a copy between the GPU and pinned host memory (or within a GPU) is only
// enqueued on the current stream; otherwise the bytes are in place when copy_bytes returns.
using DeviceCopyFn = void (*)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes,
                              bool non_blocking);
void register_device_copy(DeviceCopyFn fn);
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes, bool non_blocking = false);

// Prints shape, dtype, device and values (big tensors are summarised with "...").
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

}  // namespace brisk
