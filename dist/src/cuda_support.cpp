// CUDA builds only: pinned host memory for staging, the NCCL transport (one communicator and one
// communication stream per device), and the group's path for CUDA tensors: operations are
// enqueued from the caller's thread on the communication stream, ordered after the caller's
// current stream by an event, and their Work waits with an event too, so nothing here makes the
// host wait for the GPU. While a CUDA recording session is alive every NCCL call is logged
// (Kind::Library, "ncclAllReduce" ...) instead of made; a fake group's transport has no
// communicator at all and works only then.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <set>

#include "brisk/kernels/cuda_recording.h"
#include "group_impl.h"

#if BRISK_DIST_NCCL
#include <nccl.h>
#endif

#define BRISK_DIST_CUDA_CHECK(call)                                                                                  \
  do {                                                                                                               \
    cudaError_t brisk_err_ = (call);                                                                                 \
    if (brisk_err_ != cudaSuccess) [[unlikely]] {                                                                    \
      (void)cudaGetLastError();                                                                                      \
      BRISK_THROW("CUDA error in ", #call, ": ", cudaGetErrorString(brisk_err_), " (", cudaGetErrorName(brisk_err_), \
                  ")");                                                                                              \
    }                                                                                                                \
  } while (0)

namespace brisk::dist::detail {

// --- pinned staging memory ------------------------------------------------------------------
namespace {
std::mutex g_pinned_m;
std::set<void*> g_pinned;  // pointers from cudaMallocHost (the rest came from operator new)
}  // namespace

void* host_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) == cudaSuccess) {
    std::lock_guard lk(g_pinned_m);
    g_pinned.insert(p);
    return p;
  }
  (void)cudaGetLastError();  // no driver or GPU: plain memory works, only slower to copy
  return ::operator new (bytes, std::align_val_t{64});
}

void host_free(void* p) {
  {
    std::lock_guard lk(g_pinned_m);
    if (g_pinned.erase(p)) {
      cudaFreeHost(p);
      return;
    }
  }
  ::operator delete (p, std::align_val_t{64});
}

#if BRISK_DIST_NCCL

#define BRISK_NCCL_CHECK(call)                                                        \
  do {                                                                                \
    ncclResult_t brisk_nccl_rc_ = (call);                                             \
    if (brisk_nccl_rc_ != ncclSuccess) [[unlikely]]                                   \
      BRISK_THROW("NCCL error in ", #call, ": ", ncclGetErrorString(brisk_nccl_rc_)); \
  } while (0)

namespace {

namespace rec = brisk::cuda::recording;

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F64:
      return ncclFloat64;
    case DType::F32:
      return ncclFloat32;
    case DType::F16:
      return ncclFloat16;
    case DType::BF16:
      return ncclBfloat16;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
    default:
      BRISK_THROW("nccl: no NCCL datatype for ", dtype_name(dt));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Prod:
      return ncclProd;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Avg:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      return ncclAvg;  // sum then divide, on the GPU
#else
      BRISK_THROW("nccl: ReduceOp::Avg needs NCCL 2.10 or newer");
#endif
  }
  return ncclSum;
}

