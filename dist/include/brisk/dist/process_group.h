// ProcessGroup: collectives and point-to-point messages between the processes of one job,
// on CPU tensors (MPI) and CUDA tensors (NCCL), with async Work handles, brisk's own
// teaching algorithms, a debug mode that catches mismatched collectives, and timeouts.
//
//   auto& pg = dist::init();                    // reads mpirun / srun's environment
//   Tensor g = ...;                              // contiguous, on the CPU
//   pg.all_reduce(g, {.op = dist::ReduceOp::Avg});
//   auto w = pg.all_reduce_async(h);             // runs on the communication thread
//   ... compute ...
//   w->wait();                                   // rethrows a failure
//
// Without a launcher's environment init() gives a world of one process and needs no MPI.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/dist/launch_env.h"

namespace brisk::dist {

// Mean and Product are other names of Avg and Prod (the same values).
enum class ReduceOp : uint8_t { Sum, Avg, Max, Min, Prod, Mean = Avg, Product = Prod };
const char* reduce_op_name(ReduceOp op);

// Who computes an all-reduce or a broadcast. Default: the environment variable
// (BRISK_ALLREDUCE_ALGO=mpi|ring|rhd, BRISK_BROADCAST_ALGO=mpi|tree), else the backend's own.
enum class Algorithm : uint8_t {
  Default,
  Backend,  // the backend's collective (MPI_Allreduce, ncclAllReduce ...)
  Ring,     // all-reduce: ring reduce-scatter + ring all-gather (bandwidth-optimal)
  Rhd,      // all-reduce: recursive halving (reduce-scatter) + recursive doubling (all-gather)
  Tree,     // broadcast: binomial tree
};
const char* algorithm_name(Algorithm a);
// "mpi" / "backend" / "nccl", "ring", "rhd", "tree", "default"; anything else throws naming the value.
Algorithm algorithm_from_name(const std::string& name);

// What happens when the group fails (a timeout, a debug-mode mismatch, a peer that left, an
// MPI error). Abort (the default, like PyTorch's NCCL watchdog): print the error and abort the
// whole job, so no rank is left waiting in a collective that can never finish. Throw: the
// failing call (or Work::wait) throws brisk::Error and the group refuses further use.
enum class OnError : uint8_t { Abort, Throw };

struct InitOptions {
  // Seconds a collective may take before it fails; unset: BRISK_TIMEOUT_SECONDS, else 600.
  std::optional<double> timeout_seconds = std::nullopt;
  // Compare every collective's signature across ranks first; unset: BRISK_DEBUG=1.
  std::optional<bool> debug = std::nullopt;
  OnError on_error = OnError::Abort;
  // "auto" (MPI when a launcher's environment is present, else a world of one), "mpi", "self".
  std::string backend = "auto";
};

struct AllReduceOptions {
  ReduceOp op = ReduceOp::Sum;
  Algorithm algorithm = Algorithm::Default;
};
struct BroadcastOptions {
  int root = 0;
  Algorithm algorithm = Algorithm::Default;
};
struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::Sum;
};

// The handle of an operation running on the communication thread (host tensors) or on a
// communication stream (CUDA tensors through NCCL).
class Work {
 public:
  Work(std::string op, int64_t seq, Device device = kCPU) : op_(std::move(op)), seq_(seq), device_(device) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  // Host operations: blocks until the operation finished; rethrows its failure as brisk::Error.
  // CUDA operations: makes the calling thread's current stream on the tensors' device wait for
  // the collective's completion event and returns at once, as PyTorch's NCCL work does: kernels
  // launched on that stream afterwards see the result (the host does not wait; reading the
  // tensor on the host does). Rethrows a failure known by then.
  virtual void wait() = 0;
  // Blocks the host until the operation has finished, on the GPU too; rethrows its failure.
  virtual void synchronize() { wait(); }
  // True once it finished (successfully or not); never blocks.
  virtual bool is_completed() const = 0;
  // "all_reduce", "broadcast" ...; seq is the collective's sequence number (-1 for send/recv).
  const std::string& op() const { return op_; }
  int64_t seq() const { return seq_; }
  // Where the operation's tensors live: kCPU for host operations.
  Device device() const { return device_; }

 private:
  std::string op_;
  int64_t seq_;
  Device device_;
};
using WorkPtr = std::shared_ptr<Work>;

namespace detail {
class ProcessGroupImpl;
}

// Every tensor must be contiguous. Tensors on the CPU use the MPI backend; CUDA tensors use
// NCCL when the build has it (else they are staged through pinned host memory). In place
// where PyTorch is in place (all_reduce, broadcast, reduce on the root, recv).
//
// CUDA tensors with NCCL: each device has a communication stream. An operation is enqueued
// from the calling thread, ordered after the work already on the caller's current stream (an
// event recorded there, waited on by the communication stream); the tensors are marked as used
// on the communication stream (cuda::record_stream), so the caching allocator does not hand
// their memory out again before the collective is done. The blocking forms (all_reduce(t), ...)
// are `*_async(...)->wait()`: the current stream waits, the host does not. Only operations whose
// API returns host data wait on the host (all_gather_uneven reads the per-rank sizes).
// Shapes: "(W*n, ...)" means W = size() blocks of the per-rank shape stacked along dim 0.
class ProcessGroup {
 public:
  explicit ProcessGroup(std::unique_ptr<detail::ProcessGroupImpl> impl);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  std::string backend() const;  // "mpi", "self" or "fake"
  double timeout_seconds() const;
  bool debug() const;

