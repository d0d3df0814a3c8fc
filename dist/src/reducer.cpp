// The Reducer: bucket layout, the gradient hooks that fill buckets and launch their
// all-reduces in order, a watcher thread that timestamps each all-reduce's completion, and
// finalize(), which waits for them and writes the averages back into p.grad().
//
// CUDA gradients: the buckets are device buffers; a hook copies its gradient into the bucket on
// the current (compute) stream, and a full bucket's all-reduce (NCCL, ReduceOp::Avg: averaged on
// the GPU) is enqueued on the communication stream after an event on the compute stream, all
// from the backward thread, without waiting. finalize() makes the compute stream wait for each
// bucket's completion event and enqueues the copies back into p.grad() there, so the optimizer
// step that follows on that stream sees the averages: no host synchronisation per bucket or per
// step. The watcher polls the completion events only to timestamp them.
#include "brisk/dist/reducer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "brisk/autograd/engine.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/threads.h"
#include "brisk/util/trace.h"
#include "group_impl.h"
#include "shm.h"

namespace brisk::dist {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

struct Reducer::Impl {
  struct Param {
    size_t index;  // into the user's params list
    std::string name;
    Tensor tensor;
    size_t bucket = 0;
    int64_t offset = 0;  // elements into the bucket's buffer
  };
  struct Bucket {
    Tensor flat;            // (numel,) contiguous, the params' dtype and device
    size_t shm_offset = 0;  // shared memory: bytes into each region
    int64_t numel = 0;
    std::vector<size_t> members;  // indices into params
    size_t pending = 0;           // gradients still missing in this pass
    WorkPtr work;
  };
  // One synced pass's all-reduce events, completed by the watcher (for CUDA buckets possibly
  // after the pass's finalize() returned).
  struct PassLog {
    std::vector<Event> events;
    size_t completed = 0;
    double last_end = 0;  // when the previous all-reduce of this pass finished
  };
  struct Pending {  // a launched all-reduce the watcher waits for
    size_t bucket;
    WorkPtr work;
    std::shared_ptr<PassLog> log;
    size_t index;  // into log->events
  };

  Impl(ProcessGroup& g, ReducerOptions o) : pg(g), opts(o) {}

  ProcessGroup& pg;
  ReducerOptions opts;
  // Shared-memory mode: the segment the buckets live in (declared before them: it must outlive
  // their views), and why it can no longer be used after a failed barrier.
  std::unique_ptr<detail::SharedSegment> shm;
  std::string broken;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::vector<BucketInfo> infos;
  bool sync = true;

  // Per synced pass (touched by the backward thread only).
  bool pass_active = false;
  // Alive while the engine holds our end-of-pass callback: expired with pass_active means the
  // backward pass threw before its end (the engine dropped the callback).
  std::weak_ptr<char> pass_token;
  std::vector<bool> ready;
  size_t next_launch = 0;
  double backward_end_us = 0;

  // Shared with the watcher thread.
  std::mutex m;
  std::condition_variable cv;
  std::deque<Pending> queue;
  std::shared_ptr<PassLog> cur_log = std::make_shared<PassLog>();  // this pass's
  std::shared_ptr<PassLog> last_log;                               // the last finalized pass's
  std::vector<Event> events;                                       // what last_step_events() returned last
  bool stop = false;
  std::thread watcher;

  Tensor slot(const Param& p) const { return view_of(buckets[p.bucket].flat, p); }
  static Tensor view_of(const Tensor& flat, const Param& p) {
    return flat.as_strided(p.tensor.sizes(), contiguous_strides(p.tensor.sizes()), flat.offset() + p.offset);
  }

