// Transport: the raw layer under a ProcessGroup. It moves bytes between ranks and runs the
// backend's own collectives on plain pointers; tensors, validation, threads, timeouts and
// brisk's algorithms live above it. Implementations: SelfTransport (a world of one),
// FakeTransport (a world of N identical ranks inside one process, for tests), MpiTransport
// (libbrisk_dist_mpi.so, loaded on demand) and NcclTransport (CUDA builds, a StreamTransport).
// Internal header: shared by libbrisk_dist and the MPI plugin, not installed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brisk/core/dtype.h"
#include "brisk/dist/process_group.h"
#include "brisk/kernels/cuda.h"

namespace brisk::dist::detail {

// Which message space a point-to-point call uses, so brisk's algorithms never match a
// user's send/recv with the same peer and tag.
enum class Channel : uint8_t { User, Algorithm };

// An outstanding nonblocking send or receive (the backend's handle, e.g. an MPI_Request).
struct Request {
  void* handle = nullptr;
  bool active = false;
  bool is_recv = false;
  int64_t bytes = 0;  // expected size of a receive, checked when it completes
  int peer = -1;
};

// "Rank `rank` is leaving after issuing `issued` collectives" (see ProcessGroupImpl::shutdown).
struct PeerExit {
  int rank = 0;
  int64_t issued = 0;
};

// One rank's answer to "what are you doing?", asked by a rank whose collective timed out (the
// status exchange: ProcessGroupImpl::ranks_report). Plain bytes of a fixed size.
struct StatusReport {
  int32_t rank = -1;
  int64_t ask = -1;     // the asking rank's question number, echoed
  char text[240] = {};  // "waits in all_reduce #19 (f32, [1], sum) for 3.0 s"
};
struct StatusAsk {
  int peer = -1;  // who asks
  int64_t ask = -1;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const { return 0; }
  virtual int local_size() const { return 1; }
  // True when another thread may call poll_exits() while a collective runs (MPI_THREAD_MULTIPLE).
  virtual bool concurrent_polling() const { return false; }

  // --- collectives: every count `n` is in elements of dt; buffers are on the transport's
  // device (host memory for MPI). ReduceOp::Avg never reaches a transport: the group sums
  // and divides. Called from one thread at a time (the communication thread).
  virtual void all_reduce(void* buf, int64_t n, DType dt, ReduceOp op) = 0;  // in place
  virtual void broadcast(void* buf, int64_t n, DType dt, int root) = 0;      // in place
  virtual void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp op, int root) = 0;
  virtual void all_gather(const void* in, void* out, int64_t n, DType dt) = 0;  // out: size()*n
  // Rank r contributes counts[r] elements; out holds them in rank order.
  virtual void all_gather_v(const void* in, void* out, const std::vector<int64_t>& counts, DType dt) = 0;
  virtual void gather(const void* in, void* out, int64_t n, DType dt, int root) = 0;
  virtual void scatter(const void* in, void* out, int64_t n, DType dt, int root) = 0;
  virtual void reduce_scatter(const void* in, void* out, int64_t n, DType dt, ReduceOp op) = 0;  // in: size()*n
  virtual void all_to_all(const void* in, void* out, int64_t n, DType dt) = 0;                   // both: size()*n
  virtual void barrier() = 0;
  // A barrier that does not block: test() the request until every rank has entered it. The
  // default (transports without peers to wait for) completes at once.
  virtual Request ibarrier() {
    barrier();
    return {};
  }

  // --- point to point, in bytes ----------------------------------------------------------
  virtual Request isend(const void* buf, int64_t bytes, int peer, int tag, Channel ch) = 0;
  virtual Request irecv(void* buf, int64_t bytes, int peer, int tag, Channel ch) = 0;
  virtual void wait(Request& r) = 0;
  // True (and r inactive) once r finished; never blocks.
  virtual bool test(Request& r) = 0;
  void wait_all(Request* rs, int count) {
    for (int i = 0; i < count; ++i)
      if (rs[i].active) wait(rs[i]);
  }

