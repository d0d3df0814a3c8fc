// Tensor metadata, element access, creation from host data, and printing.
#include "brisk/core/tensor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <type_traits>

#include "brisk/core/float_to_integer.h"

namespace brisk {

namespace {

// A stored floating-point value read as T: integers through the defined conversion.
template <class T, class F>
T from_floating(F v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return float_to_integer<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
T load_as(const uint8_t* p, DType dt) {
  switch (dt) {
    case DType::F64: {
      double v;
      std::memcpy(&v, p, 8);
      return from_floating<T>(v);
    }
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return from_floating<T>(v);
    }
    case DType::F16: {
      Half v;
      std::memcpy(&v, p, 2);
      return from_floating<T>(static_cast<float>(v));
    }
    case DType::BF16: {
      BFloat16 v;
      std::memcpy(&v, p, 2);
      return from_floating<T>(static_cast<float>(v));
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<T>(v);
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<T>(v);
    }
    case DType::U8:
      return static_cast<T>(*p);
    case DType::Bool:
      return static_cast<T>(*p != 0);
  }
  return T{};
}

// Host bytes covering the tensor's elements, copied from the device when needed;
// returns the pointer that corresponds to element offset 0 of the storage.
struct HostView {
  std::vector<uint8_t> staging;
  const uint8_t* base = nullptr;
};

HostView host_view(const Tensor& t) {
  HostView hv;
  const Storage& s = t.storage();
  BRISK_CHECK(s->is_allocated(), "Tensor: storage was released (call allocate_again() first)");
  if (s->device().is_cpu()) {
    hv.base = static_cast<const uint8_t*>(s->data());
  } else {
    hv.staging.resize(s->nbytes());
    copy_bytes(hv.staging.data(), kCPU, s->data(), s->device(), s->nbytes());
    hv.base = hv.staging.data();
  }
  return hv;
}

thread_local MemoryCategory tl_category = MemoryCategory::Other;
DeviceCopyFn g_device_copy = nullptr;

}  // namespace

bool Tensor::is_pinned() const {
  const Storage& s = storage();
  return s->device().is_cpu() && pinned_allocator() != nullptr && s->allocator() == pinned_allocator();
}

int64_t Tensor::size(int64_t d) const {
  return sizes()[wrap_dim(d, dim(), "Tensor::size")];
}
int64_t Tensor::stride(int64_t d) const {
  return strides()[wrap_dim(d, dim(), "Tensor::stride")];
}

bool Tensor::is_contiguous() const {
  const auto& sz = sizes();
  const auto& st = strides();
  // An empty tensor is contiguous whatever its strides (as in PyTorch): check before any stride.
  for (int64_t s : sz)
    if (s == 0) return true;
  int64_t expected = 1;
  for (size_t i = sz.size(); i-- > 0;) {
    if (sz[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sz[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  const Storage& s = storage();
  if (!s->data()) return nullptr;
  return static_cast<uint8_t*>(s->data()) + offset() * static_cast<int64_t>(element_size());
}

template <class T>
T Tensor::item() const {
  BRISK_CHECK(numel() == 1, "Tensor::item: expected a tensor with one element, got shape ", sizes());
  HostView hv = host_view(*this);
  return load_as<T>(hv.base + offset() * static_cast<int64_t>(element_size()), dtype());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  HostView hv = host_view(*this);
  const auto& sz = sizes();
  const auto& st = strides();
  size_t es = element_size();
  std::vector<int64_t> idx(sz.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t off = offset();
    for (size_t d = 0; d < sz.size(); ++d) off += idx[d] * st[d];
    out[i] = load_as<T>(hv.base + off * static_cast<int64_t>(es), dtype());
    for (size_t d = sz.size(); d-- > 0;) {
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Tensor Tensor::as_strided(Shape sizes, Strides strides, int64_t offset) const {
  BRISK_CHECK(sizes.size() == strides.size(), "as_strided: ", sizes.size(), " sizes but ", strides.size(), " strides");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype();
  impl->is_view = true;
  return Tensor(std::move(impl));
}

Tensor Tensor::detach() const {
  return as_strided(sizes(), strides(), offset());
}

void Tensor::set_data(const Tensor& src) const {
  TensorImpl* d = checked();
  BRISK_CHECK(src.defined(), "set_data: source tensor is undefined");
  MemoryCategory cat = d->storage ? d->storage->category() : MemoryCategory::Other;
  d->storage = src.storage();
  d->storage->set_category(cat);
  d->sizes = src.sizes();
  d->strides = src.strides();
  d->offset = src.offset();
  d->dtype = src.dtype();
  d->storage->bump_version();
}

namespace {
std::atomic<DType> g_default_dtype{DType::F32};
std::atomic<RequiresGradSetter> g_requires_grad_setter{nullptr};
}  // namespace

DType get_default_dtype() {
  return g_default_dtype.load(std::memory_order_relaxed);
}

void set_default_dtype(DType dtype) {
  BRISK_CHECK(is_floating(dtype),
              "set_default_dtype: the default dtype must be a floating type (f16, bf16, f32, f64), ", "got ",
              dtype_name(dtype));
  g_default_dtype.store(dtype, std::memory_order_relaxed);
}

void register_requires_grad_setter(RequiresGradSetter fn) {
  g_requires_grad_setter.store(fn);
}

Tensor apply_requires_grad(Tensor t, const TensorOptions& options) {
  if (!options.requires_grad) return t;
  RequiresGradSetter fn = g_requires_grad_setter.load();
  BRISK_CHECK(fn != nullptr, "TensorOptions: requires_grad = true needs the autograd library (brisk::autograd)");
  fn(t);
  return t;
}

Tensor empty(const Shape& sizes, const TensorOptions& options) {
  return apply_requires_grad(empty(sizes, options.dtype, options.device), options);
}

Tensor empty(const Shape& sizes, DType dtype, Device device) {
  const int64_t n = shape_numel(sizes);
  int64_t nbytes = 0;
  BRISK_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &nbytes), "empty: shape ", sizes,
              " of ", dtype_name(dtype), " is too large: its byte size overflows int64");
  Strides strides = contiguous_strides(sizes);  // checked before anything is allocated
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = make_storage(static_cast<size_t>(nbytes), device, tl_category);
  impl->sizes = sizes;
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, Device device) {
  int64_t n = shape_numel(sizes);
  BRISK_CHECK(n == static_cast<int64_t>(values.size()), "from_vector: ", values.size(), " values do not fill shape ",
              sizes);
  Tensor t = empty(sizes, dtype_of_v<T>, device);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    copy_bytes(t.data_ptr(), device, bytes.data(), kCPU, bytes.size());
  } else {
    copy_bytes(t.data_ptr(), device, values.data(), kCPU, values.size() * sizeof(T));
  }
  return t;
}

MemoryCategory current_memory_category() {
  return tl_category;
}
MemoryCategoryGuard::MemoryCategoryGuard(MemoryCategory c) : prev_(tl_category) {
  tl_category = c;
}
MemoryCategoryGuard::~MemoryCategoryGuard() {
  tl_category = prev_;
}

void register_device_copy(DeviceCopyFn fn) {
  g_device_copy = fn;
}

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes, bool non_blocking) {
  if (nbytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  BRISK_CHECK(g_device_copy != nullptr, "copy_bytes: copy from ", src_dev.str(), " to ", dst_dev.str(),
              " needs CUDA support, which this build of brisk does not have");
  g_device_copy(dst, dst_dev, src, src_dev, nbytes, non_blocking);
}

// --- printing -------------------------------------------------------------------

namespace {

void print_values(std::ostream& os, const std::vector<double>& v, const Shape& sz, bool is_float, size_t dim,
                  size_t& pos, int indent) {
  constexpr int64_t kEdge = 3;  // values shown at each end of a long dim
  int64_t n = sz[dim];
  size_t inner = 1;
  for (size_t d = dim + 1; d < sz.size(); ++d) inner *= static_cast<size_t>(sz[d]);
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdge && i == kEdge) {
      os << (dim + 1 == sz.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      pos += static_cast<size_t>(n - 2 * kEdge) * inner;
      i = n - kEdge;
    }
    if (dim + 1 == sz.size()) {
      double x = v[pos++];
      if (is_float) {
        os << std::setprecision(4) << std::defaultfloat << x;
      } else {
        os << static_cast<int64_t>(x);
      }
    } else {
      print_values(os, v, sz, is_float, dim + 1, pos, indent + 1);
    }
    if (i + 1 < n) os << (dim + 1 == sz.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(shape=" << shape_str(t.sizes()) << ", dtype=" << t.dtype() << ", device=" << t.device();
  if (!t.storage()->is_allocated()) return os << ", released)";
  os << ",\n  ";
  std::vector<double> v = t.to_vector<double>();
  if (t.dim() == 0) {
    os << std::setprecision(6) << v[0];
  } else {
    size_t pos = 0;
    print_values(os, v, t.sizes(), t.is_floating_point(), 0, pos, 2);
  }
  return os << ')';
}

std::string to_string(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

#define BRISK_INSTANTIATE(T)                            \
  template T Tensor::item<T>() const;                   \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, Device);
BRISK_INSTANTIATE(double)
BRISK_INSTANTIATE(float)
BRISK_INSTANTIATE(Half)
BRISK_INSTANTIATE(BFloat16)
BRISK_INSTANTIATE(int32_t)
BRISK_INSTANTIATE(int64_t)
BRISK_INSTANTIATE(uint8_t)
BRISK_INSTANTIATE(bool)
#undef BRISK_INSTANTIATE

}  // namespace brisk