  // --- the watcher: records when each all-reduce finishes (Work has no completion callback) ---
  void watch() {
    for (;;) {
      Pending job;
      {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      if (job.work->device().is_cuda()) {
        // A CUDA all-reduce: poll its completion event (wait() would only make this thread's
        // stream wait). Failures show as completed; finalize() reports them.
        for (;;) {
          bool done = true;
          try {
            done = job.work->is_completed();
          } catch (const std::exception&) {
          }
          if (done) break;
          {
            std::lock_guard lk(m);
            if (stop) break;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      } else {
        try {
          job.work->wait();
        } catch (const std::exception&) {
          // finalize() calls wait() itself and reports the failure.
        }
      }
      const double end = trace_now_us();
      std::lock_guard lk(m);
      Event& e = job.log->events[job.index];
      e.end_us = end;
      // The communication thread (or stream) runs one operation at a time, in launch order: this
      // one ran from its launch or the previous one's end, whichever is later. (The trace shows
      // that interval, so spans on the thread do not overlap; the launch itself is an instant on
      // the computation thread.)
      trace_complete(std::string("all_reduce bucket ").append(std::to_string(job.bucket)), "comm",
                     std::max(e.start_us, job.log->last_end), end, kTraceCommTid);
      job.log->last_end = end;
      ++job.log->completed;
      cv.notify_all();
    }
  }

  // --- one synced backward pass ---
  void begin_pass(const std::weak_ptr<Impl>& self) {
    pass_active = true;
    ready.assign(params.size(), false);
    for (Bucket& b : buckets) {
      b.pending = b.members.size();
      b.work.reset();
    }
    next_launch = 0;
    {
      std::lock_guard lk(m);
      cur_log = std::make_shared<PassLog>();
    }
    auto token = std::make_shared<char>(0);
    pass_token = token;
    autograd::queue_callback([self, token] {
      if (auto s = self.lock()) s->finalize();
    });
  }

  void mark_ready(size_t i, const Tensor& grad) {
    const Param& p = params[i];
    Tensor dst = slot(p);
    if (grad.defined()) {
      // Shared memory: backward wrote the gradient into its slot already (set_grad_buffer).
      if (grad.data_ptr() != dst.data_ptr() || grad.strides() != dst.strides()) kernels::copy_(dst, grad);
    } else {
      kernels::fill_(dst, 0.0);
    }
    ready[i] = true;
    --buckets[p.bucket].pending;
  }

  // Launches every ready bucket that has all its predecessors launched: the same order on
  // every rank, whatever order the hooks fire in.
  void launch_ready() {
    if (shm) return;  // shared memory: everything at the end of backward (finalize)
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      const size_t b = next_launch++;
      const double start = trace_now_us();
      WorkPtr w = pg.all_reduce_async(buckets[b].flat, {.op = ReduceOp::Avg, .algorithm = opts.algorithm});
      buckets[b].work = w;
      trace_instant(std::string("launch bucket ").append(std::to_string(b)), "comm", kTraceComputeTid, start);
      std::lock_guard lk(m);
      cur_log->events.push_back(Event{b, start, start});
      queue.push_back(Pending{b, std::move(w), cur_log, cur_log->events.size() - 1});
      cv.notify_all();
    }
  }

  void on_grad(size_t i, const Tensor& grad, const std::weak_ptr<Impl>& self) {
    if (!sync) return;                                   // no_sync: gradients accumulate locally
    if (!autograd::in_backward_pass()) return;           // autograd::grad(): no pass to finish
    if (pass_active && pass_token.expired()) abandon();  // the last pass died half-way
    if (!pass_active) begin_pass(self);
    if (ready[i]) return;  // the engine fires a leaf's hooks once per pass
    // In the profiler: copying the gradient into its bucket and launching the ready buckets.
    profiler::Scope prof_scope("Reducer.hook");
    mark_ready(i, grad);
    launch_ready();
  }

  // Waits for everything launched (ignoring failures) and ends the pass: the way out of an error.
  void abandon() {
    for (Bucket& b : buckets)
      if (b.work) {
        try {
          b.work->wait();
        } catch (const std::exception&) {
        }
      }
    std::shared_ptr<PassLog> log;
    {
      std::lock_guard lk(m);
      log = cur_log;
    }
    wait_watcher(log);
    pass_active = false;
  }

  // Until the watcher has seen every all-reduce of `log` finish (for CUDA buckets: the host
  // waits for the GPU).
  void wait_watcher(const std::shared_ptr<PassLog>& log) {
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return stop || log->completed == log->events.size(); });
  }

  const std::vector<Event>& last_events() {
    std::shared_ptr<PassLog> log;
    {
      std::lock_guard lk(m);
      log = last_log;
    }
    if (log) wait_watcher(log);
    std::lock_guard lk(m);
    events = log ? log->events : std::vector<Event>{};
    return events;
  }

  // Why these buckets cannot go through shared memory ("" if they can).
  std::string shm_obstacle() const {
    for (const Bucket& b : buckets) {
      const Param& p = params[b.members.front()];
      if (!p.tensor.device().is_cpu())
        return "parameter " + p.name + " is on " + p.tensor.device().str() +
               " (GPU gradients go through NCCL: use ReducerMode::Auto or Overlap)";
    }
    if (opts.algorithm != Algorithm::Default)
      return std::string("algorithm ") + algorithm_name(opts.algorithm) +
             " was asked for (it applies to ReducerMode::Overlap)";
    return {};
  }

