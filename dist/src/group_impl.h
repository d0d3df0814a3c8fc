// ProcessGroupImpl: the machinery under a ProcessGroup. Owns the transport, the
// communication thread that runs every host operation in submission order (MPI makes no
// progress on its own, so a thread of ours must be inside MPI for async work to move), the
// per-device stream transports (NCCL) whose operations the caller's thread enqueues on a
// communication stream, the watchdog that enforces timeouts (on both kinds) and notices peers
// that left, debug-mode signature checks, and the failure policy (abort the job, or poison the
// group and throw).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms.h"
#include "brisk/dist/process_group.h"
#include "brisk/util/error.h"
#include "transport.h"

namespace brisk::dist::detail {

// An exception's text: brisk::Error's message without the source location, else what().
inline std::string message_of(const std::exception& e) {
  if (auto* be = dynamic_cast<const Error*>(&e)) return be->message();
  return e.what();
}

// What a collective looks like, exchanged across ranks in debug mode. Plain bytes.
struct Signature {
  char op[32] = {};
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
  // on_wait(+1) runs when a thread starts waiting for this work while it is not done yet, and
  // on_wait(-1) when that wait ends (the group polls its requests at full speed meanwhile: see
  // ProcessGroupImpl::comm_loop).
  WorkImpl(std::string op, int64_t seq, std::function<void(int)> on_wait)
      : Work(std::move(op), seq), on_wait_(std::move(on_wait)) {}
  void wait() override;
  bool is_completed() const override;
  void finish();                          // success (no-op when already failed)
  void fail(const std::string& message);  // first failure wins

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  std::function<void(int)> on_wait_;
};

// The Work of an operation on a communication stream: `done` is recorded on that stream right
// after the operation. wait() orders the caller's current stream after it (the host does not
// wait); synchronize() and is_completed() ask the event.
class StreamWork final : public Work {
 public:
  StreamWork(std::string op, int64_t seq, Device device, brisk::cuda::Event done)
      : Work(std::move(op), seq, device), done_(std::move(done)) {}
  void wait() override;
  void synchronize() override;
  bool is_completed() const override;
  void fail(const std::string& message);  // first failure wins

 private:
  void rethrow() const;
  brisk::cuda::Event done_;
  mutable std::mutex m_;
  std::string error_;
};

// What a device operation does once its buffers are known: fn(transport, one pointer per tensor).
using DeviceFn = std::function<void(Transport&, const std::vector<void*>&)>;

class ProcessGroupImpl {
 public:
  // With `threaded`, make_transport runs on a new communication thread (MPI_Init_thread
  // happens there) and a watchdog starts; without (a world of one) everything runs inline.
  // With `fake` (dist::fake_group), CUDA tensors use a NCCL transport without a communicator whose
  // calls are only logged to a CUDA recording session.
  ProcessGroupImpl(const InitOptions& options, const std::function<std::unique_ptr<Transport>()>& make_transport,
                   bool threaded, bool fake = false);
  ~ProcessGroupImpl();

