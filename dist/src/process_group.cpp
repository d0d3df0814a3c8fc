// ProcessGroup's public operations: argument checks (on the caller's thread, so bad input
// throws right away), the choice of algorithm and device path, and the queued bodies that
// run on the communication thread.
#include "brisk/dist/process_group.h"

#include <cstdlib>
#include <cstring>

#include "group_impl.h"

#if BRISK_DIST_NCCL
#include <nccl.h>
#endif

namespace brisk::dist {

using detail::Channel;
using detail::DeviceFn;
using detail::Request;
using detail::Signature;
using detail::Transport;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Prod:
      return "prod";
  }
  return "?";
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Default:
      return "default";
    case Algorithm::Backend:
      return "backend";
    case Algorithm::Ring:
      return "ring";
    case Algorithm::Rhd:
      return "rhd";
    case Algorithm::Tree:
      return "tree";
  }
  return "?";
}

Algorithm algorithm_from_name(const std::string& name) {
  if (name == "default" || name.empty()) return Algorithm::Default;
  if (name == "mpi" || name == "nccl" || name == "backend") return Algorithm::Backend;
  if (name == "ring") return Algorithm::Ring;
  if (name == "rhd") return Algorithm::Rhd;
  if (name == "tree") return Algorithm::Tree;
  BRISK_THROW("dist: unknown algorithm '", name, "' (expected mpi, ring, rhd or tree)");
}

namespace {

// Per-call choice, else the environment variable, else the backend's own.
Algorithm resolve(Algorithm a, const char* env_var, const char* op) {
  if (a != Algorithm::Default) return a;
  const char* v = std::getenv(env_var);
  if (!v || !*v) return Algorithm::Backend;
  try {
    return algorithm_from_name(v);
  } catch (const Error&) {
    BRISK_THROW(op, ": ", env_var, "='", v, "' is not one of mpi, ring, rhd, tree");
  }
}

void check_tensor(const char* op, const Tensor& t, const char* what = "tensor") {
  BRISK_CHECK(t.defined(), op, ": ", what, " is undefined");
  BRISK_CHECK(t.is_contiguous(), op, ": ", what, " must be contiguous (call .contiguous() first); got sizes ",
              t.sizes(), " strides ", t.strides());
  detail::check_collective_dtype(op, t.dtype());
}

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  BRISK_CHECK(a.dtype() == b.dtype(), op, ": output dtype ", dtype_name(a.dtype()), " differs from input dtype ",
              dtype_name(b.dtype()));
  BRISK_CHECK(a.device() == b.device(), op, ": output is on ", a.device().str(), " but input on ", b.device().str());
}

// out must be in's shape with dim 0 multiplied by `world` (W blocks of in stacked).
void check_stacked(const char* op, const Tensor& stacked, const Tensor& block, int world, const char* names) {
  Shape want = block.sizes();
  BRISK_CHECK(!want.empty(), op, ": tensors need at least one dimension (blocks are stacked along dim 0)");
  want[0] *= world;
  BRISK_CHECK(stacked.sizes() == want, op, ": ", names, ": expected shape ", want, " (", world, " blocks of ",
              block.sizes(), " along dim 0), got ", stacked.sizes());
}

void check_root(const char* op, int root, int size) {
  BRISK_CHECK(root >= 0 && root < size, op, ": root ", root, " is not a rank of this group (size ", size, ")");
}

Signature make_sig(const char* op, const Tensor& t, int root = -1, int reduce_op = -1) {
  Signature s;
  std::strncpy(s.op, op, sizeof(s.op) - 1);
  s.dtype = static_cast<int32_t>(t.dtype());
  s.ndim = static_cast<int32_t>(std::min<int64_t>(t.dim(), 8));
  for (int i = 0; i < s.ndim; ++i) s.dims[i] = t.sizes()[static_cast<size_t>(i)];
  s.root = root;
  s.reduce_op = reduce_op;
  return s;
}

}  // namespace