  // t: any shape, in place on every rank.
  void all_reduce(const Tensor& t, AllReduceOptions o = {});
  WorkPtr all_reduce_async(const Tensor& t, AllReduceOptions o = {});
  // t: any shape; the root's values land in every rank's t.
  void broadcast(const Tensor& t, BroadcastOptions o = {});
  WorkPtr broadcast_async(const Tensor& t, BroadcastOptions o = {});
  // t: any shape; on the root t becomes the reduction, other ranks' t are left unchanged.
  void reduce(const Tensor& t, ReduceOptions o = {});
  WorkPtr reduce_async(const Tensor& t, ReduceOptions o = {});
  // in: (n, ...) equal on all ranks; out: (W*n, ...), rank r's block at r.
  void all_gather(const Tensor& out, const Tensor& in);
  WorkPtr all_gather_async(const Tensor& out, const Tensor& in);
  Tensor all_gather(const Tensor& in);  // allocates out (Accelerate's gather)
  // in: (n_r, ...) where n_r may differ per rank (trailing dims must match); returns one
  // tensor per rank (views into one buffer: concatenated along dim 0 it is rank order).
  std::vector<Tensor> all_gather_uneven(const Tensor& in);
  // in: (n, ...); on the root out is (W*n, ...), elsewhere out is ignored (may be undefined).
  void gather(const Tensor& out, const Tensor& in, int root = 0);
  WorkPtr gather_async(const Tensor& out, const Tensor& in, int root = 0);
  // out: (n, ...); on the root in is (W*n, ...) and block r goes to rank r; elsewhere ignored.
  void scatter(const Tensor& out, const Tensor& in, int root = 0);
  WorkPtr scatter_async(const Tensor& out, const Tensor& in, int root = 0);
  // in: (W*n, ...); out: (n, ...) = reduction over ranks of every rank's block r (this rank r).
  void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum);
  WorkPtr reduce_scatter_async(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum);
  // in, out: (W*n, ...); in's block j goes to rank j; out's block j came from rank j.
  void all_to_all(const Tensor& out, const Tensor& in);
  WorkPtr all_to_all_async(const Tensor& out, const Tensor& in);
  void barrier();
  WorkPtr barrier_async();
  // Point to point: t's bytes to / from one peer; shapes and dtypes must agree.
  void send(const Tensor& t, int dst, int tag = 0);
  void recv(const Tensor& t, int src, int tag = 0);
  WorkPtr send_async(const Tensor& t, int dst, int tag = 0);
  WorkPtr recv_async(const Tensor& t, int src, int tag = 0);

  // Drains outstanding work, tells the other ranks this one is leaving, waits for them and
  // shuts the backend down. Called by dist::finalize() and at exit.
  void shutdown();
  detail::ProcessGroupImpl& impl() { return *impl_; }

 private:
  std::unique_ptr<detail::ProcessGroupImpl> impl_;
};

// The job-wide group ("world"). init() is idempotent: later calls return the same group
// (their options are ignored).
ProcessGroup& init(const InitOptions& options = {});
bool is_initialized();
// The group from init(); throws when init() was not called.
ProcessGroup& world();
// Shuts the world group down (also registered with atexit by init()).
void finalize();

// A group of `size` ranks that exists only in this process, which is rank `rank` of it: for
// tests and teaching, no launcher needed (backend() is "fake"). It behaves as if every other
// rank held exactly this rank's data: all_reduce sums to size * x (avg, max and min give x),
// gathers repeat this rank's block, sends go nowhere and receives leave their buffer as it is;
// brisk's ring/rhd/tree algorithms are not used. CUDA tensors take the real NCCL path (events,
// communication stream, record_stream) with every NCCL call logged to the active
// cuda::recording::Session instead of made (outside a session they throw), so the ordering of
// a world of N can be checked on a machine without GPUs. Independent of init()/world().
std::unique_ptr<ProcessGroup> fake_group(int size, int rank = 0, const InitOptions& options = {});

// What the other ranks of a fake group do wrong, so that this rank's handling of a failure can be
// checked in one process (the fault matrix's GPU column, in CUDA recording mode: tests/cuda/
// test_nccl_faults.cpp). A fake group made with FakePeerFaults (even none) runs a communication
// thread and a watchdog, as a group of a real job does: timeouts and peers' exits are noticed.
struct FakePeerFaults {
  // Rank `leaves` (when >= 0) announces that it left the job after issuing `leaves_after`
  // collectives, as a rank that returns from main does.
  int leaves = -1;
  int64_t leaves_after = 0;
  // Rank `mismatches` (when >= 0) calls a broadcast where this rank calls collective
  // #`mismatch_at` (what debug mode's signature check sees).
  int mismatches = -1;
  int64_t mismatch_at = 0;
};
std::unique_ptr<ProcessGroup> fake_group(int size, int rank, const InitOptions& options, const FakePeerFaults& faults);

// NCCL's version code as the library reports it (e.g. 22809 for 2.28.9: major * 10000 +
// minor * 100 + patch), for `brisk env`; 0 when this build of brisk has no NCCL.
int nccl_version();

}  // namespace brisk::dist
