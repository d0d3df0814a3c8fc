// The Reducer: data-parallel gradient averaging (PyTorch DDP's reducer) in flat buckets whose
// all-reduces start during backward, as soon as their last gradient is ready.
//
//   dist::Reducer reducer(model.named_parameters(), dist::world());
//   loss.backward();      // buckets launch from the gradient hooks; before backward() returns
//   opt.step();           // every rank holds the same averaged gradients in p.grad()
//
// Buckets: parameters in REVERSE registration order (the last layer's gradients are ready
// first), packed into flat buffers of one dtype; the first at most first_bucket_mb MiB (small,
// so communication starts early), the rest at most bucket_cap_mb MiB (a parameter larger than
// the cap gets a bucket of its own; 0 MiB gives one bucket per parameter). A gradient hook
// copies the (accumulated) gradient into its bucket; when a bucket's last gradient arrives its
// async all-reduce (ReduceOp::Avg) is launched, strictly in bucket order 0, 1, 2, ... on every
// rank (a bucket ready early waits for its predecessors). A callback queued at the pass's first
// hook runs finalize() at the end of backward: it waits for every bucket and writes the
// averaged gradients back into p.grad(). See docs/data-parallel.md.
//
// CUDA parameters: buckets live on the GPU; gradients are copied in on the compute stream (the
// backward thread's current stream), each bucket is all-reduced by NCCL on the communication
// stream as soon as it is full, ordered after the compute stream by an event, and averaged on
// the GPU; finalize() makes the compute stream wait for the buckets' completion events and
// copies the averages back on it. So the optimizer step that follows on the compute stream is
// ordered after every bucket, and the host never waits for the GPU during backward.
//
// Shared memory (CPU, every rank on this host, MPI backend): with ReducerMode::SharedMemory,
// or under ReducerMode::Auto when the ranks' compute threads fill the host's cores (so an
// all-reduce overlapped with backward only takes cores from it), the buckets live in one
// shared-memory segment and nothing is launched during backward: at its end the computing
// thread meets the other ranks at a barrier in that segment, reduces its share of every bucket
// (rank order, the same on every rank), meets them again and copies the averages into p.grad().
// No MPI call, no other thread. Backward writes each gradient straight into its bucket slot, so
// p.grad() is a view of the bucket, overwritten by the next backward (PyTorch's
// gradient_as_bucket_view). Constructing a Reducer is a collective under Auto and SharedMemory
// in a world of more than one (every rank constructs it at the same point, as PyTorch's DDP); a
// world of one communicates nothing and never makes a segment. See docs/data-parallel.md,
// "Shared memory".
//
// Several synced backward passes before one optimizer step (two losses): each pass averages
// the whole accumulated p.grad() once (each bucket is launched exactly once per pass). That is
// still exact, since averaging is linear (avg(avg(g1) + g2) = avg(g1) + avg(g2)), but costs one
// round of communication per pass: run all but the last under set_sync(false), or add the
// losses and call backward once.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/dist/process_group.h"

namespace brisk::dist {

// How the Reducer moves gradients (ReducerOptions::mode; the environment variable
// BRISK_REDUCER_MODE=auto|overlap|shm overrides Auto).
enum class ReducerMode : uint8_t {
  // SharedMemory when it applies (CPU buckets, the MPI backend, every rank on this host, the
  // default algorithm) and ranks x compute threads >= the cores this process may use; else Overlap.
  Auto,
  Overlap,       // all-reduces launched from the gradient hooks, overlapping the rest of backward
  SharedMemory,  // one shared-memory all-reduce by the computing thread at the end of backward
};
const char* reducer_mode_name(ReducerMode m);
ReducerMode reducer_mode_from_name(const std::string& name);  // throws brisk::Error naming the choices

struct ReducerOptions {
  double bucket_cap_mb = 25.0;   // buckets after the first
  double first_bucket_mb = 1.0;  // the first bucket (the last layers' gradients) is small so
                                 // communication starts early
  // Parameters that get no gradient in a synced backward count as zero gradients (or their
  // gradient accumulated under no_sync) instead of raising an error; one more small
  // all-reduce per step finds the parameters no rank has a gradient for, whose p.grad() is
  // then left alone (undefined stays undefined, as in one process).
  bool find_unused_parameters = false;
  Algorithm algorithm = Algorithm::Default;
  ReducerMode mode = ReducerMode::Auto;
};
struct BucketInfo {
  std::vector<size_t> params;
  size_t bytes;
};  // indices into the params list

// Averages gradients across the group in buckets that launch during backward.
class Reducer {
 public:
  // params: (name, leaf tensor) in registration order; buckets are formed in reverse order.
  // Parameters that do not require grad are skipped; a tensor listed twice (tied weights) is
  // reduced once, under its first index.
  Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& pg, ReducerOptions o = {});
  ~Reducer();  // removes its effect (hooks become no-ops)
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;
  // When false (no_sync), backward accumulates gradients locally and nothing is communicated.
  void set_sync(bool sync);
  bool sync() const;
  // Blocks until every launched bucket has finished and the averaged gradients are in p.grad()
  // (CUDA buckets: orders the current stream after them and enqueues the copies back; the host
  // does not wait). Runs automatically at the end of each synced backward pass
  // (autograd::queue_callback), so after backward() returns every rank holds identical
  // gradients (on the GPU: for any work queued on the compute stream afterwards). Idempotent.
  void finalize();
  const std::vector<BucketInfo>& buckets() const;
  // Called with (bucket index) as each bucket's all-reduce is launched / completed (for tracing/tests).
  struct Event {
    size_t bucket;
    double start_us, end_us;
  };
  // Of the last synced backward. With CUDA buckets the completion times are observed by a
  // watcher thread, so this call waits (on the host) until the last pass's all-reduces are done.
  const std::vector<Event>& last_step_events() const;
  // Beyond the shared interface: when the last synced backward's finalize() began (the end of
  // the backward computation), on the same clock as the events (trace_now_us()).
  double last_backward_end_us() const;
  // Whether this Reducer all-reduces through shared memory (ReducerMode::SharedMemory, chosen
  // or resolved from Auto) rather than overlapping all-reduces with backward.
  bool uses_shared_memory() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;  // the hooks hold weak references to it
};

}  // namespace brisk::dist