// The host path of an operation, run on the communication thread: CPU tensors on the CPU
// transport; CUDA tensors where the build has no NCCL staged through (pinned) host memory around
// it. `tensors` are the operation's buffers (undefined ones are passed as nullptr); `outputs`
// marks those copied back after staging. fn gets the transport and one pointer per tensor.
static detail::ProcessGroupImpl::Body on_host(detail::ProcessGroupImpl* impl, std::vector<Tensor> tensors,
                                              std::vector<bool> outputs, DeviceFn fn) {
  return [impl, tensors = std::move(tensors), outputs = std::move(outputs), fn = std::move(fn)]() -> Request {
    bool on_gpu = false;
    for (auto& t : tensors) on_gpu = on_gpu || (t.defined() && t.device().is_cuda());
    std::vector<void*> ptrs;
    for (auto& t : tensors) ptrs.push_back(t.defined() ? t.data_ptr() : nullptr);
    if (!on_gpu) {
      fn(impl->transport(), ptrs);
      return {};
    }
    size_t total = 0;
    for (auto& t : tensors) total += t.defined() ? (t.nbytes() + 63) / 64 * 64 : 0;
    char* host = static_cast<char*>(impl->staging().get(total));
    std::vector<void*> hptrs;
    for (auto& t : tensors) {
      if (!t.defined()) {
        hptrs.push_back(nullptr);
        continue;
      }
      hptrs.push_back(host);
      copy_bytes(host, kCPU, t.data_ptr(), t.device(), t.nbytes());
      host += (t.nbytes() + 63) / 64 * 64;
    }
    fn(impl->transport(), hptrs);
    for (size_t i = 0; i < tensors.size(); ++i)
      if (outputs[i] && tensors[i].defined())
        copy_bytes(tensors[i].data_ptr(), tensors[i].device(), hptrs[i], kCPU, tensors[i].nbytes());
    return {};
  };
}

// Runs an operation where its tensors live: CUDA tensors on their device's communication stream
// through NCCL, enqueued from this thread (no host wait); everything else on the communication
// thread.
static WorkPtr run_op(detail::ProcessGroupImpl* impl, const Signature& sig, bool collective,
                      std::vector<Tensor> tensors, std::vector<bool> outputs, DeviceFn fn) {
  Device dev = kCPU;
  for (auto& t : tensors)
    if (t.defined() && t.device().is_cuda()) dev = t.device();
  if (dev.is_cuda() && impl->stream_transport(dev.index)) return impl->submit_stream(sig, collective, dev, tensors, fn);
  return impl->submit(sig, collective, on_host(impl, std::move(tensors), std::move(outputs), std::move(fn)));
}

