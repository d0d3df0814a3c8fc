// CUDA builds only: pinned host memory for staging, and the NCCL transport for CUDA tensors.
// NCCL runs on its own communication stream, ordered after the default stream (where brisk's
// kernels run) by an event; each operation is enqueued and synchronised on the communication
// thread, so the caller's thread keeps computing while NCCL works.
#include <cuda_runtime.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <set>

#include "group_impl.h"

#if BRISK_DIST_NCCL
#include <nccl.h>
#endif

#define BRISK_DIST_CUDA_CHECK(call)                                                                            \
  do {                                                                                                         \
    cudaError_t brisk_err_ = (call);                                                                           \
    if (brisk_err_ != cudaSuccess) [[unlikely]] {                                                              \
      (void)cudaGetLastError();                                                                                \
      BRISK_THROW("CUDA error in ", #call, ": ", cudaGetErrorString(brisk_err_), " (", cudaGetErrorName(brisk_err_), ")"); \
    }                                                                                                          \
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
  return ::operator new(bytes, std::align_val_t{64});
}

void host_free(void* p) {
  {
    std::lock_guard lk(g_pinned_m);
    if (g_pinned.erase(p)) {
      cudaFreeHost(p);
      return;
    }
  }
  ::operator delete(p, std::align_val_t{64});
}

#if BRISK_DIST_NCCL

#define BRISK_NCCL_CHECK(call)                                                                  \
  do {                                                                                          \
    ncclResult_t brisk_nccl_rc_ = (call);                                                       \
    if (brisk_nccl_rc_ != ncclSuccess) [[unlikely]]                                             \
      BRISK_THROW("NCCL error in ", #call, ": ", ncclGetErrorString(brisk_nccl_rc_));           \
  } while (0)

namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F64: return ncclFloat64;
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
    default: BRISK_THROW("nccl: no NCCL datatype for ", dtype_name(dt));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Prod: return ncclProd;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Avg:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      return ncclAvg;
#else
      BRISK_THROW("nccl: ReduceOp::Avg needs NCCL 2.10 or newer");
#endif
  }
  return ncclSum;
}

