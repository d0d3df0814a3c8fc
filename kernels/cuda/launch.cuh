// Kernel launches (internal, nvcc only). Every brisk kernel starts through launch(): it checks
// the launch shape on the host (a bad grid is a brisk::Error naming the kernel and the op, not a
// silent no-op), logs instead of launching in recording mode, and turns a launch failure into
// a brisk::Error naming the kernel and the op.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "cuda/runtime.h"

namespace brisk::cuda::detail {

// Blocks of `threads` covering n items (at least one block, at most 2^31 - 1).
inline unsigned blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 0x7fffffff) b = 0x7fffffff;
  return static_cast<unsigned>(b);
}

// launch("softmax_rows", softmax_rows<T>, grid, block, smem, stream, args...)
template <class... KArgs, class... Args>
void launch(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            Args&&... args) {
  if (!prepare_launch(name, grid, block, shared_bytes, stream)) return;
  if (shared_bytes > kDefaultSharedLimit)
    BRISK_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  check_launch(name);
}

// The same for a grid of thread-block clusters of `cluster_x` blocks (sm_90 and newer; grid.x a
// multiple of cluster_x): the blocks of a cluster run at once and can read each other's shared
// memory.
template <class... KArgs, class... Args>
void launch_clusters(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, unsigned cluster_x,
                     cudaStream_t stream, Args&&... args) {
  if (!prepare_launch(name, grid, block, 0, stream)) return;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_x;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  BRISK_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  check_launch(name);
}

}  // namespace brisk::cuda::detail