  // The buckets' buffers: in a shared-memory segment when the mode resolves to SharedMemory
  // (a collective: see reducer.h), else ordinary zeroed memory of the parameters' device.
  void setup_buffers() {
    ReducerMode mode = opts.mode;
    const char* env = std::getenv("BRISK_REDUCER_MODE");
    if (mode == ReducerMode::Auto && env && *env) mode = reducer_mode_from_name(env);
    if (pg.size() > 1 && mode != ReducerMode::Overlap) {
      std::string why = shm_obstacle();
      if (why.empty()) {
        size_t bytes = 0;
        for (Bucket& b : buckets) {
          b.shm_offset = bytes;
          bytes += (static_cast<size_t>(b.numel) * dtype_size(params[b.members.front()].tensor.dtype()) + 63) / 64 * 64;
        }
        const bool wants =
            mode == ReducerMode::SharedMemory || pg.size() * std::max(1, get_num_threads()) >= detail::usable_cpus();
        shm = detail::SharedSegment::create(pg, bytes, wants, &why);
      }
      BRISK_CHECK(shm || mode != ReducerMode::SharedMemory,
                  "Reducer: ReducerMode::SharedMemory is not possible here: ", why,
                  " (ReducerMode::Auto falls back to overlapping all-reduces through the process group)");
    }
    for (Bucket& b : buckets) {
      const Tensor& first = params[b.members.front()].tensor;
      if (shm) {
        b.flat = shm->view(shm->rank(), b.shm_offset, b.numel, first.dtype());
      } else {
        MemoryCategoryGuard cat(MemoryCategory::Gradients);
        b.flat = zeros({b.numel}, {first.dtype(), first.device()});
      }
    }
  }

  // Shared memory: meet every rank (their buckets are full), average this rank's share of each
  // bucket and write it into every rank's region, meet again (every share is done): each rank's
  // buckets then hold the averages, where backward wrote its gradients. A failed barrier (a peer
  // exited or timed out) goes to the group's failure policy and leaves the segment unusable.
  void all_reduce_shared(PassLog& log) {
    if (!broken.empty()) {
      pass_active = false;
      BRISK_THROW("Reducer: the shared-memory all-reduce failed earlier (", broken,
                  "); this Reducer cannot be used again");
    }
    const int W = shm->size(), me = shm->rank();
    // A collective of the group like any other: it takes a sequence number (peers that leave
    // before it, the status report and debug mode's signature check count it).
    detail::Signature sig = shm_signature();
    auto& group = pg.impl();
    try {
      group.begin_external(sig);
    } catch (...) {
      pass_active = false;
      throw;
    }
    const std::string op = sig.str();
    double start = 0;
    try {
      auto interrupted = [&group] { return group.unusable_reason(); };
      auto report = [&group] { return group.ranks_report(); };
      shm->barrier(op.c_str(), pg.timeout_seconds(), interrupted, report);
      start = trace_now_us();
      std::vector<void*> data(static_cast<size_t>(W));
      for (Bucket& b : buckets) {
        const int64_t n = b.flat.numel();
        const DType dt = b.flat.dtype();
        // Shares of whole cache lines, so no two ranks write the same line of the result.
        const auto line = static_cast<int64_t>(64 / dtype_size(dt));
        const int64_t share = ((n + W - 1) / W + line - 1) / line * line;
        const int64_t lo = std::min(n, share * me), hi = std::min(n, lo + share);
        for (int r = 0; r < W; ++r) data[static_cast<size_t>(r)] = static_cast<char*>(shm->region(r)) + b.shm_offset;
        detail::reduce_ranks_in_place(data.data(), W, lo, hi, dt, ReduceOp::Avg);
      }
      shm->barrier(op.c_str(), pg.timeout_seconds(), interrupted, report);
    } catch (const Error& e) {
      group.end_external();
      broken = e.message();
      pass_active = false;
      group.report_failure(broken);  // aborts the job (OnError::Abort) or poisons the group
      throw;
    }
    group.end_external();
    const double end = trace_now_us();
    std::lock_guard lk(m);
    for (size_t b = 0; b < buckets.size(); ++b) log.events.push_back(Event{b, start, end});
    log.completed = log.events.size();
    log.last_end = end;
    trace_complete("shared-memory all_reduce", "comm", start, end, kTraceComputeTid);
  }

