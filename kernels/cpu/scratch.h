// Per-thread scratch memory for CPU kernels (see scratch.cpp).
#pragma once

#include <cstddef>

namespace brisk::kernels::cpu {

// A 64-byte aligned buffer of at least `bytes`, private to the calling thread and kept for its
// next call (it grows, never shrinks, and is freed when the thread ends), or nullptr when memory
// runs out. One user at a time per thread: the buffer stays valid until this thread calls again.
// Not counted by the CPU allocator (like a GEMM library's packing buffers).
void* thread_scratch(size_t bytes);

}  // namespace brisk::kernels::cpu
