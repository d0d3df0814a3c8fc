// Shapes and strides, and the metadata arithmetic of views (no data is touched here):
// contiguous strides, broadcasting, dim wrapping, and the size/stride rules of each view op.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace brisk {

using Shape = std::vector<int64_t>;    // sizes, outermost first
using Strides = std::vector<int64_t>;  // in elements

int64_t shape_numel(const Shape& s);  // throws on negative sizes or int64 overflow
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim); `op` names the caller in the error.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// View metadata: each returns the sizes/strides/offset of the view, or throws.
struct ViewMeta {
  Shape sizes;
  Strides strides;
  int64_t offset = 0;
};
// Infers one -1 in `sizes` from numel.
Shape infer_size(const Shape& sizes, int64_t numel, const char* op);
// Strides for viewing (sizes, strides) as new_sizes without copying; false if impossible.
bool compute_view_strides(const Shape& sizes, const Strides& strides, const Shape& new_sizes, Strides& out);
ViewMeta permute_meta(const Shape& sizes, const Strides& strides, int64_t offset, const std::vector<int64_t>& dims);
ViewMeta transpose_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t d0, int64_t d1);
ViewMeta narrow_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim, int64_t start,
                     int64_t length);
ViewMeta select_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim, int64_t index);
ViewMeta expand_meta(const Shape& sizes, const Strides& strides, int64_t offset, const Shape& target);
ViewMeta squeeze_meta(const Shape& sizes, const Strides& strides, int64_t offset,
                      int64_t dim);  // dim == INT64_MIN: all
ViewMeta unsqueeze_meta(const Shape& sizes, const Strides& strides, int64_t offset, int64_t dim);

inline constexpr int64_t kAllDims = INT64_MIN;

}  // namespace brisk