// Every call enqueues on stream_ and returns; ordering and completion are the group's business
// (ProcessGroupImpl::submit_stream). The caller has made device_ current and stream_ the
// current stream of device_ (local copies of the root's own block go there).
class NcclTransport final : public StreamTransport {
 public:
  NcclTransport(Transport* bootstrap, int rank, int size, int device)
      : bootstrap_(bootstrap), rank_(rank), size_(size), device_(device) {
    brisk::cuda::DeviceGuard guard(device);
    if (!bootstrap || rec::active()) {
      BRISK_CHECK(rec::active(),
                  "nccl: a fake group's CUDA collectives run only while a cuda::recording::Session is "
                  "alive (there is no communicator)");
      stream_ = brisk::cuda::Stream::create(device, /*high_priority=*/true);
      return;
    }
    ncclUniqueId id{};
    if (bootstrap->rank() == 0) BRISK_NCCL_CHECK(ncclGetUniqueId(&id));
    bootstrap->broadcast(&id, static_cast<int64_t>(sizeof(id)), DType::U8, 0);
    BRISK_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
    // A stream of our own (not from brisk's pool, which other users share), at the highest
    // priority so that gradient all-reduces overtake queued compute kernels.
    int lo = 0, hi = 0;
    BRISK_DIST_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    BRISK_DIST_CUDA_CHECK(cudaStreamCreateWithPriority(&owned_stream_, cudaStreamNonBlocking, hi));
    stream_ = brisk::cuda::stream_from_handle(owned_stream_, device);
    BRISK_DIST_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int32_t)));
  }
  ~NcclTransport() override {
    if (!comm_ && !owned_stream_) return;
    (void)cudaSetDevice(device_);
    if (comm_) {
      if (aborted_) {
        ncclCommAbort(comm_);
      } else {
        (void)cudaStreamSynchronize(owned_stream_);  // outstanding collectives finish first
        ncclCommDestroy(comm_);
      }
    }
    if (barrier_word_) cudaFree(barrier_word_);
    if (owned_stream_) cudaStreamDestroy(owned_stream_);
    (void)cudaGetLastError();
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return bootstrap_ ? bootstrap_->local_rank() : rank_; }
  int local_size() const override { return bootstrap_ ? bootstrap_->local_size() : size_; }
  int device() const override { return device_; }
  brisk::cuda::Stream stream() const override { return stream_; }
  brisk::cuda::Event& ready_event() override { return ready_; }

  void all_reduce(void* buf, int64_t n, DType dt, ReduceOp op) override {
    const auto t = nccl_type(dt);
    const auto o = nccl_op(op);
    call("ncclAllReduce", [&] { return ncclAllReduce(buf, buf, count(n), t, o, comm_, s()); });
  }
  void broadcast(void* buf, int64_t n, DType dt, int root) override {
    const auto t = nccl_type(dt);
    call("ncclBroadcast", [&] { return ncclBroadcast(buf, buf, count(n), t, root, comm_, s()); });
  }
  void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp op, int root) override {
    const auto t = nccl_type(dt);
    const auto o = nccl_op(op);
    call("ncclReduce", [&] { return ncclReduce(in, out, count(n), t, o, root, comm_, s()); });
  }
  void all_gather(const void* in, void* out, int64_t n, DType dt) override {
    const auto t = nccl_type(dt);
    call("ncclAllGather", [&] { return ncclAllGather(in, out, count(n), t, comm_, s()); });
  }
  // Uneven: one broadcast per rank, grouped so NCCL runs them together.
  void all_gather_v(const void* in, void* out, const std::vector<int64_t>& counts, DType dt) override {
    const auto t = nccl_type(dt);
    char* o = static_cast<char*>(out);
    call("ncclGroupStart", [] { return ncclGroupStart(); });
    for (int r = 0; r < size_; ++r) {
      const void* send = r == rank_ ? in : o;
      const int64_t c = counts[static_cast<size_t>(r)];
      call("ncclBroadcast", [&] { return ncclBroadcast(send, o, count(c), t, r, comm_, s()); });
      o += c * static_cast<int64_t>(dtype_size(dt));
    }
    call("ncclGroupEnd", [] { return ncclGroupEnd(); });
  }
  void gather(const void* in, void* out, int64_t n, DType dt, int root) override {
    const auto t = nccl_type(dt);
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    call("ncclGroupStart", [] { return ncclGroupStart(); });
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r) {
        char* dst = static_cast<char*>(out) + bytes * static_cast<size_t>(r);
        if (r == root) {
          local_copy(dst, in, bytes);
        } else {
          call("ncclRecv", [&] { return ncclRecv(dst, count(n), t, r, comm_, s()); });
        }
      }
    } else {
      call("ncclSend", [&] { return ncclSend(in, count(n), t, root, comm_, s()); });
    }
    call("ncclGroupEnd", [] { return ncclGroupEnd(); });
  }
  void scatter(const void* in, void* out, int64_t n, DType dt, int root) override {
    const auto t = nccl_type(dt);
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    call("ncclGroupStart", [] { return ncclGroupStart(); });
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r) {
        const char* src = static_cast<const char*>(in) + bytes * static_cast<size_t>(r);
        if (r == root) {
          local_copy(out, src, bytes);
        } else {
          call("ncclSend", [&] { return ncclSend(src, count(n), t, r, comm_, s()); });
        }
      }
    } else {
      call("ncclRecv", [&] { return ncclRecv(out, count(n), t, root, comm_, s()); });
    }
    call("ncclGroupEnd", [] { return ncclGroupEnd(); });
  }
  void reduce_scatter(const void* in, void* out, int64_t n, DType dt, ReduceOp op) override {
    const auto t = nccl_type(dt);
    const auto o = nccl_op(op);
    call("ncclReduceScatter", [&] { return ncclReduceScatter(in, out, count(n), t, o, comm_, s()); });
  }
  void all_to_all(const void* in, void* out, int64_t n, DType dt) override {
    const auto t = nccl_type(dt);
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    call("ncclGroupStart", [] { return ncclGroupStart(); });
    for (int r = 0; r < size_; ++r) {
      const char* src = static_cast<const char*>(in) + bytes * static_cast<size_t>(r);
      char* dst = static_cast<char*>(out) + bytes * static_cast<size_t>(r);
      if (r == rank_) {
        local_copy(dst, src, bytes);
      } else {
        call("ncclSend", [&] { return ncclSend(src, count(n), t, r, comm_, s()); });
        call("ncclRecv", [&] { return ncclRecv(dst, count(n), t, r, comm_, s()); });
      }
    }
    call("ncclGroupEnd", [] { return ncclGroupEnd(); });
  }
  void barrier() override {
    call("ncclAllReduce",
         [&] { return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, s()); });
  }
  // Point to point completes on the stream: the requests come back inactive.
  Request isend(const void* buf, int64_t bytes, int peer, int, Channel) override {
    call("ncclSend", [&] { return ncclSend(buf, count(bytes), ncclUint8, peer, comm_, s()); });
    return {};
  }
  Request irecv(void* buf, int64_t bytes, int peer, int, Channel) override {
    call("ncclRecv", [&] { return ncclRecv(buf, count(bytes), ncclUint8, peer, comm_, s()); });
    return {};
  }
  void wait(Request& r) override { r.active = false; }
  bool test(Request& r) override {
    r.active = false;
    return true;
  }

  std::string async_error() override {
    if (!comm_ || aborted_) return {};
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return "ncclCommGetAsyncError failed";
    if (state == ncclSuccess || state == ncclInProgress) return {};
    return ncclGetErrorString(state);
  }
  void abort_communicator() override {
    if (aborted_) return;
    if (rec::active() && !comm_) {  // recording: the abort is part of the log the tests read
      aborted_ = true;
      call("ncclCommAbort", [] { return ncclSuccess; });
      return;
    }
    if (comm_) {
      aborted_ = true;
      (void)cudaSetDevice(device_);
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }
  [[noreturn]] void abort(int code) override {
    abort_communicator();
    if (bootstrap_) bootstrap_->abort(code);
    std::_Exit(code);  // not reached with a bootstrap: it ends the whole job
  }

 private:
  static size_t count(int64_t n) { return static_cast<size_t>(n); }
  cudaStream_t s() const { return static_cast<cudaStream_t>(stream_.handle()); }

  // Logs the call while recording; else makes it (there must be a communicator).
  template <class F>
  void call(const char* name, F&& f) {
    if (rec::active()) {
      rec::Entry e;
      e.kind = rec::Kind::Library;
      e.name = name;
      e.device = device_;
      e.stream = rec::stream_id(stream_.handle());
      rec::record(std::move(e));
      return;
    }
    BRISK_CHECK(comm_ != nullptr, "nccl: ", name, " on cuda:", device_,
                ": no communicator (a fake group's CUDA collectives run only while a cuda::recording::Session is "
                "alive; or the communicator was aborted after a failure)");
    const ncclResult_t rc = f();
    if (rc != ncclSuccess) [[unlikely]]
      BRISK_THROW("NCCL error in ", name, " on cuda:", device_, ": ", ncclGetErrorString(rc));
  }
  // The root's own block: a device-to-device copy on the communication stream (the current one).
  void local_copy(void* dst, const void* src, size_t bytes) {
    copy_bytes(dst, cuda_device(device_), src, cuda_device(device_), bytes, /*non_blocking=*/true);
  }

  Transport* bootstrap_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  cudaStream_t owned_stream_ = nullptr;
  brisk::cuda::Stream stream_;
  brisk::cuda::Event ready_;
  void* barrier_word_ = nullptr;
};

}  // namespace