  Transport& transport() { return *transport_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_seconds() const { return timeout_s_; }
  bool debug() const { return debug_; }
  Scratch& scratch() { return scratch_; }
  // Staging area for CUDA tensors on a CPU transport (pinned in CUDA builds).
  Scratch& staging() { return staging_; }
  bool fake() const { return fake_; }
  // The stream transport (NCCL) of a CUDA device, made on first use (for a real communicator
  // that is a collective on the host transport, queued like any other, so every rank must reach
  // it at the same point); nullptr where the build has no NCCL (CUDA tensors are then staged
  // through host memory on the communication thread).
  StreamTransport* stream_transport(int device);

  // Queues a collective (sig.seq assigned here) or a point-to-point operation. `run` executes
  // on the communication thread in submission order; it returns an active request when the
  // operation is a nonblocking send/recv still in flight (the thread polls it to completion).
  using Body = std::function<Request()>;
  WorkPtr submit(Signature sig, bool collective, Body run);
  // Runs a device operation on `device`'s stream transport from the caller's thread: records an
  // event on the caller's current stream and makes the communication stream wait for it, marks
  // `tensors` as used on that stream (record_stream), enqueues fn there, and records the Work's
  // completion event. No host synchronisation (debug mode checks the signature first, which
  // waits for the communication thread).
  WorkPtr submit_stream(Signature sig, bool collective, Device device, const std::vector<Tensor>& tensors,
                        const DeviceFn& fn);

  void shutdown();
  // "" while the group is usable; else why not (poisoned by a failure, or shut down).
  std::string unusable_reason();
  // A failure found outside the communication thread (the Reducer's shared-memory barrier),
  // handled by the group's policy: aborts the job (OnError::Abort) or poisons the group.
  void report_failure(const std::string& message) { fail(message, nullptr); }
  // A collective this rank runs outside the communication thread (the Reducer's shared-memory
  // all-reduce). begin_external gives sig the next sequence number, so that peers' exit notices,
  // the status exchange and debug mode count it like any other collective; in debug mode it first
  // compares sig with the other ranks' signatures, in order with the collectives queued before it
  // (a mismatch goes to the failure policy, then throws). Outside debug mode: one lock, no
  // hand-off to another thread. end_external marks it finished.
  void begin_external(Signature& sig);
  void end_external();
  // What every rank is doing, asked of them now over the control channel (each answers from its
  // watchdog thread, whatever its program is doing; 1 s at most): lines to append to a timeout's
  // message, or "" where the transport cannot ask (no concurrent polling, a world of one).
  std::string ranks_report();
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
  struct StreamInFlight {  // an operation enqueued on a communication stream, not known complete
    std::shared_ptr<StreamWork> work;
    std::chrono::steady_clock::time_point start;
    Signature sig;
  };

  void comm_loop();
  void watchdog_loop();
  void run_task(Task& t);
  void check_signature(const Signature& sig);
  // Debug mode for a stream operation: the signature check runs on the communication thread, in
  // order with the host collectives queued before it; waits for it (rethrows a mismatch).
  void check_signature_in_order(const Signature& sig);
  bool poll_inflight();  // true when a request completed
  // The arrival gate (BRISK_COMM_GATE=1; off by default): waits, sleeping between polls, until
  // every rank has reached this collective, so that the backend's blocking call that follows does
  // not spin while a slower rank is still computing (docs/data-parallel.md, "Waiting for a late
  // rank").
  void wait_for_peers(const Signature& sig);
  void waiters_add(int delta);  // threads waiting for a work (on_wait): poll at full speed while any
  // Peers that announced they are leaving; returns a failure message when one of them will
  // never take part in a collective this rank has queued, is running (on the communication
  // thread or outside it), or has in flight on a communication stream.
  std::string check_peer_exits_locked();
  // The status exchange: this rank's answer, and answering the questions that arrived.
  std::string describe_self();
  void answer_status_asks();
  void collect_exits();
  // Reports a failure by policy: abort the job, or poison the group and fail `work`.
  void fail(const std::string& message, const std::shared_ptr<WorkImpl>& work);
  void run_control(std::function<void()> fn);
  // Watchdog part for stream work: drops completed entries; returns a failure message (a
  // timeout, which sets *timed_out, or a communicator's asynchronous error) or "".
  std::string check_stream_work(bool* timed_out);
  // After a failure: fails every stream work in flight and aborts the communicators.
  void fail_stream_work(const std::string& message);

  bool threaded_ = true;
  bool fake_ = false;
  std::unique_ptr<Transport> transport_;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 600;
  bool debug_ = false;
  OnError on_error_ = OnError::Abort;
  Scratch scratch_, staging_;
  // Lock order: create_m_ or device_m_, then cuda_m_ or m_.
  std::mutex create_m_;  // one stream transport made at a time (its id exchange is a collective)
  std::mutex device_m_;  // one stream operation enqueued at a time (seq order = stream order)
  std::mutex cuda_m_;    // guards cuda_
  std::map<int, std::unique_ptr<StreamTransport>> cuda_;  // per CUDA device

  std::mutex m_;
  std::condition_variable cv_;        // wakes the communication thread
  std::condition_variable cv_watch_;  // wakes the watchdog (to stop it)
  std::deque<Task> queue_;
  std::vector<InFlight> inflight_;
  // Polling requests in flight (and the gate): every kPollMin at first, doubling after each poll
  // that found nothing done up to poll_max_ (BRISK_COMM_POLL_MAX_US, default kPollMin: no
  // growth) while no thread waits for them; at kPollMin while a thread waits (waiters_ > 0).
  // A larger maximum costs fewer wake-ups during a long wait nobody is blocked on.
  static constexpr std::chrono::microseconds kPollMin{50};
  std::chrono::microseconds poll_max_{kPollMin}, poll_every_{kPollMin};
  int waiters_ = 0;
  bool gate_ = false;
  std::vector<StreamInFlight> stream_inflight_;
  std::shared_ptr<WorkImpl> current_;  // the operation the communication thread is running
  bool in_backend_ = false;            // ... and it is inside the backend (or brisk's algorithm) now
  Signature current_sig_;
  std::chrono::steady_clock::time_point current_start_;
  int64_t next_seq_ = 0;               // collectives issued
  int64_t running_seq_ = -1;           // collective the thread is inside (-1: none)
  std::map<int, int64_t> peer_exits_;  // rank -> collectives it issued before leaving
  bool external_active_ = false;       // a collective runs outside the communication thread
  Signature external_sig_;
  std::chrono::steady_clock::time_point external_start_;
  Signature last_sig_;  // the last collective this rank finished (seq -1: none yet), and when
  std::chrono::steady_clock::time_point last_end_;
  std::mutex status_m_;                                           // serialises the status exchange's transport calls
  int64_t asks_ = 0;                                              // questions this rank has asked
  std::map<int64_t, std::map<int, std::string>> status_replies_;  // question -> rank -> answer
  bool poisoned_ = false;
  std::string poison_message_;
  bool stop_comm_ = false, stop_watch_ = false, shut_down_ = false;
  std::mutex exits_m_;  // serialises poll_exits between the watchdog and shutdown
  std::thread comm_, watchdog_;
};

}  // namespace brisk::dist::detail