ProcessGroup::ProcessGroup(std::unique_ptr<detail::ProcessGroupImpl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const {
  return impl_->rank();
}
int ProcessGroup::size() const {
  return impl_->size();
}
int ProcessGroup::local_rank() const {
  return impl_->transport().local_rank();
}
int ProcessGroup::local_size() const {
  return impl_->transport().local_size();
}
std::string ProcessGroup::backend() const {
  return impl_->transport().name();
}
double ProcessGroup::timeout_seconds() const {
  return impl_->timeout_seconds();
}
bool ProcessGroup::debug() const {
  return impl_->debug();
}
void ProcessGroup::shutdown() {
  impl_->shutdown();
}

// --- all_reduce -------------------------------------------------------------------------------
WorkPtr ProcessGroup::all_reduce_async(const Tensor& t, AllReduceOptions o) {
  check_tensor("all_reduce", t);
  Algorithm algo = resolve(o.algorithm, "BRISK_ALLREDUCE_ALGO", "all_reduce");
  BRISK_CHECK(algo == Algorithm::Backend || algo == Algorithm::Ring || algo == Algorithm::Rhd, "all_reduce: algorithm ",
              algorithm_name(algo), " is not an all-reduce algorithm (mpi, ring or rhd)");
  if (t.device().is_cuda()) {
    BRISK_CHECK(o.algorithm == Algorithm::Default || o.algorithm == Algorithm::Backend, "all_reduce: brisk's ",
                algorithm_name(algo), " algorithm runs on CPU tensors only; got a tensor on ", t.device().str());
    algo = Algorithm::Backend;
  }
  auto* impl = impl_.get();
  const int64_t n = t.numel();
  const DType dt = t.dtype();
  const ReduceOp op = o.op;
  const int world = size();
  if (impl->fake()) algo = Algorithm::Backend;  // a fake world has no peers for brisk's algorithms
  return run_op(impl, make_sig("all_reduce", t, -1, static_cast<int>(op)), true, {t}, {true},
                [=](Transport& tr, const std::vector<void*>& p) {
                  if (algo == Algorithm::Ring) {
                    detail::ring_all_reduce(tr, p[0], n, dt, op, impl->scratch());
                  } else if (algo == Algorithm::Rhd) {
                    detail::rhd_all_reduce(tr, p[0], n, dt, op, impl->scratch());
                  } else if (op == ReduceOp::Avg && tr.name() != "nccl") {
                    tr.all_reduce(p[0], n, dt, ReduceOp::Sum);
                    detail::divide_by(p[0], n, dt, world);
                  } else {
                    tr.all_reduce(p[0], n, dt, op);
                  }
                });
}
void ProcessGroup::all_reduce(const Tensor& t, AllReduceOptions o) {
  all_reduce_async(t, o)->wait();
}

// --- broadcast / reduce -------------------------------------------------------------------------
WorkPtr ProcessGroup::broadcast_async(const Tensor& t, BroadcastOptions o) {
  check_tensor("broadcast", t);
  check_root("broadcast", o.root, size());
  Algorithm algo = resolve(o.algorithm, "BRISK_BROADCAST_ALGO", "broadcast");
  BRISK_CHECK(algo == Algorithm::Backend || algo == Algorithm::Tree, "broadcast: algorithm ", algorithm_name(algo),
              " is not a broadcast algorithm (mpi or tree)");
  if (t.device().is_cuda()) {
    BRISK_CHECK(o.algorithm == Algorithm::Default || o.algorithm == Algorithm::Backend,
                "broadcast: brisk's tree algorithm runs on CPU tensors only; got a tensor on ", t.device().str());
    algo = Algorithm::Backend;
  }
  const int64_t n = t.numel();
  const DType dt = t.dtype();
  const int root = o.root;
  if (impl_->fake()) algo = Algorithm::Backend;
  return run_op(impl_.get(), make_sig("broadcast", t, root), true, {t}, {true},
                [=](Transport& tr, const std::vector<void*>& p) {
                  if (algo == Algorithm::Tree) {
                    detail::tree_broadcast(tr, p[0], n * static_cast<int64_t>(dtype_size(dt)), root);
                  } else {
                    tr.broadcast(p[0], n, dt, root);
                  }
                });
}
void ProcessGroup::broadcast(const Tensor& t, BroadcastOptions o) {
  broadcast_async(t, o)->wait();
}

WorkPtr ProcessGroup::reduce_async(const Tensor& t, ReduceOptions o) {
  check_tensor("reduce", t);
  check_root("reduce", o.root, size());
  const int64_t n = t.numel();
  const DType dt = t.dtype();
  const int root = o.root, world = size(), me = rank();
  const ReduceOp op = o.op;
  // Non-root ranks keep their values: they send from a copy when the backend would clobber.
  return run_op(impl_.get(), make_sig("reduce", t, root, static_cast<int>(op)), true, {t}, {true},
                [=](Transport& tr, const std::vector<void*>& p) {
                  const bool nccl = tr.name() == "nccl";
                  tr.reduce(p[0], p[0], n, dt, (op == ReduceOp::Avg && !nccl) ? ReduceOp::Sum : op, root);
                  if (me == root && op == ReduceOp::Avg && !nccl) detail::divide_by(p[0], n, dt, world);
                });
}
void ProcessGroup::reduce(const Tensor& t, ReduceOptions o) {
  reduce_async(t, o)->wait();
}

// --- gathers and scatters -------------------------------------------------------------------------
WorkPtr ProcessGroup::all_gather_async(const Tensor& out, const Tensor& in) {
  check_tensor("all_gather", in, "input");
  check_tensor("all_gather", out, "output");
  check_same("all_gather", out, in);
  check_stacked("all_gather", out, in, size(), "output");
  const int64_t n = in.numel();
  const DType dt = in.dtype();
  return run_op(impl_.get(), make_sig("all_gather", in), true, {in, out}, {false, true},
                [=](Transport& tr, const std::vector<void*>& p) { tr.all_gather(p[0], p[1], n, dt); });
}
void ProcessGroup::all_gather(const Tensor& out, const Tensor& in) {
  all_gather_async(out, in)->wait();
}

Tensor ProcessGroup::all_gather(const Tensor& in) {
  check_tensor("all_gather", in, "input");
  BRISK_CHECK(in.dim() >= 1, "all_gather: input needs at least one dimension, got a scalar (use reshape({1}))");
  Shape s = in.sizes();
  s[0] *= size();
  Tensor out = empty(s, in.dtype(), in.device());
  all_gather(out, in);
  return out;
}

std::vector<Tensor> ProcessGroup::all_gather_uneven(const Tensor& in) {
  check_tensor("all_gather_uneven", in, "input");
  BRISK_CHECK(in.dim() >= 1, "all_gather_uneven: input needs at least one dimension, got a scalar");
  // Step 1: every rank learns every rank's dim 0 (a small all-gather on the CPU).
  Tensor mine = from_vector<int64_t>({in.size(0)}, {1});
  Tensor counts = all_gather(mine);
  std::vector<int64_t> rows = counts.to_vector<int64_t>();
  int64_t row_elems = 1;
  for (int64_t d = 1; d < in.dim(); ++d) row_elems *= in.size(d);
  std::vector<int64_t> elems;
  int64_t total_rows = 0;
  for (int64_t r : rows) {
    elems.push_back(r * row_elems);
    total_rows += r;
  }
  Shape s = in.sizes();
  s[0] = total_rows;
  Tensor out = empty(s, in.dtype(), in.device());
  // Step 2: the variable-size gather. Trailing dims must match: debug mode checks them (dim 0 is '*').
  Signature sig = make_sig("all_gather_uneven", in);
  sig.dims[0] = -1;
  const DType dt = in.dtype();
  run_op(impl_.get(), sig, true, {in, out}, {false, true}, [=](Transport& tr, const std::vector<void*>& p) {
    tr.all_gather_v(p[0], p[1], elems, dt);
  })->wait();
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (int64_t r : rows) {
    Shape ps = in.sizes();
    ps[0] = r;
    parts.push_back(out.as_strided(ps, out.strides(), out.offset() + offset * row_elems));
    offset += r;
  }
  return parts;
}

WorkPtr ProcessGroup::gather_async(const Tensor& out, const Tensor& in, int root) {
  check_tensor("gather", in, "input");
  check_root("gather", root, size());
  const bool is_root = rank() == root;
  if (is_root) {
    check_tensor("gather", out, "output (on the root)");
    check_same("gather", out, in);
    check_stacked("gather", out, in, size(), "output (on the root)");
  }
  const int64_t n = in.numel();
  const DType dt = in.dtype();
  Tensor o = is_root ? out : Tensor();
  return run_op(impl_.get(), make_sig("gather", in, root), true, {in, o}, {false, true},
                [=](Transport& tr, const std::vector<void*>& p) { tr.gather(p[0], p[1], n, dt, root); });
}
void ProcessGroup::gather(const Tensor& out, const Tensor& in, int root) {
  gather_async(out, in, root)->wait();
}

WorkPtr ProcessGroup::scatter_async(const Tensor& out, const Tensor& in, int root) {
  check_tensor("scatter", out, "output");
  check_root("scatter", root, size());
  const bool is_root = rank() == root;
  if (is_root) {
    check_tensor("scatter", in, "input (on the root)");
    check_same("scatter", out, in);
    check_stacked("scatter", in, out, size(), "input (on the root)");
  }
  const int64_t n = out.numel();
  const DType dt = out.dtype();
  Tensor i = is_root ? in : Tensor();
  return run_op(impl_.get(), make_sig("scatter", out, root), true, {i, out}, {false, true},
                [=](Transport& tr, const std::vector<void*>& p) { tr.scatter(p[0], p[1], n, dt, root); });
}
void ProcessGroup::scatter(const Tensor& out, const Tensor& in, int root) {
  scatter_async(out, in, root)->wait();
}

WorkPtr ProcessGroup::reduce_scatter_async(const Tensor& out, const Tensor& in, ReduceOp op) {
  check_tensor("reduce_scatter", in, "input");
  check_tensor("reduce_scatter", out, "output");
  check_same("reduce_scatter", out, in);
  check_stacked("reduce_scatter", in, out, size(), "input");
  const int64_t n = out.numel();
  const DType dt = out.dtype();
  const int world = size();
  return run_op(impl_.get(), make_sig("reduce_scatter", out, -1, static_cast<int>(op)), true, {in, out}, {false, true},
                [=](Transport& tr, const std::vector<void*>& p) {
                  const bool nccl = tr.name() == "nccl";
                  tr.reduce_scatter(p[0], p[1], n, dt, (op == ReduceOp::Avg && !nccl) ? ReduceOp::Sum : op);
                  if (op == ReduceOp::Avg && !nccl) detail::divide_by(p[1], n, dt, world);
                });
}
void ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  reduce_scatter_async(out, in, op)->wait();
}