class NcclTransport final : public Transport {
 public:
  // Collective over `bootstrap`'s ranks: rank 0 makes the unique id, the CPU transport
  // broadcasts it, every rank joins the communicator on `device`.
  NcclTransport(Transport& bootstrap, int device) : bootstrap_(bootstrap), device_(device) {
    BRISK_DIST_CUDA_CHECK(cudaSetDevice(device));
    ncclUniqueId id{};
    if (bootstrap.rank() == 0) BRISK_NCCL_CHECK(ncclGetUniqueId(&id));
    bootstrap.broadcast(&id, static_cast<int64_t>(sizeof(id)), DType::U8, 0);
    BRISK_NCCL_CHECK(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()));
    BRISK_DIST_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    BRISK_DIST_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    BRISK_DIST_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int32_t)));
  }
  ~NcclTransport() override {
    cudaSetDevice(device_);
    if (comm_) ncclCommDestroy(comm_);
    if (barrier_word_) cudaFree(barrier_word_);
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  int local_rank() const override { return bootstrap_.local_rank(); }
  int local_size() const override { return bootstrap_.local_size(); }

  void all_reduce(void* buf, int64_t n, DType dt, ReduceOp op) override {
    run([&] { BRISK_NCCL_CHECK(ncclAllReduce(buf, buf, count(n), nccl_type(dt), nccl_op(op), comm_, stream_)); });
  }
  void broadcast(void* buf, int64_t n, DType dt, int root) override {
    run([&] { BRISK_NCCL_CHECK(ncclBroadcast(buf, buf, count(n), nccl_type(dt), root, comm_, stream_)); });
  }
  void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp op, int root) override {
    run([&] { BRISK_NCCL_CHECK(ncclReduce(in, out, count(n), nccl_type(dt), nccl_op(op), root, comm_, stream_)); });
  }
  void all_gather(const void* in, void* out, int64_t n, DType dt) override {
    run([&] { BRISK_NCCL_CHECK(ncclAllGather(in, out, count(n), nccl_type(dt), comm_, stream_)); });
  }
  // Uneven: one broadcast per rank, grouped so NCCL runs them together.
  void all_gather_v(const void* in, void* out, const std::vector<int64_t>& counts, DType dt) override {
    run([&] {
      char* o = static_cast<char*>(out);
      BRISK_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < size(); ++r) {
        const void* send = r == rank() ? in : o;
        BRISK_NCCL_CHECK(ncclBroadcast(send, o, count(counts[static_cast<size_t>(r)]), nccl_type(dt), r, comm_, stream_));
        o += counts[static_cast<size_t>(r)] * static_cast<int64_t>(dtype_size(dt));
      }
      BRISK_NCCL_CHECK(ncclGroupEnd());
    });
  }
  void gather(const void* in, void* out, int64_t n, DType dt, int root) override {
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    run([&] {
      BRISK_NCCL_CHECK(ncclGroupStart());
      if (rank() == root) {
        for (int r = 0; r < size(); ++r) {
          char* dst = static_cast<char*>(out) + bytes * static_cast<size_t>(r);
          if (r == root) {
            BRISK_DIST_CUDA_CHECK(cudaMemcpyAsync(dst, in, bytes, cudaMemcpyDeviceToDevice, stream_));
          } else {
            BRISK_NCCL_CHECK(ncclRecv(dst, count(n), nccl_type(dt), r, comm_, stream_));
          }
        }
      } else {
        BRISK_NCCL_CHECK(ncclSend(in, count(n), nccl_type(dt), root, comm_, stream_));
      }
      BRISK_NCCL_CHECK(ncclGroupEnd());
    });
  }
  void scatter(const void* in, void* out, int64_t n, DType dt, int root) override {
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    run([&] {
      BRISK_NCCL_CHECK(ncclGroupStart());
      if (rank() == root) {
        for (int r = 0; r < size(); ++r) {
          const char* src = static_cast<const char*>(in) + bytes * static_cast<size_t>(r);
          if (r == root) {
            BRISK_DIST_CUDA_CHECK(cudaMemcpyAsync(out, src, bytes, cudaMemcpyDeviceToDevice, stream_));
          } else {
            BRISK_NCCL_CHECK(ncclSend(src, count(n), nccl_type(dt), r, comm_, stream_));
          }
        }
      } else {
        BRISK_NCCL_CHECK(ncclRecv(out, count(n), nccl_type(dt), root, comm_, stream_));
      }
      BRISK_NCCL_CHECK(ncclGroupEnd());
    });
  }
  void reduce_scatter(const void* in, void* out, int64_t n, DType dt, ReduceOp op) override {
    run([&] { BRISK_NCCL_CHECK(ncclReduceScatter(in, out, count(n), nccl_type(dt), nccl_op(op), comm_, stream_)); });
  }
  void all_to_all(const void* in, void* out, int64_t n, DType dt) override {
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    run([&] {
      BRISK_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < size(); ++r) {
        const char* src = static_cast<const char*>(in) + bytes * static_cast<size_t>(r);
        char* dst = static_cast<char*>(out) + bytes * static_cast<size_t>(r);
        if (r == rank()) {
          BRISK_DIST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
        } else {
          BRISK_NCCL_CHECK(ncclSend(src, count(n), nccl_type(dt), r, comm_, stream_));
          BRISK_NCCL_CHECK(ncclRecv(dst, count(n), nccl_type(dt), r, comm_, stream_));
        }
      }
      BRISK_NCCL_CHECK(ncclGroupEnd());
    });
  }
  void barrier() override {
    run([&] { BRISK_NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_)); });
  }
  // NCCL point to point completes on the stream: these block (on the communication thread).
  Request isend(const void* buf, int64_t bytes, int peer, int, Channel) override {
    run([&] { BRISK_NCCL_CHECK(ncclSend(buf, count(bytes), ncclUint8, peer, comm_, stream_)); });
    return {};
  }
  Request irecv(void* buf, int64_t bytes, int peer, int, Channel) override {
    run([&] { BRISK_NCCL_CHECK(ncclRecv(buf, count(bytes), ncclUint8, peer, comm_, stream_)); });
    return {};
  }
  void wait(Request& r) override { r.active = false; }
  bool test(Request& r) override {
    r.active = false;
    return true;
  }
  [[noreturn]] void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_.abort(code);
    std::_Exit(code);  // not reached: the bootstrap transport ends the job
  }

 private:
  static size_t count(int64_t n) { return static_cast<size_t>(n); }
  // Orders the communication stream after the default stream's pending kernels (which
  // produced the inputs), enqueues, and waits for the result.
  template <class F>
  void run(F&& enqueue) {
    BRISK_DIST_CUDA_CHECK(cudaSetDevice(device_));
    BRISK_DIST_CUDA_CHECK(cudaEventRecord(ready_, cudaStreamLegacy));
    BRISK_DIST_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
    enqueue();
    BRISK_DIST_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  Transport& bootstrap_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  void* barrier_word_ = nullptr;
};

}  // namespace

// One communicator per device, made on the first CUDA collective (on every rank at the same
// point of the collective sequence, so the id broadcast lines up).
Transport* ProcessGroupImpl::cuda_transport(int device) {
  auto it = cuda_.find(device);
  if (it != cuda_.end()) return it->second.get();
  auto t = std::make_unique<NcclTransport>(*transport_, device);
  Transport* raw = t.get();
  cuda_[device] = std::move(t);
  return raw;
}

#endif  // BRISK_DIST_NCCL

}  // namespace brisk::dist::detail