  // The shared-memory all-reduce's signature: kind, the buckets' dtype (the first's, when they
  // differ) and element count.
  detail::Signature shm_signature() const {
    detail::Signature sig;
    std::snprintf(sig.op, sizeof(sig.op), "%s", "Reducer all_reduce (shm)");
    int64_t numel = 0;
    for (const Bucket& b : buckets) numel += b.numel;
    sig.dtype = static_cast<int32_t>(buckets.empty() ? DType::F32 : buckets.front().flat.dtype());
    sig.ndim = 1;
    sig.dims[0] = numel;
    sig.reduce_op = static_cast<int32_t>(ReduceOp::Avg);
    return sig;
  }

  void finalize() {
    if (!pass_active) return;
    if (pass_token.expired()) {  // its backward threw: nothing consistent to write back
      abandon();
      return;
    }
    // In the profiler: waiting for the all-reduces still running and writing the averages back.
    profiler::Scope prof_scope("Reducer.finalize");
    const double t0 = trace_now_us();
    backward_end_us = t0;

    std::vector<size_t> missing;
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) missing.push_back(i);
    if (!missing.empty() && !opts.find_unused_parameters) {
      abandon();
      std::ostringstream names;
      for (size_t k = 0; k < missing.size(); ++k) names << (k ? ", " : "") << params[missing[k]].name;
      BRISK_THROW("Reducer: parameters [", names.str(),
                  "] got no gradient in this backward pass; pass find_unused_parameters=true to the Reducer "
                  "(or the Accelerator) if some parameters are unused in a step, or make sure every parameter "
                  "contributes to the loss");
    }
    // Unused here: their gradient so far (accumulated under no_sync) or zeros, so every rank
    // still launches every bucket, in the same order.
    for (size_t i : missing) mark_ready(i, params[i].tensor.grad());
    launch_ready();

    // Which parameters has any rank a gradient for? (find_unused_parameters only; every rank
    // runs this collective every pass, after the buckets.)
    Tensor has_grad;
    if (opts.find_unused_parameters) {
      has_grad = empty({static_cast<int64_t>(params.size())}, DType::F32);
      float* h = has_grad.data<float>();
      for (size_t i = 0; i < params.size(); ++i) h[i] = params[i].tensor.grad().defined() ? 1.0f : 0.0f;
    }
    try {
      if (has_grad.defined()) pg.all_reduce(has_grad, {.op = ReduceOp::Max});
    } catch (...) {
      abandon();
      throw;
    }
    std::shared_ptr<PassLog> log;
    {
      std::lock_guard lk(m);
      log = cur_log;
    }
    if (shm) {
      all_reduce_shared(*log);
    } else {
      // Host buckets: wait() blocks until each is done. CUDA buckets: wait() makes the current
      // (compute) stream wait for each bucket's completion event; the host goes on.
      bool host_buckets = false;
      try {
        for (Bucket& b : buckets) {
          b.work->wait();
          host_buckets = host_buckets || !b.work->device().is_cuda();
        }
      } catch (...) {
        abandon();
        throw;
      }
      if (host_buckets) wait_watcher(log);  // done already: only the timestamps are missing
    }

