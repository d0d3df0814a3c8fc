// The communication thread, the watchdog, Work handles, debug-mode signature checks and the
// failure policy of a ProcessGroup (see group_impl.h).
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "brisk/util/env.h"
#include "brisk/util/trace.h"
#include "group_impl.h"

namespace brisk::dist::detail {

namespace {
using Clock = std::chrono::steady_clock;

double env_timeout() {
  const char* v = std::getenv("BRISK_TIMEOUT_SECONDS");
  if (!v || !*v) return 600;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  BRISK_CHECK(end && *end == '\0' && s > 0, "dist::init: BRISK_TIMEOUT_SECONDS='", v,
              "' is not a positive number of seconds");
  return s;
}

bool env_debug() {
  return envvar::get_bool("BRISK_DEBUG", false);
}

}  // namespace

// --- Signature -----------------------------------------------------------------------------
std::string Signature::str() const {
  std::ostringstream os;
  os << op;
  if (seq >= 0) os << " #" << seq;
  os << " (" << dtype_name(static_cast<DType>(dtype)) << ", [";
  for (int i = 0; i < ndim; ++i) {
    os << (i ? ", " : "");
    if (dims[i] < 0) {
      os << '*';
    } else {
      os << dims[i];
    }
  }
  os << ']';
  if (reduce_op >= 0) os << ", " << reduce_op_name(static_cast<ReduceOp>(reduce_op));
  if (root >= 0) os << ", root " << root;
  os << ')';
  return os.str();
}

bool Signature::operator==(const Signature& o) const {
  if (std::strncmp(op, o.op, sizeof(op)) != 0 || seq != o.seq || dtype != o.dtype || ndim != o.ndim || root != o.root ||
      reduce_op != o.reduce_op)
    return false;
  for (int i = 0; i < ndim && i < 8; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

// --- Work ---------------------------------------------------------------------------------
void WorkImpl::wait() {
  std::unique_lock lk(m_);
  if (!done_) {
    if (on_wait_) {
      lk.unlock();
      on_wait_(+1);
      lk.lock();
    }
    cv_.wait(lk, [&] { return done_; });
    if (on_wait_) {
      lk.unlock();
      on_wait_(-1);
      lk.lock();
    }
  }
  if (!error_.empty()) throw_error(error_, __FILE__, __LINE__);
}

bool WorkImpl::is_completed() const {
  std::lock_guard lk(m_);
  return done_;
}

void WorkImpl::finish() {
  {
    std::lock_guard lk(m_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
}

void WorkImpl::fail(const std::string& message) {
  {
    std::lock_guard lk(m_);
    if (done_) return;
    done_ = true;
    error_ = message.empty() ? "failed" : message;
  }
  cv_.notify_all();
}

// --- StreamWork ---------------------------------------------------------------------------
void StreamWork::rethrow() const {
  std::lock_guard lk(m_);
  if (!error_.empty()) throw_error(error_, __FILE__, __LINE__);
}

void StreamWork::wait() {
  rethrow();
  // The caller's current stream waits for the collective; the host goes on.
  done_.wait(brisk::cuda::current_stream(device().index));
}

void StreamWork::synchronize() {
  rethrow();
  done_.synchronize();
  rethrow();
}

bool StreamWork::is_completed() const {
  {
    std::lock_guard lk(m_);
    if (!error_.empty()) return true;
  }
  return done_.query();
}

void StreamWork::fail(const std::string& message) {
  std::lock_guard lk(m_);
  if (error_.empty()) error_ = message.empty() ? "failed" : message;
}

// --- construction ---------------------------------------------------------------------------
ProcessGroupImpl::ProcessGroupImpl(const InitOptions& o,
                                   const std::function<std::unique_ptr<Transport>()>& make_transport, bool threaded,
                                   bool fake)
    : threaded_(threaded), fake_(fake) {
  timeout_s_ = o.timeout_seconds ? *o.timeout_seconds : env_timeout();
  BRISK_CHECK(timeout_s_ > 0, "dist::init: timeout_seconds must be positive, got ", timeout_s_);
  debug_ = o.debug ? *o.debug : env_debug();
  gate_ = envvar::get_bool("BRISK_COMM_GATE", false);
  poll_max_ =
      std::chrono::microseconds(envvar::get_int("BRISK_COMM_POLL_MAX_US", kPollMin.count(), kPollMin.count(), 1000000));
  on_error_ = o.on_error;
  if (!threaded_) {
    transport_ = make_transport();
  } else {
    // The transport is created on the communication thread: with MPI_THREAD_FUNNELED only
    // the thread that called MPI_Init_thread may call MPI.
    std::string init_error;
    bool ready = false;
    comm_ = std::thread([&, make_transport] {
      pthread_setname_np(pthread_self(), "brisk-comm");  // as `top -H` and `ps -L` show it
      std::unique_ptr<Transport> t;
      try {
        t = make_transport();
      } catch (const std::exception& e) {
        std::lock_guard lk(m_);
        init_error = message_of(e);
      }
      {
        std::lock_guard lk(m_);
        transport_ = std::move(t);
        ready = true;
      }
      cv_.notify_all();
      if (transport_) comm_loop();
    });
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return ready; });
    if (!transport_) {
      lk.unlock();
      comm_.join();
      BRISK_THROW(init_error);
    }
  }
  rank_ = transport_->rank();
  size_ = transport_->size();
  if (threaded_)
    watchdog_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "brisk-watchdog");
      watchdog_loop();
    });
}