std::unique_ptr<StreamTransport> make_nccl_transport(Transport* bootstrap, int rank, int size, int device) {
  return std::make_unique<NcclTransport>(bootstrap, rank, size, device);
}

#else  // CUDA without NCCL: CUDA tensors are staged through host memory

std::unique_ptr<StreamTransport> make_nccl_transport(Transport*, int, int, int) {
  return nullptr;
}

#endif  // BRISK_DIST_NCCL

// --- the group's stream path ------------------------------------------------------------------
StreamTransport* ProcessGroupImpl::stream_transport(int device) {
#if !BRISK_DIST_NCCL
  return nullptr;  // no NCCL in this build: CUDA tensors are staged through host memory
#endif
  auto find = [&]() -> StreamTransport* {
    std::lock_guard lk(cuda_m_);
    auto it = cuda_.find(device);
    return it == cuda_.end() ? nullptr : it->second.get();
  };
  if (StreamTransport* t = find()) return t;
  std::lock_guard create(create_m_);
  if (StreamTransport* t = find()) return t;  // another thread made it meanwhile
  std::unique_ptr<StreamTransport> made;
  if (fake_ || brisk::cuda::recording::active()) {
    // A fake group, or recording with a real one: no communicator, no id exchange (nothing
    // would run anyway).
    made = make_nccl_transport(nullptr, rank_, size_, device);
  } else {
    // The id broadcast is a host collective of its own: queued like one, so it runs on the
    // communication thread at the same point of the sequence on every rank.
    Signature sig;
    std::snprintf(sig.op, sizeof(sig.op), "nccl_init cuda:%d", device);
    sig.dtype = static_cast<int32_t>(DType::U8);
    Transport* host = transport_.get();
    const int rank = rank_, size = size_;
    submit(sig, true, [&made, host, rank, size, device]() -> Request {
      made = make_nccl_transport(host, rank, size, device);
      return {};
    })->wait();
  }
  if (!made) return nullptr;
  std::lock_guard lk(cuda_m_);
  auto [it, inserted] = cuda_.emplace(device, std::move(made));
  return it->second.get();
}

