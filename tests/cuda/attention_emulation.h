// A host stand-in for the little of CUDA that the fused attention kernels use, so that their code
// (kernels/cuda/attention_kernels.cuh, compiled here with BRISK_ATTENTION_HOST_EMULATION) runs on
// a machine without a GPU: each block's threads are fibers (ucontext) on the calling thread,
// switched only at barriers, __syncthreads a barrier of the block, __shfl_xor_sync an exchange through memory between
// the warp's (or a lane pair's) threads, and mma.sync.m16n8k16 is computed from the 32 lanes' fragments with the PTX
// ISA's layouts (the same layouts the kernels assume: this checks everything but those). Shared memory starts as 0xff
// bytes (NaN in every float type), so a read of something never staged shows.
//
// Include after every other header of the test (it defines __device__, __global__, dim3, uint4).
#pragma once
#include <ucontext.h>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <brisk/core/half.h>

#define BRISK_ATTENTION_HOST_EMULATION 1
#define __device__
#define __global__
#define __launch_bounds__(...)

struct uint4 {
  uint32_t x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  return {x, y, z, w};
}
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}

inline thread_local dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace brisk::kernels::cuda::attention_detail::emulation {

// Cooperative fibers: a block's threads run one at a time on the calling thread and switch only
// when one waits at a barrier, so a block of 128 threads costs no OS threads.
struct Fiber {
  ucontext_t ctx{};
  std::vector<char> stack;
  dim3 thread_idx;
  bool done = false;
  const struct Barrier* waiting = nullptr;  // the barrier it waits at, and that barrier's phase
  uint64_t phase = 0;
};

inline thread_local ucontext_t tl_scheduler;
inline thread_local Fiber* tl_fiber = nullptr;

struct Barrier {
  explicit Barrier(int n) : expected(n) {}
  int expected, arrived = 0;
  uint64_t phase = 0;
  void arrive_and_wait() {
    if (++arrived == expected) {  // the last one releases the others and goes on
      arrived = 0;
      ++phase;
      return;
    }
    tl_fiber->waiting = this;
    tl_fiber->phase = phase;
    swapcontext(&tl_fiber->ctx, &tl_scheduler);
  }
};

// One block's shared state: its barriers, its shared memory, and per-thread exchange slots
// (two sets, used alternately, so one barrier per exchange suffices: a thread can only write
// the set others may still read after they have all passed the next barrier).
struct Block {
  Block(int threads, size_t smem_bytes)
      : block_barrier(threads),
        smem(smem_bytes / sizeof(uint4) + 1),
        slots(static_cast<size_t>(threads)),
        parity(static_cast<size_t>(threads), 0) {
    std::memset(smem.data(), 0xff, smem.size() * sizeof(uint4));
    for (int w = 0; w < threads / 32; ++w) warp_barriers.push_back(std::make_unique<Barrier>(32));
    for (int p = 0; p < threads / 2; ++p) pair_barriers.push_back(std::make_unique<Barrier>(2));
  }
  Barrier block_barrier;
  std::vector<std::unique_ptr<Barrier>> warp_barriers, pair_barriers;
  std::vector<uint4> smem;
  std::vector<std::array<std::array<uint32_t, 6>, 2>> slots;
  std::vector<int> parity;
};

inline thread_local Block* tl_block = nullptr;

inline uint4* dynamic_smem() {
  return tl_block->smem.data();
}

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "attention emulation: %s\n", what);
  std::abort();
}

// The calling thread's exchange slot set for this exchange (alternating).
inline std::array<uint32_t, 6>& my_slot(int t) {
  return tl_block->slots[static_cast<size_t>(t)][static_cast<size_t>(tl_block->parity[static_cast<size_t>(t)])];
}

// c += A * B for one warp: A 16 x 16 (a0 (g, 2t..2t+1), a1 (g + 8, ..), a2 (g, 2t + 8..), a3
// (g + 8, 2t + 8..)), B 16 x 8 (b0 (k 2t..2t+1, n g), b1 (k 2t + 8.., n g)), C 16 x 8 (c0, c1
// (g, 2t..2t+1), c2, c3 (g + 8, ..)); lane = 4 g + t, the lower column in the low 16 bits.
template <class T>
void mma_m16n8k16(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  Block* blk = tl_block;
  const int t = static_cast<int>(threadIdx.x), lane = t & 31, w0 = t & ~31;
  const int set = blk->parity[static_cast<size_t>(t)];
  std::array<uint32_t, 6>& s = my_slot(t);
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = a[i];
  s[4] = b[0];
  s[5] = b[1];
  blk->warp_barriers[static_cast<size_t>(t / 32)]->arrive_and_wait();
  auto elem = [&](int src, int reg, int k) {
    const uint32_t v = blk->slots[static_cast<size_t>(w0 + src)][static_cast<size_t>(set)][static_cast<size_t>(reg)];
    return static_cast<float>(T::from_bits(static_cast<uint16_t>((k & 1) ? v >> 16 : v & 0xffffu)));
  };
  const int g = lane >> 2, tq = lane & 3;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * tq + (i & 1);
    float acc = c[i];
    for (int k = 0; k < 16; ++k) {
      const float x = elem((row % 8) * 4 + (k % 8) / 2, (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0), k);
      const float y = elem(col * 4 + (k % 8) / 2, 4 + (k >= 8 ? 1 : 0), k);
      acc += x * y;
    }
    c[i] = acc;
  }
  blk->parity[static_cast<size_t>(t)] ^= 1;
}