ProcessGroupImpl::~ProcessGroupImpl() {
  shutdown();
  if (watchdog_.joinable()) watchdog_.join();
  if (comm_.joinable()) comm_.join();
}

// --- submission -----------------------------------------------------------------------------
WorkPtr ProcessGroupImpl::submit(Signature sig, bool collective, Body run) {
  if (!threaded_) {
    // A world of one: nothing to wait for, run on the caller's thread.
    BRISK_CHECK(!shut_down_, sig.op, ": the process group was shut down (dist::finalize)");
    if (collective) sig.seq = next_seq_++;
    auto work = std::make_shared<WorkImpl>(sig.op, sig.seq);
    try {
      Request r = run();
      if (r.active) transport_->wait(r);
      work->finish();
    } catch (const std::exception& e) {
      work->fail(message_of(e));
    }
    return work;
  }
  std::lock_guard lk(m_);
  BRISK_CHECK(!shut_down_, sig.op, ": the process group was shut down (dist::finalize)");
  if (collective) sig.seq = next_seq_++;
  auto work = std::make_shared<WorkImpl>(sig.op, sig.seq, [this](int delta) { waiters_add(delta); });
  if (poisoned_) {
    work->fail(std::string(sig.op) + ": the process group is unusable after an earlier failure: " + poison_message_);
    return work;
  }
  queue_.push_back(Task{work, sig, collective, std::move(run), {}});
  cv_.notify_one();
  return work;
}

void ProcessGroupImpl::run_control(std::function<void()> fn) {
  auto work = std::make_shared<WorkImpl>("shutdown", -1);
  {
    std::lock_guard lk(m_);
    queue_.push_back(Task{work, Signature{}, false, {}, std::move(fn)});
  }
  cv_.notify_one();
  work->wait();
}