    // Write the averages back.
    const float* h = has_grad.defined() ? has_grad.data<float>() : nullptr;
    for (size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      if (h && h[i] == 0.0f) continue;  // no rank has a gradient: leave p.grad() as it is
      Tensor src = slot(p);
      Tensor g = p.tensor.grad();
      if (g.defined()) {
        // Shared memory: backward wrote the gradient into its slot, which now holds the average.
        if (shm && g.data_ptr() == src.data_ptr() && g.strides() == src.strides()) continue;
        kernels::copy_(g, src);
      } else {
        MemoryCategoryGuard cat(MemoryCategory::Gradients);
        Tensor fresh = empty(p.tensor.sizes(), p.tensor.dtype(), p.tensor.device());
        kernels::copy_(fresh, src);
        p.tensor.set_grad(fresh);
      }
    }
    {
      std::lock_guard lk(m);
      last_log = log;
    }
    pass_active = false;
    trace_complete("reducer finalize", "comm", t0, trace_now_us(), kTraceComputeTid);
  }
};

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& pg, ReducerOptions o)
    : impl_(std::make_shared<Impl>(pg, o)) {
  BRISK_CHECK(o.bucket_cap_mb >= 0 && o.first_bucket_mb >= 0,
              "Reducer: bucket sizes must be >= 0 MiB, got "
              "bucket_cap_mb=",
              o.bucket_cap_mb, " first_bucket_mb=", o.first_bucket_mb);
  Impl& im = *impl_;
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    auto& [name, t] = params[i];
    BRISK_CHECK(t.defined(), "Reducer: parameter ", name, " is an undefined tensor");
    if (!t.requires_grad()) continue;
    if (!seen.insert(t.impl()).second) continue;  // tied: reduced once
    BRISK_CHECK(t.is_leaf(), "Reducer: parameter ", name, " (shape ", t.sizes(),
                ") is not a leaf tensor; only leaves get gradients in .grad()");
    BRISK_CHECK(t.is_floating_point(), "Reducer: parameter ", name, " has dtype ", dtype_name(t.dtype()),
                "; gradients need a floating-point dtype");
    im.params.push_back(Impl::Param{i, name, t});
  }

  // Buckets in reverse order: the first small, the rest up to the cap; a new bucket also
  // where the dtype or device changes (one flat buffer holds one dtype).
  const size_t n = im.params.size();
  std::vector<size_t> members;
  size_t bytes = 0;
  auto close_bucket = [&] {
    if (members.empty()) return;
    Impl::Bucket b;
    int64_t numel = 0;
    for (size_t k : members) {
      im.params[k].bucket = im.buckets.size();
      im.params[k].offset = numel;
      numel += im.params[k].tensor.numel();
    }
    b.numel = numel;  // the buffer is allocated once the mode is known (below)
    b.members = members;
    BucketInfo info{{}, bytes};
    for (size_t k : members) info.params.push_back(im.params[k].index);
    im.buckets.push_back(std::move(b));
    im.infos.push_back(std::move(info));
    members.clear();
    bytes = 0;
  };
  for (size_t r = 0; r < n; ++r) {
    const size_t k = n - 1 - r;
    const Tensor& t = im.params[k].tensor;
    const double cap = (im.buckets.empty() ? o.first_bucket_mb : o.bucket_cap_mb) * kMiB;
    if (!members.empty()) {
      const Tensor& prev = im.params[members.back()].tensor;
      if (static_cast<double>(bytes + t.nbytes()) > cap || prev.dtype() != t.dtype() || prev.device() != t.device())
        close_bucket();
    }
    members.push_back(k);
    bytes += t.nbytes();
  }
  close_bucket();
  im.setup_buffers();

  std::weak_ptr<Impl> self = impl_;
  for (size_t k = 0; k < n; ++k) {
    im.params[k].tensor.register_hook([self, k](const Tensor& grad) {
      if (auto s = self.lock()) s->on_grad(k, grad, self);
    });
    // Shared memory: a fresh gradient is written straight into its bucket slot (the bucket is
    // this rank's region of the segment, which the others read only inside finalize()), so the
    // hook copies nothing; p.grad() stays a view of the bucket (PyTorch's gradient_as_bucket_view).
    if (im.shm)
      autograd::set_grad_buffer(im.params[k].tensor, [self, k]() -> Tensor {
        if (auto s = self.lock()) return s->slot(s->params[k]);
        return {};
      });
  }
  im.watcher = std::thread([&im] { im.watch(); });
}

Reducer::~Reducer() {
  Impl& im = *impl_;
  if (im.pass_active) im.abandon();
  {
    std::lock_guard lk(im.m);
    im.stop = true;
  }
  im.cv.notify_all();
  if (im.watcher.joinable()) im.watcher.join();
  if (im.shm)
    for (auto& p : im.params) autograd::set_grad_buffer(p.tensor, nullptr);
  impl_.reset();  // the hooks' weak references expire: they do nothing from now on
}

void Reducer::set_sync(bool sync) {
  impl_->sync = sync;
}
bool Reducer::sync() const {
  return impl_->sync;
}
void Reducer::finalize() {
  impl_->finalize();
}
const std::vector<BucketInfo>& Reducer::buckets() const {
  return impl_->infos;
}
const std::vector<Reducer::Event>& Reducer::last_step_events() const {
  return impl_->last_events();
}
double Reducer::last_backward_end_us() const {
  return impl_->backward_end_us;
}
bool Reducer::uses_shared_memory() const {
  return impl_->shm != nullptr;
}

const char* reducer_mode_name(ReducerMode m) {
  switch (m) {
    case ReducerMode::Auto:
      return "auto";
    case ReducerMode::Overlap:
      return "overlap";
    case ReducerMode::SharedMemory:
      return "shm";
  }
  return "?";
}

ReducerMode reducer_mode_from_name(const std::string& name) {
  for (ReducerMode m : {ReducerMode::Auto, ReducerMode::Overlap, ReducerMode::SharedMemory})
    if (name == reducer_mode_name(m)) return m;
  BRISK_THROW("Reducer: unknown mode '", name, "' (BRISK_REDUCER_MODE / ReducerMode): choose auto, overlap or shm");
}

}  // namespace brisk::dist