inline float shfl_xor(unsigned mask, float v, int lane_mask) {
  Block* blk = tl_block;
  const int t = static_cast<int>(threadIdx.x), lane = t & 31;
  Barrier* bar = nullptr;
  if (mask == 0xffffffffu)
    bar = blk->warp_barriers[static_cast<size_t>(t / 32)].get();
  else if (mask == (3u << (lane & 30)) && lane_mask == 1)
    bar = blk->pair_barriers[static_cast<size_t>(t / 2)].get();
  else
    fail("__shfl_xor_sync with a mask other than the warp's or a lane pair's");
  const int set = blk->parity[static_cast<size_t>(t)];
  std::memcpy(my_slot(t).data(), &v, sizeof(float));
  bar->arrive_and_wait();
  float r;
  std::memcpy(&r, blk->slots[static_cast<size_t>((t & ~31) | (lane ^ lane_mask))][static_cast<size_t>(set)].data(),
              sizeof(float));
  blk->parity[static_cast<size_t>(t)] ^= 1;
  return r;
}

// A fresh context for f that runs entry on f's stack and returns to the scheduler. Not inlined:
// getcontext returns twice, which the caller's loop variables must not see.
[[gnu::noinline]] inline void start_fiber(Fiber& f, void (*entry)()) {
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack.data();
  f.ctx.uc_stack.ss_size = f.stack.size();
  f.ctx.uc_link = &tl_scheduler;
  makecontext(&f.ctx, entry, 0);
}

template <class Args>
struct Launch {
  void (*kernel)(const Args);
  const Args* args;
};
template <class Args>
inline thread_local const Launch<Args>* tl_launch = nullptr;

template <class Args>
void fiber_main() {
  tl_launch<Args>->kernel(*tl_launch<Args>->args);
  tl_fiber->done = true;
  // returns to uc_link (the scheduler)
}

// Runs kernel(args) over the grid, one block at a time, each block's threads as fibers.
template <class Args>
void run_grid(void (*kernel)(const Args), dim3 grid, dim3 block, size_t smem_bytes, const Args& args) {
  constexpr size_t kStack = size_t{256} << 10;
  const Launch<Args> launch{kernel, &args};
  tl_launch<Args> = &launch;
  std::vector<Fiber> fibers(block.x);
  for (Fiber& f : fibers) f.stack.resize(kStack);
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      Block blk(static_cast<int>(block.x), smem_bytes);
      tl_block = &blk;
      blockIdx = dim3{bx, by, 0};
      gridDim = grid;
      blockDim = block;
      for (unsigned t = 0; t < block.x; ++t) {
        Fiber& f = fibers[t];
        f.done = false;
        f.waiting = nullptr;
        f.thread_idx = dim3{t, 0, 0};
        start_fiber(f, fiber_main<Args>);
      }
      for (;;) {
        bool left = false, ran = false;
        for (Fiber& f : fibers) {
          if (f.done) continue;
          left = true;
          if (f.waiting && f.waiting->phase == f.phase) continue;  // still held at its barrier
          f.waiting = nullptr;
          tl_fiber = &f;
          threadIdx = f.thread_idx;
          swapcontext(&tl_scheduler, &f.ctx);
          ran = true;
        }
        if (!left) break;
        if (!ran) fail("every thread waits at a barrier the others never reach (deadlock)");
      }
    }
  }
  tl_block = nullptr;
  tl_fiber = nullptr;
}

}  // namespace brisk::kernels::cuda::attention_detail::emulation

inline void __syncthreads() {
  brisk::kernels::cuda::attention_detail::emulation::tl_block->block_barrier.arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  return brisk::kernels::cuda::attention_detail::emulation::shfl_xor(mask, v, lane_mask);
}

#include "../../kernels/cuda/attention_kernels.cuh"
