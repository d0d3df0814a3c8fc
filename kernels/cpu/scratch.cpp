// Why per-thread scratch: a kernel that splits a batch over threads and gives each thread a
// workspace (convolution's column matrices) used to carve the workspaces out of one block
// allocated per call. The caching allocator hands that block, or parts of it, to other tensors
// between calls, so a thread's workspace was often memory another core had just written: each
// of its first writes waited for the line to come over from that core. Where the two cores share
// no cache (a VM whose vCPUs sit on different dies) that made the second thread's column
// building about twice as slow as the first's. A buffer that belongs to one thread stays in that
// core's caches from call to call. (Compiled once, not per instruction set: cpu/isa.h.)
#include "cpu/scratch.h"

#include <algorithm>
#include <cstdlib>

namespace brisk::kernels::cpu {

namespace {

struct ScratchBuffer {
  void* data = nullptr;
  size_t size = 0;
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { std::free(data); }
};

}  // namespace

void* thread_scratch(size_t bytes) {
  thread_local ScratchBuffer buf;
  const size_t want = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (buf.size < want) {
    std::free(buf.data);
    buf.data = std::aligned_alloc(64, want);
    buf.size = buf.data != nullptr ? want : 0;
  }
  return buf.data;
}

}  // namespace brisk::kernels::cpu
