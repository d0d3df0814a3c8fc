// A shared-memory segment among the ranks of a group that all run on one host, with a barrier
// that spins on it: what the Reducer's shared-memory mode (docs/data-parallel.md, "Shared
// memory") all-reduces gradients through, on the calling thread, with no MPI call and no
// hand-off to another thread.
//
// Layout: a header page (per rank: its process id and how many barriers it has entered, each
// on a cache line of its own), then one region per rank of `bytes_per_rank` bytes.
// The all-reduce averages each rank's share of the elements across the regions and writes the
// result back into every region, so each rank ends with the average where its inputs were. The segment's name is
// removed as soon as every rank has it mapped, so nothing is left in /dev/shm when a process dies. Internal header, not
// installed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "brisk/core/dtype.h"
#include "brisk/core/tensor.h"
#include "brisk/dist/process_group.h"

namespace brisk::dist::detail {

class SharedSegment {
 public:
  // Collective over pg when its backend is MPI and all its ranks share this host (every rank
  // calls it, with the same bytes_per_rank): the ranks first agree (one all-reduce) whether
  // every one of them `wants` the segment. Returns the segment on every rank, or nullptr on
  // every rank (with the reason in *why) when any rank did not want it or failed:
  // no /dev/shm, not enough room in it (the bytes are reserved up front, so a full /dev/shm
  // fails here instead of killing a process with SIGBUS later), or ranks on different hosts.
  static std::unique_ptr<SharedSegment> create(ProcessGroup& pg, size_t bytes_per_rank, bool wants, std::string* why);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  void* region(int rank) const { return base_ + header_bytes_ + region_bytes_ * static_cast<size_t>(rank); }
  // A 1-D tensor of `numel` elements of dt at `byte_offset` into `rank`'s region. It keeps the
  // mapping alive.
  Tensor view(int rank, size_t byte_offset, int64_t numel, DType dt) const;

  // Returns when every rank has entered this barrier (the n-th call on each rank meets the n-th
  // on the others). Spins briefly, then yields the core, then sleeps between looks. Throws
  // brisk::Error naming `op` when a peer process has exited or after `timeout_s` seconds;
  // after that the segment is out of step and must not be used again. `interrupted`, asked
  // every 10 ms while waiting, returns why to stop early ("" to go on): e.g. the process group
  // was poisoned because a peer left. `report`, called once on a time-out, returns lines to add
  // to its message (what every rank is doing).
  void barrier(const char* op, double timeout_s, const std::function<std::string()>& interrupted = {},
               const std::function<std::string()>& report = {});

 private:
  SharedSegment() = default;
  char* base_ = nullptr;
  size_t header_bytes_ = 0;
  size_t region_bytes_ = 0;
  size_t mapped_bytes_ = 0;
  int rank_ = 0;
  int size_ = 1;
  Storage storage_;           // the whole mapping, as tensors' storage (unmapped when its last user goes)
  uint64_t epoch_ = 0;        // barriers this rank has entered
  bool spin_ = true;          // false when ranks outnumber the cores: yield at once
  bool check_peers_ = false;  // whether kill(pid, 0) sees the peers (one PID namespace)
};

// Cores this process may run on (its affinity mask).
int usable_cpus();

// data[r][i] = op over ranks 0..W-1 (in rank order) of data[r][i], for every r and i in [begin,
// end): arrays of dt; Avg divides the sum by W. 16-bit floats are combined in f32 and rounded once
// per rank added (as reduce_into). Works in cache-sized blocks through a scratch block, so every
// input is read before any copy of the result is written.
void reduce_ranks_in_place(void* const* data, int world, int64_t begin, int64_t end, DType dt, ReduceOp op);

}  // namespace brisk::dist::detail