// --- the communication thread ----------------------------------------------------------------
void ProcessGroupImpl::comm_loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock lk(m_);
      while (queue_.empty() && !stop_comm_) {
        if (inflight_.empty()) {
          cv_.wait(lk);
        } else {
          // Nonblocking sends/receives are outstanding: MPI only moves them while we are
          // inside MPI, so poll them (sleeping between polls, longer and longer while nobody
          // waits for them: group_impl.h) until something new arrives.
          lk.unlock();
          const bool progressed = poll_inflight();
          lk.lock();
          poll_every_ = progressed || waiters_ > 0 ? kPollMin : std::min(poll_every_ * 2, poll_max_);
          if (queue_.empty() && !stop_comm_) cv_.wait_for(lk, poll_every_);
        }
      }
      if (queue_.empty()) return;  // stop_comm_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      poll_every_ = kPollMin;  // a new request may finish soon: look early
      if (!task.control) {
        current_ = task.work;
        current_sig_ = task.sig;
        current_start_ = Clock::now();
        running_seq_ = task.collective ? task.sig.seq : -1;
      }
    }
    run_task(task);
    {
      std::lock_guard lk(m_);
      current_.reset();
      running_seq_ = -1;
      if (task.collective) {
        last_sig_ = task.sig;
        last_end_ = Clock::now();
      }
    }
    if (!inflight_.empty()) poll_inflight();
  }
}

void ProcessGroupImpl::run_task(Task& task) {
  if (task.control) {
    try {
      task.control();
      task.work->finish();
    } catch (const std::exception& e) {
      task.work->fail(message_of(e));
    }
    return;
  }
  {
    std::lock_guard lk(m_);
    if (poisoned_) {
      task.work->fail(std::string(task.sig.op) +
                      ": the process group is unusable after an earlier failure: " + poison_message_);
      return;
    }
  }
  auto set_in_backend = [&](bool v) {
    std::lock_guard lk(m_);
    in_backend_ = v;
  };
  set_in_backend(true);
  Request req;
  std::string error;
  bool backend_failed = false;  // (else the arrival gate or debug mode's check failed)
  try {
    if (gate_ && task.collective && size_ > 1) wait_for_peers(task.sig);
    if (debug_ && task.collective) check_signature(task.sig);
    backend_failed = true;
    req = task.run();
  } catch (const std::exception& e) {
    error = message_of(e);
  }
  // A collective the backend failed (MPI_ERR_TRUNCATE when ranks called collectives of different
  // sizes, say) does not say what the other ranks were doing: ask them.
  if (!error.empty() && backend_failed && task.collective)
    error = task.sig.str() + " failed: " + error +
            " (when the ranks called different collectives here, BRISK_DEBUG=1 names the first mismatch)" +
            ranks_report();
  // Out of the backend before anyone hears about it, so shutdown() knows nothing is stuck.
  set_in_backend(false);
  if (!error.empty()) {
    fail(error, task.work);
  } else if (req.active) {
    std::lock_guard lk(m_);
    inflight_.push_back(InFlight{task.work, req, Clock::now(), task.sig});
  } else {
    task.work->finish();
  }
}

void ProcessGroupImpl::wait_for_peers(const Signature& sig) {
  Request r = transport_->ibarrier();
  auto every = kPollMin;
  while (!transport_->test(r)) {
    if (!inflight_.empty()) poll_inflight();
    std::unique_lock lk(m_);
    // The watchdog poisons the group when this wait outlives the timeout (or a peer left).
    BRISK_CHECK(!poisoned_, sig.op, ": ", poison_message_);
    every = waiters_ > 0 ? kPollMin : std::min(every * 2, poll_max_);
    cv_.wait_for(lk, every);
  }
}

void ProcessGroupImpl::waiters_add(int delta) {
  bool wake = false;
  {
    std::lock_guard lk(m_);
    waiters_ += delta;
    wake = delta > 0;  // the thread may be sleeping a long poll interval (comm_loop, wait_for_peers)
  }
  if (wake) cv_.notify_one();
}

