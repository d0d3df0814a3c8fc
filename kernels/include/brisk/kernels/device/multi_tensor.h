// Multi-tensor apply (host and device): the launch plan that lets one kernel launch update many
// tensors, so an optimizer step over a whole parameter group is a few launches instead of one
// per tensor (PyTorch's multi_tensor_apply, llm.c's fused updates). Each tensor is cut into chunks
// of `chunk_size` elements; a launch carries, by value in its kernel arguments, the addresses of up
// to kMaxTensors tensors and a table of up to kMaxBlocks (tensor slot, chunk) pairs, one per block.
// A tensor whose chunks do not all fit in a launch continues in the next one (its slot is repeated
// there). Empty tensors get no block. The host tests run this same plan and check that every
// element of every tensor is visited exactly once.
#pragma once
#include <cstdint>

#include "brisk/core/macros.h"

namespace brisk::kernels::device {

// Elements per chunk: a block of kMultiTensorThreads threads handles 128 of them per thread. A
// multiple of every vector width, so a chunk starts 16-byte aligned when its tensor does.
inline constexpr int64_t kMultiTensorChunk = 65536;
inline constexpr int kMultiTensorThreads = 512;

BRISK_HOST_DEVICE constexpr int64_t chunks_of(int64_t numel, int64_t chunk_size) {
  return (numel + chunk_size - 1) / chunk_size;
}

// Elements [begin, end) of chunk `chunk` of a tensor of `numel` elements.
struct ChunkRange {
  int64_t begin = 0, end = 0;
};
BRISK_HOST_DEVICE constexpr ChunkRange chunk_range(int64_t numel, int64_t chunk, int64_t chunk_size) {
  const int64_t b = chunk * chunk_size;
  const int64_t e = b + chunk_size < numel ? b + chunk_size : numel;
  return {b, e};
}

// How a block walks its chunk: `vectors` whole vectors of `width` elements starting at `begin`
// (vector v is elements begin + v * width ...; only when every operand is vector-aligned), then
// the scalar elements [tail_begin, end). Thread t of T takes vectors t, t + T, ... and then tail
// elements tail_begin + t, tail_begin + t + T, ...
struct ChunkSplit {
  int64_t begin = 0, vectors = 0, tail_begin = 0, end = 0;
};
BRISK_HOST_DEVICE constexpr ChunkSplit chunk_split(ChunkRange r, int width, bool vectorised) {
  const int64_t v = vectorised && width > 1 ? (r.end - r.begin) / width : 0;
  return {r.begin, v, r.begin + v * width, r.end};
}

// Tensors per launch for `depth` pointer lists (params, grads, states... and Adam's low-precision
// copies: up to 6), sized so that the kernel's argument struct stays under the 4 KiB every CUDA
// version accepts.
BRISK_HOST_DEVICE constexpr int multi_tensor_max_tensors(int depth) {
  return depth <= 1 ? 110 : depth == 2 ? 80 : depth == 3 ? 60 : depth == 4 ? 48 : depth == 5 ? 40 : 32;
}
inline constexpr int kMultiTensorMaxBlocks = 320;

// The per-launch kernel argument. addr[d][s]: the first element of list d's tensor in slot s
// (one dtype per list); numel[s]: its size. Block b handles chunk block_chunk[b] of slot
// block_slot[b]. first_block: how many blocks the launches before this one had (reductions write
// one partial per block, at first_block + blockIdx.x).
template <int Depth>
struct TensorListMeta {
  static constexpr int kMaxTensors = multi_tensor_max_tensors(Depth);
  static constexpr int kMaxBlocks = kMultiTensorMaxBlocks;
  void* addr[Depth][kMaxTensors];
  int64_t numel[kMaxTensors];
  int32_t block_chunk[kMaxBlocks];
  uint8_t block_slot[kMaxBlocks];
  int64_t first_block;
};
static_assert(sizeof(TensorListMeta<1>) <= 3600 && sizeof(TensorListMeta<2>) <= 3600 &&
                  sizeof(TensorListMeta<3>) <= 3600 && sizeof(TensorListMeta<4>) <= 3600 &&
                  sizeof(TensorListMeta<5>) <= 3600 && sizeof(TensorListMeta<6>) <= 3600,
              "multi-tensor kernel arguments must stay well under 4 KiB");
static_assert(multi_tensor_max_tensors(1) <= 255, "block_slot is a uint8_t");

// Packs `count` tensors into launches. numel(t): tensor t's size; addr(d, t): its list-d pointer.
// launch(meta, blocks, slot_tensor) is called once per launch with `blocks` >= 1 used entries;
// slot_tensor[s] is the index (in [0, count)) of the tensor in slot s (for host checks).
// Host only: the kernels read the plan from their argument.
template <int Depth, class NumelFn, class AddrFn, class LaunchFn>
void plan_multi_tensor(int64_t count, NumelFn numel, AddrFn addr, int64_t chunk_size, LaunchFn launch) {
  using Meta = TensorListMeta<Depth>;
  Meta meta{};
  int64_t slot_tensor[Meta::kMaxTensors] = {};
  int slots = 0, blocks = 0;
  int64_t done_blocks = 0;
  meta.first_block = 0;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t n = numel(t);
    if (n <= 0) continue;
    for (int d = 0; d < Depth; ++d) meta.addr[d][slots] = addr(d, t);
    meta.numel[slots] = n;
    slot_tensor[slots] = t;
    ++slots;
    const int64_t chunks = chunks_of(n, chunk_size);
    for (int64_t c = 0; c < chunks; ++c) {
      meta.block_slot[blocks] = static_cast<uint8_t>(slots - 1);
      meta.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      // Launch when the block table is full, or when every slot is taken and the last slot's
      // tensor has no chunk left (a new tensor would need a slot).
      if (blocks == Meta::kMaxBlocks || (slots == Meta::kMaxTensors && last_chunk)) {
        launch(static_cast<const Meta&>(meta), blocks, static_cast<const int64_t*>(slot_tensor));
        done_blocks += blocks;
        blocks = 0;
        meta.first_block = done_blocks;
        if (last_chunk) {
          slots = 0;
        } else {  // this tensor goes on in the next launch, from slot 0
          for (int d = 0; d < Depth; ++d) meta.addr[d][0] = meta.addr[d][slots - 1];
          meta.numel[0] = meta.numel[slots - 1];
          slot_tensor[0] = slot_tensor[slots - 1];
          slots = 1;
        }
      }
    }
  }
  if (blocks > 0) launch(static_cast<const Meta&>(meta), blocks, static_cast<const int64_t*>(slot_tensor));
}

// Blocks (= chunks, = partial results of a reduction) the plan makes for these tensors.
template <class NumelFn>
int64_t multi_tensor_blocks(int64_t count, NumelFn numel, int64_t chunk_size) {
  int64_t b = 0;
  for (int64_t t = 0; t < count; ++t) b += numel(t) > 0 ? chunks_of(numel(t), chunk_size) : 0;
  return b;
}

}  // namespace brisk::kernels::device