WorkPtr ProcessGroupImpl::submit_stream(Signature sig, bool collective, Device device,
                                        const std::vector<Tensor>& tensors, const DeviceFn& fn) {
  namespace bc = brisk::cuda;
  StreamTransport* st = stream_transport(device.index);
  BRISK_CHECK(st != nullptr, sig.op, ": no NCCL transport for ", device.str());
  std::lock_guard dlk(device_m_);
  bool poisoned = false;
  std::string poison;
  {
    std::lock_guard lk(m_);
    BRISK_CHECK(!shut_down_, sig.op, ": the process group was shut down (dist::finalize)");
    if (collective) sig.seq = next_seq_++;
    poisoned = poisoned_;
    poison = poison_message_;
  }
  auto failed = [&](const std::string& message) {
    auto w = std::make_shared<StreamWork>(sig.op, sig.seq, device, bc::Event());
    w->fail(message);
    return w;
  };
  if (poisoned)
    return failed(std::string(sig.op) + ": the process group is unusable after an earlier failure: " + poison);
  if (debug_ && collective) check_signature_in_order(sig);

  bc::DeviceGuard guard(device.index);
  const bc::Stream producer = bc::current_stream(device.index);
  const bc::Stream comm = st->stream();
  // The communication stream starts after everything already queued on the caller's stream
  // (which produced the inputs); the host does not wait.
  st->ready_event().record(producer);
  st->ready_event().wait(comm);
  std::vector<void*> ptrs;
  for (const Tensor& t : tensors) {
    ptrs.push_back(t.defined() ? t.data_ptr() : nullptr);
    // Used on the communication stream: not reused by the allocator before that work is done.
    if (t.defined() && t.numel() > 0) bc::record_stream(t, comm);
  }
  try {
    bc::StreamGuard on_comm(comm);
    fn(*st, ptrs);
  } catch (const std::exception& e) {
    const std::string message = std::string(sig.op) + " on " + device.str() + ": " + message_of(e);
    fail(message, nullptr);  // by policy: abort the job, or poison the group
    return failed(message);
  }
  bc::Event done;
  done.record(comm);
  auto work = std::make_shared<StreamWork>(sig.op, sig.seq, device, std::move(done));
  if (threaded_) {
    std::lock_guard lk(m_);
    stream_inflight_.push_back(StreamInFlight{work, std::chrono::steady_clock::now(), sig});
  }
  return work;
}

}  // namespace brisk::dist::detail