WorkPtr ProcessGroup::all_to_all_async(const Tensor& out, const Tensor& in) {
  check_tensor("all_to_all", in, "input");
  check_tensor("all_to_all", out, "output");
  check_same("all_to_all", out, in);
  BRISK_CHECK(in.sizes() == out.sizes(), "all_to_all: input ", in.sizes(), " and output ", out.sizes(),
              " must have the same shape");
  BRISK_CHECK(in.dim() >= 1 && in.size(0) % size() == 0, "all_to_all: dim 0 of ", in.sizes(), " must split into ",
              size(), " equal blocks (one per rank)");
  const int64_t n = in.numel() / size();
  const DType dt = in.dtype();
  return run_op(impl_.get(), make_sig("all_to_all", in), true, {in, out}, {false, true},
                [=](Transport& tr, const std::vector<void*>& p) { tr.all_to_all(p[0], p[1], n, dt); });
}
void ProcessGroup::all_to_all(const Tensor& out, const Tensor& in) {
  all_to_all_async(out, in)->wait();
}

WorkPtr ProcessGroup::barrier_async() {
  Signature sig;
  std::strncpy(sig.op, "barrier", sizeof(sig.op) - 1);
  sig.dtype = static_cast<int32_t>(DType::U8);
  auto* impl = impl_.get();
  return impl->submit(sig, true, [impl]() -> Request {
    impl->transport().barrier();
    return {};
  });
}
void ProcessGroup::barrier() {
  barrier_async()->wait();
}

