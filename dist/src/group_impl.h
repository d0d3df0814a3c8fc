// ProcessGroupImpl: the machinery under a ProcessGroup. Owns the transport, the
// communication thread that runs every operation in submission order (MPI makes no progress
// on its own, so a thread of ours must be inside MPI for async work to move), the watchdog
// that enforces timeouts and notices peers that left, debug-mode signature checks, and the
// failure policy (abort the job, or poison the group and throw).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms.h"
#include "brisk/dist/process_group.h"
#include "transport.h"

namespace brisk::dist::detail {

// What a collective looks like, exchanged across ranks in debug mode. Plain bytes.
struct Signature {
  char op[24] = {};
  int64_t seq = -1;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t dims[8] = {};  // -1: may differ per rank (all_gather_uneven's dim 0)
  int32_t root = -1;
  int32_t reduce_op = -1;
  std::string str() const;  // "all_reduce #3 (f32, [4], sum)"
  bool operator==(const Signature& o) const;
};

class WorkImpl final : public Work {
 public:
  using Work::Work;
  void wait() override;
  bool is_completed() const override;
  void finish();                          // success (no-op when already failed)
  void fail(const std::string& message);  // first failure wins

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

class ProcessGroupImpl {
 public:
  // With `threaded`, make_transport runs on a new communication thread (MPI_Init_thread
  // happens there) and a watchdog starts; without (a world of one) everything runs inline.
  ProcessGroupImpl(const InitOptions& options, std::function<std::unique_ptr<Transport>()> make_transport,
                   bool threaded);
  ~ProcessGroupImpl();

  Transport& transport() { return *transport_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_seconds() const { return timeout_s_; }
  bool debug() const { return debug_; }
  Scratch& scratch() { return scratch_; }
  // Staging area for CUDA tensors on a CPU transport (pinned in CUDA builds).
  Scratch& staging() { return staging_; }
  Transport* cuda_transport(int device);  // NCCL (CUDA builds); nullptr when unavailable

  // Queues a collective (sig.seq assigned here) or a point-to-point operation. `run` executes
  // on the communication thread in submission order; it returns an active request when the
  // operation is a nonblocking send/recv still in flight (the thread polls it to completion).
  using Body = std::function<Request()>;
  WorkPtr submit(Signature sig, bool collective, Body run);

  void shutdown();
  // A rank that exits with a failure status stops the whole job at once (the other ranks may be
  // computing, not communicating, and would otherwise only notice at their next collective).
  [[noreturn]] void abort_job(int code);
  bool is_shut_down();

 private:
  struct Task {
    std::shared_ptr<WorkImpl> work;
    Signature sig;
    bool collective = false;
    Body run;
    std::function<void()> control;  // shutdown steps run on the thread
  };
  struct InFlight {  // a nonblocking send/recv posted and not yet complete
    std::shared_ptr<WorkImpl> work;
    Request req;
    std::chrono::steady_clock::time_point start;
    Signature sig;
  };

  void comm_loop();
  void watchdog_loop();
  void run_task(Task& t);
  void check_signature(const Signature& sig);
  void poll_inflight();
  // Peers that announced they are leaving; returns a failure message when one of them will
  // never take part in a collective this rank has queued or is running.
  std::string check_peer_exits_locked();
  void collect_exits();
  // Reports a failure by policy: abort the job, or poison the group and fail `work`.
  void fail(const std::string& message, const std::shared_ptr<WorkImpl>& work);
  void run_control(std::function<void()> fn);

  bool threaded_ = true;
  std::unique_ptr<Transport> transport_;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 600;
  bool debug_ = false;
  OnError on_error_ = OnError::Abort;
  Scratch scratch_, staging_;
  std::map<int, std::unique_ptr<Transport>> cuda_;  // per CUDA device

  std::mutex m_;
  std::condition_variable cv_;         // wakes the communication thread
  std::condition_variable cv_watch_;   // wakes the watchdog (to stop it)
  std::deque<Task> queue_;
  std::vector<InFlight> inflight_;
  std::shared_ptr<WorkImpl> current_;  // the operation the communication thread is running
  bool in_backend_ = false;            // ... and it is inside the backend (or brisk's algorithm) now
  Signature current_sig_;
  std::chrono::steady_clock::time_point current_start_;
  int64_t next_seq_ = 0;     // collectives issued
  int64_t running_seq_ = -1; // collective the thread is inside (-1: none)
  std::map<int, int64_t> peer_exits_;  // rank -> collectives it issued before leaving
  bool poisoned_ = false;
  std::string poison_message_;
  bool stop_comm_ = false, stop_watch_ = false, shut_down_ = false;
  std::mutex exits_m_;  // serialises poll_exits between the watchdog and shutdown
  std::thread comm_, watchdog_;
};

}  // namespace brisk::dist::detail