  // --- leaving and failing ------------------------------------------------------------------
  // Tells every other rank this one is leaving after `issued` collectives (nonblocking).
  virtual void announce_exit(int64_t issued) { (void)issued; }
  // Notices received since the last call; never blocks.
  virtual std::vector<PeerExit> poll_exits() { return {}; }
  // The status exchange, on the control channel (nonblocking; another thread may call these while
  // a collective runs when concurrent_polling()). Asks every other rank what it is doing:
  virtual void ask_status(int64_t ask) { (void)ask; }
  // Questions received since the last call, and answers to this rank's questions.
  virtual std::vector<StatusAsk> poll_status_asks() { return {}; }
  virtual void send_status(int peer, const StatusReport& report) {
    (void)peer;
    (void)report;
  }
  virtual std::vector<StatusReport> poll_status_replies() { return {}; }
  // Ends the whole job now (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(int code);
  // Releases the backend (MPI_Finalize). The transport is unusable afterwards.
  virtual void finalize() {}
};

// A transport whose collectives are enqueued on a CUDA stream (the communication stream of one
// device) and return without waiting: NcclTransport. Its buffers are device memory. The group
// orders that stream after the caller's stream with an event before each operation and records
// a completion event after it (ProcessGroupImpl::submit_stream); calls come from the caller's
// thread, one at a time. Point-to-point requests come back inactive (complete on the stream).
class StreamTransport : public Transport {
 public:
  virtual int device() const = 0;
  virtual brisk::cuda::Stream stream() const = 0;
  // An event reused to order the communication stream after a producer stream (recorded and
  // waited at once, so later records cannot affect an earlier wait).
  virtual brisk::cuda::Event& ready_event() = 0;
  // A message when the communicator failed asynchronously (polled by the watchdog); "" if fine.
  virtual std::string async_error() { return {}; }
  // Aborts the communicator so that work stuck on its stream ends (after a failure).
  virtual void abort_communicator() {}
};

// dst[i] = op(dst[i], src[i]) for n elements (Avg reduces as Sum). 16-bit floats are
// combined in f32 and rounded once per call; integers wrap like MPI's (no UB on overflow).
// dst and src: n contiguous elements of dt.
void reduce_into(void* dst, const void* src, int64_t n, DType dt, ReduceOp op);
// buf[i] /= divisor: the second half of an average (integers truncate toward zero).
void divide_by(void* buf, int64_t n, DType dt, int divisor);
// Throws unless dt is one of the dtypes collectives support (f64, f32, f16, bf16, i32, i64, u8).
void check_collective_dtype(const char* op, DType dt);

// Host memory for staging CUDA tensors (pinned in CUDA builds) and algorithm scratch.
void* host_alloc(size_t bytes);
void host_free(void* p);

// A world of one process: collectives are identities (self_transport.cpp).
std::unique_ptr<Transport> make_self_transport();
// A world of `size` ranks that all hold this rank's data (fake_transport.cpp; see fake_group()).
std::unique_ptr<Transport> make_fake_transport(int size, int rank, const FakePeerFaults& faults = {});
// NCCL on `device` (cuda_support.cpp, builds with NCCL): with `bootstrap`, a real communicator
// over its ranks (rank 0 makes the id, bootstrap broadcasts it: a collective on bootstrap);
// without (a fake group), or while a CUDA recording session is active, no communicator: every
// NCCL call is logged to the recording instead of made. Returns nullptr in builds without NCCL.
std::unique_ptr<StreamTransport> make_nccl_transport(Transport* bootstrap, int rank, int size, int device);

// The signature of the function libbrisk_dist_mpi.so exports (extern "C"): creates the MPI
// transport (MPI_Init_thread on the calling thread) or returns nullptr with a message in err.
using CreateTransportFn = Transport* (*)(char* err, size_t err_len);
inline constexpr const char* kMpiPluginSymbol = "brisk_dist_mpi_create_transport";

}  // namespace brisk::dist::detail
