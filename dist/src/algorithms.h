// brisk's own collective algorithms, written on a transport's send/recv so that users can
// read, benchmark and compare them with the backend's: ring and recursive halving-doubling
// all-reduce, binomial-tree broadcast. CPU buffers only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "transport.h"

namespace brisk::dist::detail {

// A host buffer reused across calls (grown when a call needs more).
class Scratch {
 public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get(size_t bytes);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Chunk size of the ring's pipelined reduce-scatter (BRISK_RING_CHUNK_KB overrides).
int64_t ring_chunk_bytes();

// buf: n elements of dt, in place on every rank. op may be Avg.
void ring_all_reduce(Transport& t, void* buf, int64_t n, DType dt, ReduceOp op, Scratch& scratch);
void rhd_all_reduce(Transport& t, void* buf, int64_t n, DType dt, ReduceOp op, Scratch& scratch);
// buf: `bytes` bytes; the root's land in every rank's buf.
void tree_broadcast(Transport& t, void* buf, int64_t bytes, int root);

}  // namespace brisk::dist::detail