// --- point to point ------------------------------------------------------------------------------
static void check_peer(const char* op, int peer, int me, int size) {
  BRISK_CHECK(peer >= 0 && peer < size, op, ": peer ", peer, " is not a rank of this group (size ", size, ")");
  BRISK_CHECK(peer != me, op, ": rank ", me, " cannot ", op, " to itself");
  (void)me;
}

WorkPtr ProcessGroup::send_async(const Tensor& t, int dst, int tag) {
  check_tensor("send", t);
  check_peer("send", dst, rank(), size());
  BRISK_CHECK(tag >= 0 && tag < 32768, "send: tag ", tag, " must be in [0, 32768)");
  Signature sig = make_sig(("send to " + std::to_string(dst)).c_str(), t);
  auto* impl = impl_.get();
  const int64_t bytes = static_cast<int64_t>(t.nbytes());
  if (t.device().is_cpu()) {
    return impl->submit(sig, false, [impl, t, bytes, dst, tag]() -> Request {
      return impl->transport().isend(t.data_ptr(), bytes, dst, tag, Channel::User);
    });
  }
  return run_op(impl, sig, false, {t}, {false}, [=](Transport& tr, const std::vector<void*>& p) {
    Request r = tr.isend(p[0], bytes, dst, tag, Channel::User);
    tr.wait(r);
  });
}

WorkPtr ProcessGroup::recv_async(const Tensor& t, int src, int tag) {
  check_tensor("recv", t);
  check_peer("recv", src, rank(), size());
  BRISK_CHECK(tag >= 0 && tag < 32768, "recv: tag ", tag, " must be in [0, 32768)");
  Signature sig = make_sig(("recv from " + std::to_string(src)).c_str(), t);
  auto* impl = impl_.get();
  const int64_t bytes = static_cast<int64_t>(t.nbytes());
  if (t.device().is_cpu()) {
    return impl->submit(sig, false, [impl, t, bytes, src, tag]() -> Request {
      return impl->transport().irecv(t.data_ptr(), bytes, src, tag, Channel::User);
    });
  }
  return run_op(impl, sig, false, {t}, {true}, [=](Transport& tr, const std::vector<void*>& p) {
    Request r = tr.irecv(p[0], bytes, src, tag, Channel::User);
    tr.wait(r);
  });
}
void ProcessGroup::send(const Tensor& t, int dst, int tag) {
  send_async(t, dst, tag)->wait();
}
void ProcessGroup::recv(const Tensor& t, int src, int tag) {
  recv_async(t, src, tag)->wait();
}

#if !BRISK_WITH_CUDA
// A CPU-only build has no CUDA tensors: the stream path is never taken.
detail::StreamTransport* detail::ProcessGroupImpl::stream_transport(int) {
  return nullptr;
}
WorkPtr detail::ProcessGroupImpl::submit_stream(Signature sig, bool, Device device, const std::vector<Tensor>&,
                                                const DeviceFn&) {
  BRISK_THROW(sig.op, ": ", device.str(), " tensors need a CUDA build of brisk");
}
#endif

#if BRISK_DIST_NCCL
int nccl_version() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}
#else
int nccl_version() {
  return 0;
}
#endif

}  // namespace brisk::dist
