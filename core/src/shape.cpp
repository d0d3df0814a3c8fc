// Shape arithmetic and the metadata rules of view ops.
#include "brisk/core/shape.h"

#include <algorithm>
#include <sstream>

#include "brisk/core/checked_size.h"
#include "brisk/util/error.h"

namespace brisk {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    BRISK_CHECK(d >= 0, "shape ", s, ": negative size ", d);
    BRISK_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", s, ": number of elements overflows int64");
  }
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    // Zero sizes count as one, so [0, 2^32, 2^32] (no element) still has strides past int64.
    BRISK_CHECK(!__builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc), "shape ", s,
                ": strides overflow int64");
  }
  return st;
}

int64_t checked_nbytes(const Shape& sizes, int64_t itemsize, std::string_view what) {
  BRISK_CHECK(sizes.size() <= kMaxUntrustedDims, what, ": shape has ", sizes.size(), " dims, more than the ",
              kMaxUntrustedDims, " allowed");
  BRISK_CHECK(itemsize > 0, what, ": element size ", itemsize, " must be positive");
  int64_t numel = 1, extent = itemsize;
  for (int64_t d : sizes) {
    BRISK_CHECK(d >= 0, what, ": shape ", sizes, " has a negative size ", d);
    BRISK_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent), what, ": shape ", sizes,
                " is too large: its strides (in bytes, ", itemsize, " per element) overflow int64");
    numel *= d;  // cannot overflow: |numel| <= extent
  }
  return numel * itemsize;  // <= extent
}

uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r = 0;
  BRISK_CHECK(!__builtin_mul_overflow(a, b, &r), what, ": ", a, " * ", b, " overflows 64 bits");
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r = 0;
  BRISK_CHECK(!__builtin_add_overflow(a, b, &r), what, ": ", a, " + ", b, " overflows 64 bits");
  return r;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  BRISK_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for a tensor of ", ndim, " dims (expected ", lo,
              "..", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BRISK_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast (dim ", i, ": ",
                da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape infer_size(const Shape& sizes, int64_t numel, const char* op) {
  Shape out = sizes;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      BRISK_CHECK(infer < 0, op, ": only one dimension can be -1, got ", sizes);
      infer = static_cast<int64_t>(i);
    } else {
      BRISK_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in ", sizes);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    BRISK_CHECK(known != 0 && numel % known == 0, op, ": shape ", sizes, " is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    BRISK_CHECK(known == numel, op, ": shape ", sizes, " is invalid for input of size ", numel);
  }
  return out;
}

// Follows PyTorch's computeStride: groups of old dims that are contiguous among themselves
// can be split or merged freely.
bool compute_view_strides(const Shape& sizes, const Strides& strides, const Shape& new_sizes, Strides& out) {
  out.assign(new_sizes.size(), 0);
  if (sizes.empty()) {
    for (size_t i = new_sizes.size(); i-- > 0;) out[i] = 1;
    return true;
  }
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) {
    out = contiguous_strides(new_sizes);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= sizes[tensor_d];
    if (tensor_d == 0 || (sizes[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

ViewMeta permute_meta(const Shape& sizes, const Strides& strides, int64_t offset, const std::vector<int64_t>& dims) {
  int64_t n = static_cast<int64_t>(sizes.size());
  BRISK_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: got ", dims.size(), " dims ", dims,
              " for a tensor of shape ", sizes);
  ViewMeta m{Shape(n), Strides(n), offset};
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    BRISK_CHECK(!seen[d], "permute: dim ", dims[i], " repeated in ", dims);
    seen[d] = true;
    m.sizes[i] = sizes[d];
    m.strides[i] = strides[d];
  }
  return m;
}

ViewMeta transpose_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t d0, int64_t d1) {
  int64_t n = static_cast<int64_t>(sizes.size());
  ViewMeta m{sizes, strides, offset};
  if (n == 0) return m;
  d0 = wrap_dim(d0, n, "transpose");
  d1 = wrap_dim(d1, n, "transpose");
  std::swap(m.sizes[d0], m.sizes[d1]);
  std::swap(m.strides[d0], m.strides[d1]);
  return m;
}

ViewMeta narrow_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim, int64_t start,
                     int64_t length) {
  int64_t n = static_cast<int64_t>(sizes.size());
  BRISK_CHECK(n > 0, "narrow: cannot narrow a 0-dim tensor");
  dim = wrap_dim(dim, n, "narrow");
  if (start < 0) start += sizes[dim];
  BRISK_CHECK(start >= 0 && length >= 0 && start + length <= sizes[dim], "narrow: start ", start, " + length ", length,
              " exceeds size ", sizes[dim], " of dim ", dim, " in shape ", sizes);
  ViewMeta m{sizes, strides, offset + start * strides[dim]};
  m.sizes[dim] = length;
  return m;
}

ViewMeta select_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim, int64_t index) {
  int64_t n = static_cast<int64_t>(sizes.size());
  BRISK_CHECK(n > 0, "select: cannot select from a 0-dim tensor");
  dim = wrap_dim(dim, n, "select");
  int64_t size = sizes[dim];
  BRISK_CHECK(index >= -size && index < size, "select: index ", index, " out of range for dim ", dim, " of size ", size,
              " (shape ", sizes, ")");
  if (index < 0) index += size;
  ViewMeta m{sizes, strides, offset + index * strides[dim]};
  m.sizes.erase(m.sizes.begin() + dim);
  m.strides.erase(m.strides.begin() + dim);
  return m;
}

ViewMeta expand_meta(const Shape& sizes, const Strides& strides, int64_t offset, const Shape& target) {
  BRISK_CHECK(target.size() >= sizes.size(), "expand: target shape ", target, " has fewer dims than the tensor ",
              sizes);
  size_t lead = target.size() - sizes.size();
  ViewMeta m{Shape(target.size()), Strides(target.size()), offset};
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      BRISK_CHECK(target[i] >= 0, "expand: new leading dim ", i, " cannot be ", target[i], " (target ", target, ")");
      m.sizes[i] = target[i];
      m.strides[i] = 0;
      continue;
    }
    int64_t s = sizes[i - lead], t = target[i];
    if (t == -1) t = s;
    BRISK_CHECK(s == t || s == 1, "expand: cannot expand shape ", sizes, " to ", target, " (dim ", i, ": ", s, " vs ",
                t, ")");
    m.sizes[i] = t;
    m.strides[i] = s == t ? strides[i - lead] : 0;
  }
  return m;
}

ViewMeta squeeze_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim) {
  ViewMeta m{{}, {}, offset};
  int64_t n = static_cast<int64_t>(sizes.size());
  int64_t only = dim == kAllDims ? -1 : (n == 0 ? 0 : wrap_dim(dim, n, "squeeze"));
  for (int64_t i = 0; i < n; ++i) {
    bool drop = sizes[i] == 1 && (only < 0 || only == i);
    if (!drop) {
      m.sizes.push_back(sizes[i]);
      m.strides.push_back(strides[i]);
    }
  }
  return m;
}

ViewMeta unsqueeze_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim) {
  int64_t n = static_cast<int64_t>(sizes.size());
  dim = wrap_dim(dim, n + 1, "unsqueeze");
  ViewMeta m{sizes, strides, offset};
  int64_t st = dim < n ? sizes[dim] * strides[dim] : 1;
  m.sizes.insert(m.sizes.begin() + dim, 1);
  m.strides.insert(m.strides.begin() + dim, st);
  return m;
}

}  // namespace brisk
