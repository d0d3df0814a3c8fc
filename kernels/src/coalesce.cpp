// Broadcast strides, shared by the CPU strided loop and the CUDA indexers.
#include "brisk/kernels/coalesce.h"

namespace brisk::kernels {

Strides broadcast_strides(const Shape& t_sizes, const Strides& t_strides, const Shape& out) {
  Strides s(out.size(), 0);
  size_t lead = out.size() - t_sizes.size();
  for (size_t i = 0; i < t_sizes.size(); ++i) s[lead + i] = t_sizes[i] == 1 ? 0 : t_strides[i];
  return s;
}

}  // namespace brisk::kernels
