// FakeTransport: a world of `size` ranks that exists inside one process, for tests and teaching
// (dist::fake_group). Every other rank is taken to hold exactly this rank's data, so each
// collective returns what a real job of identical ranks would: all_reduce sums to size * x
// (average, max and min give x back), gathers repeat this rank's block. Messages go nowhere:
// a send does nothing and a receive leaves its buffer as it is. With FakePeerFaults, peers
// misbehave as described there: one announces its exit, or shows debug mode the signature of
// a broadcast.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "group_impl.h"
#include "transport.h"

namespace brisk::dist::detail {
namespace {

class FakeTransport final : public Transport {
 public:
  FakeTransport(int size, int rank, const FakePeerFaults& faults) : size_(size), rank_(rank), faults_(faults) {}

  std::string name() const override { return "fake"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  // The watchdog polls exits as in a real job when there are faults to notice.
  bool concurrent_polling() const override { return faulty(); }

  void all_reduce(void* buf, int64_t n, DType dt, ReduceOp op) override { combine_identical(buf, n, dt, op); }
  void broadcast(void*, int64_t, DType, int) override {}
  void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp op, int root) override {
    if (rank_ != root) return;
    copy(out, in, n, dt);
    combine_identical(out, n, dt, op);
  }
  void all_gather(const void* in, void* out, int64_t n, DType dt) override {
    repeat(in, out, n, dt);
    // Debug mode's signature exchange (the only all-gather of one Signature's bytes in a faulty
    // fake group): the mismatching peer called a broadcast instead.
    if (faults_.mismatches >= 0 && dt == DType::U8 && n == static_cast<int64_t>(sizeof(Signature))) {
      auto* sig = reinterpret_cast<Signature*>(static_cast<char*>(out) + n * faults_.mismatches);
      if (sig->seq == faults_.mismatch_at) {
        *sig = Signature{};
        sig->seq = faults_.mismatch_at;
        std::snprintf(sig->op, sizeof(sig->op), "%s", "broadcast");
        sig->dtype = static_cast<int32_t>(DType::F32);
        sig->ndim = 1;
        sig->dims[0] = 1;
        sig->root = 0;
      }
    }
  }
  void all_gather_v(const void* in, void* out, const std::vector<int64_t>& counts, DType dt) override {
    char* o = static_cast<char*>(out);
    for (int r = 0; r < size_; ++r) {
      const int64_t c = counts[static_cast<size_t>(r)];
      copy(o, in, std::min(c, counts[static_cast<size_t>(rank_)]), dt);
      o += c * static_cast<int64_t>(dtype_size(dt));
    }
  }
  void gather(const void* in, void* out, int64_t n, DType dt, int root) override {
    if (rank_ == root) repeat(in, out, n, dt);
  }
  void scatter(const void* in, void* out, int64_t n, DType dt, int root) override {
    if (rank_ == root) copy(out, block(in, rank_, n, dt), n, dt);  // elsewhere out stays as it is
  }
  void reduce_scatter(const void* in, void* out, int64_t n, DType dt, ReduceOp op) override {
    copy(out, block(in, rank_, n, dt), n, dt);
    combine_identical(out, n, dt, op);
  }
  void all_to_all(const void* in, void* out, int64_t n, DType dt) override {
    // Rank j sends this rank its block `rank_`, which equals this rank's own block `rank_`.
    std::vector<char> mine(static_cast<size_t>(n) * dtype_size(dt));
    copy(mine.data(), block(in, rank_, n, dt), n, dt);
    repeat(mine.data(), out, n, dt);
  }
  void barrier() override {}

  Request isend(const void*, int64_t, int, int, Channel) override { return {}; }
  Request irecv(void*, int64_t, int, int, Channel) override { return {}; }
  void wait(Request& r) override { r.active = false; }
  bool test(Request& r) override {
    r.active = false;
    return true;
  }

  // The leaving peer's notice comes at once; the others announce theirs once this rank leaves.
  void announce_exit(int64_t) override { leaving_ = true; }
  std::vector<PeerExit> poll_exits() override {
    std::vector<PeerExit> out;
    if (faults_.leaves >= 0 && !left_told_) {
      out.push_back(PeerExit{faults_.leaves, faults_.leaves_after});
      left_told_ = true;
    }
    if (leaving_ && !others_told_) {
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && r != faults_.leaves) out.push_back(PeerExit{r, INT64_MAX});
      others_told_ = true;
    }
    return out;
  }

 private:
  static void copy(void* out, const void* in, int64_t n, DType dt) {
    if (out != in && n > 0) std::memmove(out, in, static_cast<size_t>(n) * dtype_size(dt));
  }
  static const void* block(const void* base, int r, int64_t n, DType dt) {
    return static_cast<const char*>(base) + static_cast<size_t>(r) * static_cast<size_t>(n) * dtype_size(dt);
  }
  // out: size_ blocks of n, each a copy of in.
  void repeat(const void* in, void* out, int64_t n, DType dt) const {
    for (int r = size_ - 1; r >= 0; --r) copy(const_cast<void*>(block(out, r, n, dt)), in, n, dt);
  }
  // buf = op over size_ ranks that all hold buf (Sum/Prod combine size_ copies; Avg, Max, Min
  // give buf back; the group divides an Avg's sum itself, so Avg arrives here as Sum).
  void combine_identical(void* buf, int64_t n, DType dt, ReduceOp op) const {
    if (op != ReduceOp::Sum && op != ReduceOp::Prod) return;
    std::vector<char> mine(static_cast<size_t>(n) * dtype_size(dt));
    copy(mine.data(), buf, n, dt);
    for (int r = 1; r < size_; ++r) reduce_into(buf, mine.data(), n, dt, op);
  }

  bool faulty() const { return faults_.leaves >= 0 || faults_.mismatches >= 0; }

  int size_, rank_;
  FakePeerFaults faults_;
  std::atomic<bool> leaving_{false};  // set on the communication thread, read by the watchdog
  bool left_told_ = false, others_told_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_fake_transport(int size, int rank, const FakePeerFaults& faults) {
  return std::make_unique<FakeTransport>(size, rank, faults);
}

}  // namespace brisk::dist::detail
