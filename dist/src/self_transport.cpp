// SelfTransport: the world of one process, used when no launcher started this program.
// Every collective is an identity (or a copy); sending to oneself is an error.
#include <cstring>

#include "transport.h"

namespace brisk::dist::detail {
namespace {

class SelfTransport final : public Transport {
 public:
  std::string name() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

  void all_reduce(void*, int64_t, DType, ReduceOp) override {}
  void broadcast(void*, int64_t, DType, int) override {}
  void reduce(const void* in, void* out, int64_t n, DType dt, ReduceOp, int) override { copy(out, in, n, dt); }
  void all_gather(const void* in, void* out, int64_t n, DType dt) override { copy(out, in, n, dt); }
  void all_gather_v(const void* in, void* out, const std::vector<int64_t>& counts, DType dt) override {
    copy(out, in, counts[0], dt);
  }
  void gather(const void* in, void* out, int64_t n, DType dt, int) override { copy(out, in, n, dt); }
  void scatter(const void* in, void* out, int64_t n, DType dt, int) override { copy(out, in, n, dt); }
  void reduce_scatter(const void* in, void* out, int64_t n, DType dt, ReduceOp) override { copy(out, in, n, dt); }
  void all_to_all(const void* in, void* out, int64_t n, DType dt) override { copy(out, in, n, dt); }
  void barrier() override {}

  Request isend(const void*, int64_t, int peer, int, Channel) override { no_peer("send", peer); }
  Request irecv(void*, int64_t, int peer, int, Channel) override { no_peer("recv", peer); }
  void wait(Request& r) override { r.active = false; }
  bool test(Request& r) override {
    r.active = false;
    return true;
  }

 private:
  static void copy(void* out, const void* in, int64_t n, DType dt) {
    if (out != in && n > 0) std::memcpy(out, in, static_cast<size_t>(n) * dtype_size(dt));
  }
  [[noreturn]] static void no_peer(const char* op, int peer) {
    BRISK_THROW(op, ": peer ", peer, " does not exist in a world of one process (start the program with ",
                "`brisk launch -n N` or mpirun to get more)");
  }
};

}  // namespace

std::unique_ptr<Transport> make_self_transport() {
  return std::make_unique<SelfTransport>();
}

}  // namespace brisk::dist::detail
