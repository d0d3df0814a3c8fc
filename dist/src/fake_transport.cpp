// FakeTransport: a world of `size` ranks that exists inside one process, for tests and teaching
// (dist::fake_group). Every other rank is taken to hold exactly this rank's data, so each
// collective returns what a real job of identical ranks would: all_reduce sums to size * x
// (average, max and min give x back), gathers repeat this rank's block. Messages go nowhere:
// a send does nothing and a receive leaves its buffer as it is.
#include <algorithm>
#include <cstring>
#include <vector>

#include "transport.h"

namespace brisk::dist::detail {
namespace {

class FakeTransport final : public Transport {
 public:
  FakeTransport(int size, int rank) : size_(size), rank_(rank) {}

  std::string name() const override { return "fake"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }

  void all_reduce(void* buf, int64_t n, DType dt, ReduceOp op) override { combine_identical(buf, n, dt, op); }
  void broadcast(void*, int64_t, DType, int) override {}
  void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp op, int root) override {
    if (rank_ != root) return;
    copy(out, in, n, dt);
    combine_identical(out, n, dt, op);
  }
  void all_gather(const void* in, void* out, int64_t n, DType dt) override { repeat(in, out, n, dt); }
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

  int size_, rank_;
};

}  // namespace

std::unique_ptr<Transport> make_fake_transport(int size, int rank) {
  return std::make_unique<FakeTransport>(size, rank);
}

}  // namespace brisk::dist::detail
