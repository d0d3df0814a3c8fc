// The MPI transport, built as its own shared library (libbrisk_dist_mpi.so) and opened with
// dlopen by dist::init() only when a launcher started the process: this file is the only
// one in brisk that includes <mpi.h>. Every call goes through BRISK_MPI_CHECK, so an MPI
// failure becomes a brisk::Error carrying MPI's own error string.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>

#include "transport.h"

#define BRISK_MPI_CHECK(call)                                                                 \
  do {                                                                                        \
    int brisk_mpi_rc_ = (call);                                                               \
    if (brisk_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                                          \
      char brisk_mpi_msg_[MPI_MAX_ERROR_STRING] = {};                                         \
      int brisk_mpi_len_ = 0;                                                                 \
      MPI_Error_string(brisk_mpi_rc_, brisk_mpi_msg_, &brisk_mpi_len_);                       \
      BRISK_THROW("MPI error in ", #call, ": ", std::string(brisk_mpi_msg_, brisk_mpi_len_)); \
    }                                                                                         \
  } while (0)

namespace brisk::dist::detail {
namespace {

static_assert(sizeof(MPI_Request) <= sizeof(void*), "an MPI_Request must fit in Request::handle");
constexpr int kTagExit = 7;
constexpr int kTagStatusAsk = 8;
constexpr int kTagStatusReply = 9;

// The handle is copied as it is (OpenMPI's MPI_Request is a pointer, MPICH's an int).
MPI_Request to_mpi(const Request& r) {
  MPI_Request m;
  std::memcpy(&m, &r.handle, sizeof(MPI_Request));  // NOLINT(bugprone-sizeof-expression)
  return m;
}
void store(Request& r, MPI_Request m) {
  std::memcpy(&r.handle, &m, sizeof(MPI_Request));  // NOLINT(bugprone-sizeof-expression)
}

// f16 / bf16 have no MPI type: they travel as 16-bit words and reduce with user ops that
// widen to f32 (reduce_into), like NCCL's half-precision reductions.
template <DType D, ReduceOp Op>
void user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(inout, in, *len, D, Op);
}

int checked_count(const char* op, int64_t n) {
  BRISK_CHECK(n >= 0 && n <= INT_MAX, op, ": ", n, " elements are more than one MPI call can move (", INT_MAX,
              "); split the tensor");
  return static_cast<int>(n);
}

// OpenMPI's single-copy path between processes of one host (vader's CMA, process_vm_readv)
// copies a whole message into a smaller receive buffer before it reports MPI_ERR_TRUNCATE, so
// collectives that do not match (a rank skipped one) would overwrite memory before the job ends.
// Without it, large messages travel in shared-memory fragments, which check the size first
// (docs/data-parallel.md). Set before MPI_Init so that jobs started with plain mpirun are covered
// too; a value already in the environment (mpirun's --mca, the user's OMPI_MCA_...) wins.
void avoid_unchecked_single_copy() {
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
}

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    int initialized = 0;
    BRISK_MPI_CHECK(MPI_Initialized(&initialized));
    if (!initialized) {
      avoid_unchecked_single_copy();
      BRISK_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided_));
      owns_mpi_ = true;
    } else {
      BRISK_MPI_CHECK(MPI_Query_thread(&provided_));
    }
    // Separate communicators keep the message spaces apart: collectives, user send/recv,
    // brisk's algorithms, and the exit notices of the shutdown protocol.
    for (MPI_Comm* c : {&coll_, &user_, &algo_, &control_}) {
      BRISK_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, c));
      BRISK_MPI_CHECK(MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN));
    }
    BRISK_MPI_CHECK(MPI_Comm_rank(coll_, &rank_));
    BRISK_MPI_CHECK(MPI_Comm_size(coll_, &size_));
    MPI_Comm local;
    BRISK_MPI_CHECK(MPI_Comm_split_type(coll_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    BRISK_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
    BRISK_MPI_CHECK(MPI_Comm_size(local, &local_size_));
    BRISK_MPI_CHECK(MPI_Comm_free(&local));
    create_ops<DType::F16>(0);
    create_ops<DType::BF16>(4);
    BRISK_MPI_CHECK(MPI_Irecv(&exit_in_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagExit, control_, &exit_req_));
    post_status_receives();
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  bool concurrent_polling() const override { return provided_ == MPI_THREAD_MULTIPLE; }

  void all_reduce(void* buf, int64_t n, DType dt, ReduceOp op) override {
    BRISK_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, checked_count("all_reduce", n), type(dt), mpi_op(dt, op), coll_));
  }
  void broadcast(void* buf, int64_t n, DType dt, int root) override {
    BRISK_MPI_CHECK(MPI_Bcast(buf, checked_count("broadcast", n), type(dt), root, coll_));
  }
  void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp op, int root) override {
    const void* send = (rank_ == root && in == out) ? MPI_IN_PLACE : in;
    BRISK_MPI_CHECK(MPI_Reduce(send, rank_ == root ? out : nullptr, checked_count("reduce", n), type(dt),
                               mpi_op(dt, op), root, coll_));
  }
  void all_gather(const void* in, void* out, int64_t n, DType dt) override {
    int c = checked_count("all_gather", n * size_);
    c /= size_;
    BRISK_MPI_CHECK(MPI_Allgather(in, c, type(dt), out, c, type(dt), coll_));
  }
  void all_gather_v(const void* in, void* out, const std::vector<int64_t>& counts, DType dt) override {
    std::vector<int> c(counts.size()), displ(counts.size());
    int64_t total = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      c[i] = static_cast<int>(counts[i]);
      displ[i] = static_cast<int>(total);
      total += counts[i];
    }
    checked_count("all_gather_uneven", total);
    BRISK_MPI_CHECK(
        MPI_Allgatherv(in, c[static_cast<size_t>(rank_)], type(dt), out, c.data(), displ.data(), type(dt), coll_));
  }
  void gather(const void* in, void* out, int64_t n, DType dt, int root) override {
    int c = checked_count("gather", n * size_) / size_;
    BRISK_MPI_CHECK(MPI_Gather(in, c, type(dt), out, c, type(dt), root, coll_));
  }
  void scatter(const void* in, void* out, int64_t n, DType dt, int root) override {
    int c = checked_count("scatter", n * size_) / size_;
    BRISK_MPI_CHECK(MPI_Scatter(in, c, type(dt), out, c, type(dt), root, coll_));
  }
  void reduce_scatter(const void* in, void* out, int64_t n, DType dt, ReduceOp op) override {
    int c = checked_count("reduce_scatter", n * size_) / size_;
    BRISK_MPI_CHECK(MPI_Reduce_scatter_block(in, out, c, type(dt), mpi_op(dt, op), coll_));
  }
  void all_to_all(const void* in, void* out, int64_t n, DType dt) override {
    int c = checked_count("all_to_all", n * size_) / size_;
    BRISK_MPI_CHECK(MPI_Alltoall(in, c, type(dt), out, c, type(dt), coll_));
  }
  void barrier() override { BRISK_MPI_CHECK(MPI_Barrier(coll_)); }
  Request ibarrier() override {
    MPI_Request m;
    BRISK_MPI_CHECK(MPI_Ibarrier(coll_, &m));
    Request r;
    store(r, m);
    r.active = true;
    return r;
  }

  Request isend(const void* buf, int64_t bytes, int peer, int tag, Channel ch) override {
    MPI_Request m;
    BRISK_MPI_CHECK(MPI_Isend(buf, checked_count("send", bytes), MPI_BYTE, peer, tag, comm(ch), &m));
    Request r;
    store(r, m);
    r.active = true;
    r.bytes = bytes;
    r.peer = peer;
    return r;
  }
  Request irecv(void* buf, int64_t bytes, int peer, int tag, Channel ch) override {
    MPI_Request m;
    BRISK_MPI_CHECK(MPI_Irecv(buf, checked_count("recv", bytes), MPI_BYTE, peer, tag, comm(ch), &m));
    Request r;
    store(r, m);
    r.active = true;
    r.is_recv = true;
    r.bytes = bytes;
    r.peer = peer;
    return r;
  }
  void wait(Request& r) override {
    if (!r.active) return;
    MPI_Request m = to_mpi(r);
    MPI_Status st;
    int rc = MPI_Wait(&m, &st);
    r.active = false;
    completed(r, rc, st);
  }
  bool test(Request& r) override {
    if (!r.active) return true;
    MPI_Request m = to_mpi(r);
    MPI_Status st;
    int flag = 0;
    int rc = MPI_Test(&m, &flag, &st);
    store(r, m);
    if (!flag && rc == MPI_SUCCESS) return false;
    r.active = false;
    completed(r, rc, st);
    return true;
  }

  void announce_exit(int64_t issued) override {
    exit_out_ = issued;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request m;
      BRISK_MPI_CHECK(MPI_Isend(&exit_out_, 1, MPI_INT64_T, p, kTagExit, control_, &m));
      exit_sends_.push_back(m);
    }
  }
  std::vector<PeerExit> poll_exits() override {
    std::vector<PeerExit> out;
    if (exit_req_ == MPI_REQUEST_NULL) return out;
    for (;;) {
      int flag = 0;
      MPI_Status st;
      BRISK_MPI_CHECK(MPI_Test(&exit_req_, &flag, &st));
      if (!flag) break;
      out.push_back(PeerExit{st.MPI_SOURCE, exit_in_});
      BRISK_MPI_CHECK(MPI_Irecv(&exit_in_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagExit, control_, &exit_req_));
    }
    return out;
  }
  void ask_status(int64_t ask) override {
    for (int p = 0; p < size_; ++p)
      if (p != rank_) send_control(&ask, sizeof(ask), p, kTagStatusAsk);
  }
  std::vector<StatusAsk> poll_status_asks() override {
    std::vector<StatusAsk> out;
    MPI_Status st;
    while (ask_req_ != MPI_REQUEST_NULL && arrived(ask_req_, st)) {
      out.push_back(StatusAsk{st.MPI_SOURCE, ask_in_});
      BRISK_MPI_CHECK(
          MPI_Irecv(&ask_in_, sizeof(ask_in_), MPI_BYTE, MPI_ANY_SOURCE, kTagStatusAsk, control_, &ask_req_));
    }
    return out;
  }
  void send_status(int peer, const StatusReport& report) override {
    send_control(&report, sizeof(report), peer, kTagStatusReply);
  }
  std::vector<StatusReport> poll_status_replies() override {
    std::vector<StatusReport> out;
    MPI_Status st;
    while (reply_req_ != MPI_REQUEST_NULL && arrived(reply_req_, st)) {
      out.push_back(reply_in_);
      BRISK_MPI_CHECK(
          MPI_Irecv(&reply_in_, sizeof(reply_in_), MPI_BYTE, MPI_ANY_SOURCE, kTagStatusReply, control_, &reply_req_));
    }
    return out;
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  void finalize() override {
    if (finalized_) return;
    finalized_ = true;
    if (!exit_sends_.empty())
      MPI_Waitall(static_cast<int>(exit_sends_.size()), exit_sends_.data(), MPI_STATUSES_IGNORE);
    for (MPI_Request* r : {&exit_req_, &ask_req_, &reply_req_}) {
      if (*r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(r);
      MPI_Wait(r, MPI_STATUS_IGNORE);
    }
    // Status messages are small (sent eagerly): they finish on their own; nobody waits for them.
    for (auto& s : status_sends_) MPI_Request_free(&s.req);
    status_sends_.clear();
    for (MPI_Op& op : ops_)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    for (MPI_Comm* c : {&coll_, &user_, &algo_, &control_}) MPI_Comm_free(c);
    if (owns_mpi_) MPI_Finalize();
  }

 private:
  template <DType D>
  void create_ops(int base) {
    BRISK_MPI_CHECK(MPI_Op_create(&user_op<D, ReduceOp::Sum>, 1, &ops_[base + 0]));
    BRISK_MPI_CHECK(MPI_Op_create(&user_op<D, ReduceOp::Prod>, 1, &ops_[base + 1]));
    BRISK_MPI_CHECK(MPI_Op_create(&user_op<D, ReduceOp::Max>, 1, &ops_[base + 2]));
    BRISK_MPI_CHECK(MPI_Op_create(&user_op<D, ReduceOp::Min>, 1, &ops_[base + 3]));
  }
  static MPI_Datatype type(DType dt) {
    switch (dt) {
      case DType::F64:
        return MPI_DOUBLE;
      case DType::F32:
        return MPI_FLOAT;
      case DType::F16:
      case DType::BF16:
        return MPI_UINT16_T;
      case DType::I32:
        return MPI_INT32_T;
      case DType::I64:
        return MPI_INT64_T;
      case DType::U8:
        return MPI_UINT8_T;
      default:
        BRISK_THROW("mpi: no MPI datatype for ", dtype_name(dt));
    }
  }
  MPI_Op mpi_op(DType dt, ReduceOp op) const {
    int k = op == ReduceOp::Prod ? 1 : op == ReduceOp::Max ? 2 : op == ReduceOp::Min ? 3 : 0;
    if (dt == DType::F16) return ops_[k];
    if (dt == DType::BF16) return ops_[4 + k];
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        return MPI_SUM;
      case ReduceOp::Prod:
        return MPI_PROD;
      case ReduceOp::Max:
        return MPI_MAX;
      case ReduceOp::Min:
        return MPI_MIN;
    }
    return MPI_SUM;
  }
  MPI_Comm comm(Channel ch) const { return ch == Channel::User ? user_ : algo_; }
  void post_status_receives() {
    BRISK_MPI_CHECK(MPI_Irecv(&ask_in_, sizeof(ask_in_), MPI_BYTE, MPI_ANY_SOURCE, kTagStatusAsk, control_, &ask_req_));
    BRISK_MPI_CHECK(
        MPI_Irecv(&reply_in_, sizeof(reply_in_), MPI_BYTE, MPI_ANY_SOURCE, kTagStatusReply, control_, &reply_req_));
  }
  static bool arrived(MPI_Request& r, MPI_Status& st) {
    int flag = 0;
    BRISK_MPI_CHECK(MPI_Test(&r, &flag, &st));
    return flag != 0;
  }
  // A nonblocking send on the control channel whose bytes are kept until it is done.
  void send_control(const void* bytes, size_t n, int peer, int tag) {
    std::erase_if(status_sends_, [](StatusSend& s) {
      MPI_Status st;
      return arrived(s.req, st);
    });
    StatusSend& s = status_sends_.emplace_back();
    s.bytes.assign(static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
    BRISK_MPI_CHECK(MPI_Isend(s.bytes.data(), static_cast<int>(n), MPI_BYTE, peer, tag, control_, &s.req));
  }
  static void completed(const Request& r, int rc, const MPI_Status& st) {
    BRISK_CHECK(
        rc == MPI_SUCCESS, r.is_recv ? "recv" : "send", " with rank ", r.peer, " failed: ",
        [&] {
          char msg[MPI_MAX_ERROR_STRING] = {};
          int len = 0;
          MPI_Error_string(rc, msg, &len);
          return std::string(msg, len);
        }(),
        r.is_recv ? " (a receive smaller than the message sent: do the shapes and dtypes agree?)" : "");
    if (r.is_recv) {
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      BRISK_CHECK(count == r.bytes, "recv: expected ", r.bytes, " bytes from rank ", r.peer, " but the message has ",
                  count, " (do the send and recv tensors' shapes and dtypes agree?)");
    }
  }

  int provided_ = 0;
  bool owns_mpi_ = false, finalized_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm coll_ = MPI_COMM_NULL, user_ = MPI_COMM_NULL, algo_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL;
  MPI_Op ops_[8] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                    MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  int64_t exit_in_ = 0, exit_out_ = 0;
  MPI_Request exit_req_ = MPI_REQUEST_NULL;
  std::vector<MPI_Request> exit_sends_;
  // The status exchange: the question and answer being received, and the sends in flight.
  int64_t ask_in_ = 0;
  StatusReport reply_in_{};
  MPI_Request ask_req_ = MPI_REQUEST_NULL, reply_req_ = MPI_REQUEST_NULL;
  struct StatusSend {
    MPI_Request req = MPI_REQUEST_NULL;
    std::vector<char> bytes;
  };
  std::list<StatusSend> status_sends_;  // a list: elements stay where MPI was told they are
};

}  // namespace
}  // namespace brisk::dist::detail

extern "C" __attribute__((visibility("default"))) brisk::dist::detail::Transport* brisk_dist_mpi_create_transport(
    char* err, size_t err_len) {
  try {
    return new brisk::dist::detail::MpiTransport();
  } catch (const std::exception& e) {
    std::snprintf(err, err_len, "%s", e.what());
    return nullptr;
  }
}