bool ProcessGroupImpl::poll_inflight() {
  std::vector<std::shared_ptr<WorkImpl>> done;
  {
    std::lock_guard lk(m_);
    for (size_t i = 0; i < inflight_.size();) {
      if (transport_->test(inflight_[i].req)) {
        done.push_back(inflight_[i].work);
        inflight_.erase(inflight_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  for (auto& w : done) w->finish();
  return !done.empty();
}

// Debug mode: every rank contributes its signature; all compare against rank 0's, so every
// rank finds the same first mismatch and reports the same message.
void ProcessGroupImpl::check_signature(const Signature& sig) {
  std::vector<Signature> all(static_cast<size_t>(size_));
  Signature mine = sig;
  transport_->all_gather(&mine, all.data(), static_cast<int64_t>(sizeof(Signature)), DType::U8);
  for (int i = 1; i < size_; ++i) {
    if (!(all[static_cast<size_t>(i)] == all[0])) {
      BRISK_THROW("collective mismatch (BRISK_DEBUG): rank 0 called ", all[0].str(), " but rank ", i, " called ",
                  all[static_cast<size_t>(i)].str(),
                  "; every rank must call the same collectives in the same order with the same dtype and shape");
    }
  }
}

void ProcessGroupImpl::check_signature_in_order(const Signature& sig) {
  if (!threaded_) {
    check_signature(sig);
    return;
  }
  auto work = std::make_shared<WorkImpl>(sig.op, sig.seq);
  {
    std::lock_guard lk(m_);
    // A collective task whose body does nothing: run_task checks its signature first.
    queue_.push_back(Task{work, sig, true, []() -> Request { return {}; }, {}});
  }
  cv_.notify_one();
  work->wait();
}

// --- failures -------------------------------------------------------------------------------
void ProcessGroupImpl::fail(const std::string& message, const std::shared_ptr<WorkImpl>& work) {
  std::vector<std::shared_ptr<WorkImpl>> also;
  bool first = false;  // the first failure is reported; later ones follow from it
  {
    std::lock_guard lk(m_);
    if (!poisoned_) {
      poisoned_ = true;
      poison_message_ = message;
      first = true;
    }
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->control) {
        ++it;
      } else {
        also.push_back(it->work);
        it = queue_.erase(it);
      }
    }
    for (auto& f : inflight_) also.push_back(f.work);
    inflight_.clear();
  }
  fail_stream_work(message);
  if (on_error_ == OnError::Abort && !first) transport_->abort(1);  // already reported, and under way
  if (on_error_ == OnError::Abort) {
    std::fprintf(stderr,
                 "[brisk rank %d] dist error: %s\n[brisk rank %d] aborting the whole job (dist::OnError::Abort) so "
                 "that no rank waits forever\n",
                 rank_, message.c_str(), rank_);
    std::fflush(stderr);
    // BRISK_TRACE: what this rank recorded up to the failure is written first (an abort skips the
    // write at exit), so the failed attempt of a restarted job can be looked at.
    trace_instant("dist error: aborting the job", "fault");
    trace_flush();
    transport_->abort(1);
  }
  if (work) work->fail(message);
  for (auto& w : also) w->fail(message);
}

std::string ProcessGroupImpl::unusable_reason() {
  std::lock_guard lk(m_);
  if (poisoned_) return "the process group is unusable after an earlier failure: " + poison_message_;
  if (shut_down_) return "the process group was shut down (dist::finalize)";
  return {};
}

void ProcessGroupImpl::fail_stream_work(const std::string& message) {
  std::vector<StreamInFlight> items;
  {
    std::lock_guard lk(m_);
    items.swap(stream_inflight_);
  }
  for (auto& f : items) f.work->fail(message);
  // Work stuck on a communication stream (a peer that never joins) ends only when its
  // communicator is aborted.
  std::lock_guard lk(cuda_m_);
  for (auto& [device, t] : cuda_) t->abort_communicator();
}

std::string ProcessGroupImpl::check_stream_work(bool* timed_out) {
  std::vector<StreamInFlight> items;
  {
    std::lock_guard lk(m_);
    if (poisoned_) return {};
    items = stream_inflight_;
  }
  const auto now = Clock::now();
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  std::string message;
  std::vector<const StreamWork*> done;
  for (auto& f : items) {
    bool complete = false;
    try {
      complete = f.work->is_completed();
    } catch (const std::exception& e) {
      if (message.empty()) message = f.sig.str() + " failed on " + f.work->device().str() + ": " + message_of(e);
      continue;
    }
    if (complete) {
      done.push_back(f.work.get());
    } else if (message.empty() && now - f.start > timeout) {
      std::ostringstream os;
      os << f.sig.str() << " on " << f.work->device().str() << " did not finish within the timeout of " << timeout_s_
         << " s (dist::InitOptions::timeout_seconds / BRISK_TIMEOUT_SECONDS, started "
         << std::chrono::duration<double>(now - f.start).count()
         << " s ago): another rank is not taking part (it is stuck, or in a different collective: run with "
            "BRISK_DEBUG=1 to check); the NCCL communicator is aborted and the process group is now unusable";
      message = os.str();
      *timed_out = true;
    }
  }
  if (!done.empty()) {
    std::lock_guard lk(m_);
    std::erase_if(stream_inflight_, [&](const StreamInFlight& f) {
      return std::find(done.begin(), done.end(), f.work.get()) != done.end();
    });
  }
  if (message.empty()) {
    std::lock_guard lk(cuda_m_);
    for (auto& [device, t] : cuda_) {
      const std::string e = t->async_error();
      if (!e.empty()) {
        message = "the NCCL communicator of cuda:" + std::to_string(device) + " failed: " + e;
        break;
      }
    }
  }
  return message;
}

void ProcessGroupImpl::collect_exits() {
  std::vector<PeerExit> v;
  {
    std::lock_guard lk(exits_m_);
    v = transport_->poll_exits();
  }
  if (v.empty()) return;
  std::lock_guard lk(m_);
  for (auto& e : v) peer_exits_[e.rank] = e.issued;
}

std::string ProcessGroupImpl::check_peer_exits_locked() {
  if (peer_exits_.empty() || poisoned_) return {};
  // Every collective this rank still needs its peers for: on the communication thread, queued
  // for it, outside it (the Reducer's shared memory), or on a communication stream.
  std::vector<const Signature*> pending;
  if (running_seq_ >= 0) pending.push_back(&current_sig_);
  for (auto& t : queue_)
    if (t.collective) pending.push_back(&t.sig);
  if (external_active_) pending.push_back(&external_sig_);
  for (auto& f : stream_inflight_)
    if (f.sig.seq >= 0) pending.push_back(&f.sig);
  for (auto& [peer, issued] : peer_exits_) {
    const Signature* never = nullptr;  // the first collective the peer will never join
    for (const Signature* sig : pending)
      if (sig->seq >= issued && (!never || sig->seq < never->seq)) never = sig;
    if (never) {
      std::ostringstream os;
      os << "rank " << peer << " left the job (its program exited after issuing " << issued
         << " collectives) while this rank waits in " << never->str() << ", which it will never join";
      return os.str();
    }
  }
  return {};
}

void ProcessGroupImpl::watchdog_loop() {
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  const bool poll = transport_->concurrent_polling();
  for (;;) {
    std::unique_lock lk(m_);
    if (cv_watch_.wait_for(lk, std::chrono::milliseconds(20), [&] { return stop_watch_; })) return;
    if (poisoned_) continue;
    const auto now = Clock::now();
    std::string message;
    bool timed_out = false;  // (else a peer left, or a communicator failed)
    std::shared_ptr<WorkImpl> victim;
    auto timeout_message = [&](const Signature& sig, Clock::time_point start) {
      std::ostringstream os;
      os << sig.str() << " did not finish within the timeout of " << timeout_s_
         << " s (dist::InitOptions::timeout_seconds / BRISK_TIMEOUT_SECONDS, started "
         << std::chrono::duration<double>(now - start).count()
         << " s ago): another rank is not taking part (it is stuck, or in a different collective: run with "
            "BRISK_DEBUG=1 to check); an MPI collective cannot be cancelled, so the process group is now unusable";
      timed_out = true;
      return os.str();
    };
    if (current_ && now - current_start_ > timeout) {
      message = timeout_message(current_sig_, current_start_);
      victim = current_;
    }
    for (auto& f : inflight_) {
      if (message.empty() && now - f.start > timeout) {
        message = timeout_message(f.sig, f.start);
        victim = f.work;
      }
    }
    if (message.empty() && poll) {
      lk.unlock();
      collect_exits();
      lk.lock();
      message = check_peer_exits_locked();
      victim = current_;
    }
    lk.unlock();
    if (poll) answer_status_asks();
    if (message.empty()) {
      message = check_stream_work(&timed_out);
      victim.reset();
    }
    // An MPI collective does not say whom it waits for: ask every rank what it is doing.
    if (timed_out) message += ranks_report();
    if (!message.empty()) fail(message, victim);
  }
}

// --- collectives outside the communication thread -------------------------------------------
void ProcessGroupImpl::begin_external(Signature& sig) {
  {
    std::lock_guard lk(m_);
    BRISK_CHECK(!shut_down_, sig.op, ": the process group was shut down (dist::finalize)");
    BRISK_CHECK(!poisoned_, sig.op, ": the process group is unusable after an earlier failure: ", poison_message_);
    sig.seq = next_seq_++;
    external_sig_ = sig;
    external_start_ = Clock::now();
    external_active_ = true;
  }
  if (!debug_) return;
  try {
    check_signature_in_order(sig);
  } catch (...) {
    end_external();
    throw;
  }
}

void ProcessGroupImpl::end_external() {
  std::lock_guard lk(m_);
  if (!external_active_) return;
  external_active_ = false;
  last_sig_ = external_sig_;
  last_end_ = Clock::now();
}

// --- the status exchange ------------------------------------------------------------------------
std::string ProcessGroupImpl::describe_self() {
  std::lock_guard lk(m_);
  const auto now = Clock::now();
  auto secs = [&](Clock::time_point t) {
    std::ostringstream os;
    os.precision(1);
    os << std::fixed << std::chrono::duration<double>(now - t).count() << " s";
    return os.str();
  };
  if (shut_down_)
    return "is leaving the job (its program finished; it issued " + std::to_string(next_seq_) + " collectives)";
  if (current_ && running_seq_ >= 0) return "waits in " + current_sig_.str() + " for " + secs(current_start_);
  if (external_active_) return "waits in " + external_sig_.str() + " for " + secs(external_start_);
  for (auto& f : stream_inflight_)
    if (f.sig.seq >= 0) return "has " + f.sig.str() + " in flight on its GPU for " + secs(f.start);
  for (auto& t : queue_)
    if (t.collective) return "has " + t.sig.str() + " queued";
  if (last_sig_.seq < 0) return "has run no collective yet (it is computing, or stuck outside brisk's collectives)";
  return "is in no collective: it finished " + last_sig_.str() + " " + secs(last_end_) +
         " ago (it is computing, or stuck outside brisk's collectives)";
}

void ProcessGroupImpl::answer_status_asks() {
  std::lock_guard lk(status_m_);
  const std::vector<StatusAsk> asks = transport_->poll_status_asks();
  if (asks.empty()) return;
  StatusReport r;
  r.rank = rank_;
  const std::string text = describe_self();
  std::snprintf(r.text, sizeof(r.text), "%s", text.c_str());
  for (const StatusAsk& a : asks) {
    r.ask = a.ask;
    transport_->send_status(a.peer, r);
  }
}

std::string ProcessGroupImpl::ranks_report() {
  if (!threaded_ || size_ < 2 || !transport_->concurrent_polling()) return {};
  int64_t ask = 0;
  {
    std::lock_guard lk(status_m_);
    ask = asks_++;
    transport_->ask_status(ask);
  }
  std::map<int, std::string> answers{{rank_, describe_self()}};
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (static_cast<int>(answers.size()) < size_ && Clock::now() < deadline) {
    answer_status_asks();  // a peer may be asking this rank at the same time
    {
      // Answers to every question of this rank are kept by question (another thread of this
      // rank may be asking too, and either may receive the other's answers).
      std::lock_guard lk(status_m_);
      for (const StatusReport& r : transport_->poll_status_replies())
        if (r.rank >= 0 && r.rank < size_)
          status_replies_[r.ask][r.rank] = std::string(r.text, strnlen(r.text, sizeof(r.text)));
      for (auto& [q, text] : status_replies_[ask]) answers[q] = text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard lk(status_m_);
    status_replies_.erase(ask);
  }
  std::ostringstream os;
  os << "\n  what each rank is doing now:";
  for (int q = 0; q < size_; ++q) {
    auto it = answers.find(q);
    os << "\n    rank " << q << (q == rank_ ? " (this rank) " : " ")
       << (it != answers.end() ? it->second
                               : "did not answer within 1 s (its process is gone, stopped, or stuck in the kernel)");
  }
  return os.str();
}

bool ProcessGroupImpl::is_shut_down() {
  std::lock_guard lk(m_);
  return shut_down_;
}

void ProcessGroupImpl::abort_job(int code) {
  std::fprintf(stderr, "[brisk rank %d] exiting with status %d: stopping the other %d rank(s) of the job\n", rank_,
               code, size_ - 1);
  std::fflush(stderr);
  if (transport_) transport_->abort(code);
  std::_Exit(code);  // no transport yet (start-up failed): nothing to stop but this process
}

// --- shutdown ---------------------------------------------------------------------------------
// The exit protocol. MPI_Finalize waits for every rank, so a rank that leaves while others
// still wait in a collective would hang them all. Instead, a leaving rank (1) lets its queued
// work finish, (2) tells every peer how many collectives it issued, (3) waits until every
// peer said the same. A peer that waits in a later collective sees the notice and fails
// (aborting the job by default) instead of hanging. Then MPI_Finalize is safe.
void ProcessGroupImpl::shutdown() {
  {
    std::lock_guard lk(m_);
    if (shut_down_) return;
    shut_down_ = true;
    if (!threaded_) return;
    if (poisoned_ && in_backend_) {
      std::fprintf(stderr,
                   "[brisk rank %d] dist: shutting down after an earlier failure (%s) while an operation is still "
                   "stuck inside the backend; aborting the job so that no rank waits forever\n",
                   rank_, poison_message_.c_str());
      std::fflush(stderr);
      transport_->abort(1);
    }
  }
  int64_t issued = 0;
  {
    std::lock_guard lk(m_);
    issued = next_seq_;
  }
  // (1) + (2): runs after everything queued before it.
  run_control([&] {
    for (;;) {  // outstanding sends/receives complete first (the watchdog times them out)
      poll_inflight();
      std::lock_guard lk(m_);
      if (inflight_.empty() || poisoned_) break;
    }
    transport_->announce_exit(issued);
  });
  // (3), polled on the communication thread (the only thread allowed without MULTIPLE).
  run_control([&] {
    for (;;) {
      collect_exits();
      {
        std::lock_guard lk(m_);
        if (static_cast<int>(peer_exits_.size()) >= size_ - 1) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  {
    std::lock_guard lk(m_);
    stop_watch_ = true;
  }
  cv_watch_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  run_control([&] {
    {
      std::lock_guard lk(m_);
      stream_inflight_.clear();
    }
    std::lock_guard lk(cuda_m_);
    cuda_.clear();  // each communicator's outstanding work finishes first
    transport_->finalize();
  });
  {
    std::lock_guard lk(m_);
    stop_comm_ = true;
  }
  cv_.notify_all();
  if (comm_.joinable()) comm_.join();
}

}  // namespace brisk::dist::detail
