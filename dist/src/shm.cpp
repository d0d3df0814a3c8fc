// The shared-memory segment and barrier of shm.h, and the rank-order reduction over it.
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

#include "brisk/kernels/factory.h"
#include "brisk/kernels/threads.h"
#include "transport.h"

namespace brisk::dist::detail {

namespace {

constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;

// One rank's slot in the header page: on a cache line of its own, so a rank announcing its
// arrival does not disturb the lines the others spin on.
struct alignas(kLine) Slot {
  std::atomic<uint64_t> epoch;
  std::atomic<int64_t> pid;
};
static_assert(sizeof(Slot) == kLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the barrier needs lock-free 64-bit atomics");

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool process_alive(int64_t pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// Hands a mapping to one Storage as its bytes, and unmaps it when that storage goes: the last
// tensor viewing the segment (a gradient may outlive the Reducer) keeps it mapped. One allocator
// serves every segment (a Storage keeps a plain pointer to its allocator): the mapping to hand
// out is passed in `handing_out` by the thread constructing the Storage.
thread_local void* handing_out = nullptr;
class MappingAllocator final : public Allocator {
 public:
  void* allocate(size_t) override {
    BRISK_CHECK(handing_out != nullptr, "SharedSegment: a shared-memory mapping cannot be allocated again");
    return std::exchange(handing_out, nullptr);
  }
  void deallocate(void* p, size_t n) override { ::munmap(p, n); }
  Device device() const override { return Device(DeviceKind::CPU); }
};
MappingAllocator* mapping_allocator() {
  static auto* a = new MappingAllocator();  // never destroyed: storages may outlive static destruction
  return a;
}

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

std::unique_ptr<SharedSegment> SharedSegment::create(ProcessGroup& pg, size_t bytes_per_rank, bool wants,
                                                     std::string* why) {
  auto fail = [&](std::string reason) -> std::unique_ptr<SharedSegment> {
    if (why) *why = std::move(reason);
    return nullptr;
  };
  const int W = pg.size(), me = pg.rank();
  // Deterministic on every rank (the launcher tells each its host's share), so no collective
  // is needed to agree on it.
  if (pg.backend() != "mpi") return fail("the group's backend is " + pg.backend() + ", not mpi");
  if (pg.local_size() != W) return fail("the ranks are on more than one host");
  Tensor agree = full({1}, wants ? 1.0 : 0.0, {.dtype = DType::I32});
  pg.all_reduce(agree, {.op = ReduceOp::Min});
  if (agree.data<int32_t>()[0] == 0) return fail(wants ? "another rank did not ask for it" : "not asked for");

  std::unique_ptr<SharedSegment> s(new SharedSegment());
  s->rank_ = me;
  s->size_ = W;
  s->header_bytes_ = round_up(sizeof(Slot) * static_cast<size_t>(W), kPage);
  s->region_bytes_ = round_up(std::max<size_t>(bytes_per_rank, 1), kPage);
  s->mapped_bytes_ = s->header_bytes_ + s->region_bytes_ * static_cast<size_t>(W);
  s->spin_ = W * std::max(1, get_num_threads()) <= usable_cpus();

  // Rank 0 makes the segment (a fresh name: its pid, a counter and a random number) and reserves
  // every page; the others learn the name and whether it worked from one broadcast.
  static std::atomic<int64_t> counter{0};
  Tensor info = zeros({4}, {.dtype = DType::I64});
  int64_t* in = info.data<int64_t>();
  std::string name;
  auto name_of = [](int64_t pid, int64_t n, int64_t r) {
    return "/brisk-" + std::to_string(pid) + "-" + std::to_string(n) + "-" + std::to_string(r);
  };
  int fd = -1;
  if (me == 0) {
    std::random_device rd;
    in[1] = ::getpid();
    in[2] = counter++;
    in[3] = static_cast<int64_t>(rd() & 0x7fffffff);
    name = name_of(in[1], in[2], in[3]);
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
      err = ::posix_fallocate(fd, 0, static_cast<off_t>(s->mapped_bytes_));
      if (err) {
        ::close(fd);
        ::shm_unlink(name.c_str());
        fd = -1;
      }
    }
    in[0] = err;
  }
  pg.broadcast(info, {.root = 0});
  if (in[0] != 0)
    return fail("rank 0 could not make a " + std::to_string(s->mapped_bytes_ >> 20) +
                " MiB shared-memory segment in /dev/shm: " + std::strerror(static_cast<int>(in[0])));
  if (me != 0) {
    name = name_of(in[1], in[2], in[3]);
    fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  }
  bool ok = fd >= 0;
  int err = ok ? 0 : errno;
  if (ok) {
    struct stat st {};
    ok = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == s->mapped_bytes_;
    void* p = ok ? ::mmap(nullptr, s->mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    err = ok && p == MAP_FAILED ? errno : err;
    ok = ok && p != MAP_FAILED;
    if (ok) s->base_ = static_cast<char*>(p);
    ::close(fd);
  }
  if (ok) {
    auto* slot = reinterpret_cast<Slot*>(s->base_) + me;
    slot->epoch.store(0, std::memory_order_relaxed);
    slot->pid.store(::getpid(), std::memory_order_release);
  }
  // Everyone has opened it (or failed): the name can go. The reduction also orders the pid
  // stores above before the reads below.
  Tensor all_ok = full({1}, ok ? 1.0 : 0.0, {.dtype = DType::I32});
  pg.all_reduce(all_ok, {.op = ReduceOp::Min});
  if (me == 0) ::shm_unlink(name.c_str());
  if (all_ok.data<int32_t>()[0] == 0) {
    if (s->base_) ::munmap(s->base_, s->mapped_bytes_);
    s->base_ = nullptr;
    return fail(ok ? std::string("another rank could not map the shared-memory segment")
                   : std::string("could not map the shared-memory segment: ") + std::strerror(err));
  }
  handing_out = s->base_;
  s->storage_ = std::make_shared<StorageImpl>(s->mapped_bytes_, Device(DeviceKind::CPU), MemoryCategory::Gradients,
                                              mapping_allocator());
  // Peers' liveness is checked while waiting for them, where their pids mean something here.
  s->check_peers_ = true;
  for (int q = 0; q < W; ++q) {
    const int64_t pid = reinterpret_cast<Slot*>(s->base_)[q].pid.load(std::memory_order_acquire);
    s->check_peers_ = s->check_peers_ && pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0;
  }
  return s;
}

SharedSegment::~SharedSegment() {
  // The mapping goes with the last tensor viewing it (MappingAllocator); before the storage
  // exists (a failed create) the segment owns it.
  if (!storage_ && base_) ::munmap(base_, mapped_bytes_);
}

Tensor SharedSegment::view(int rank, size_t byte_offset, int64_t numel, DType dt) const {
  const size_t es = dtype_size(dt);
  const size_t at = header_bytes_ + region_bytes_ * static_cast<size_t>(rank) + byte_offset;
  BRISK_CHECK(
      rank >= 0 && rank < size_ && at % es == 0 && byte_offset + static_cast<size_t>(numel) * es <= region_bytes_,
      "SharedSegment::view: ", numel, " elements of ", dtype_name(dt), " at byte ", byte_offset, " of region ", rank,
      " do not fit its ", region_bytes_, " bytes");
  Tensor whole = Tensor(std::make_shared<TensorImpl>());
  whole.impl()->storage = storage_;
  whole.impl()->dtype = dt;
  return whole.as_strided({numel}, {1}, static_cast<int64_t>(at / es));
}

void SharedSegment::barrier(const char* op, double timeout_s, const std::function<std::string()>& interrupted,
                            const std::function<std::string()>& report) {
  using Clock = std::chrono::steady_clock;
  auto* slots = reinterpret_cast<Slot*>(base_);
  const uint64_t e = ++epoch_;
  slots[rank_].epoch.store(e, std::memory_order_release);
  const auto start = Clock::now();
  // Spin (cheap, and the fastest wake-up) while every rank has a core of its own and the wait is
  // short; then give the core away; after a while sleep between looks.
  constexpr auto kSpinFor = std::chrono::microseconds(300);
  constexpr auto kYieldFor = std::chrono::milliseconds(5);
  auto next_check = start + std::chrono::milliseconds(10);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    uint64_t looks = 0;
    while (slots[q].epoch.load(std::memory_order_acquire) < e) {
      ++looks;
      if (spin_ && (looks & 255) != 0) {
        cpu_relax();
        continue;
      }
      const auto now = Clock::now();
      const auto waited = now - start;
      if (spin_ && waited < kSpinFor) continue;
      if (waited < kYieldFor) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (now < next_check) continue;
      next_check = now + std::chrono::milliseconds(10);
      if (interrupted) {
        const std::string reason = interrupted();
        if (!reason.empty()) BRISK_THROW(op, ": ", reason);
      }
      const int64_t pid = slots[q].pid.load(std::memory_order_relaxed);
      if (check_peers_ && !process_alive(pid))
        BRISK_THROW(op, ": rank ", q, " (process ", pid, ") exited while rank ", rank_,
                    " waited for it in a shared-memory all-reduce; see that "
                    "rank's output for why it stopped");
      const double secs = std::chrono::duration<double>(waited).count();
      if (secs > timeout_s)
        BRISK_THROW(op, ": rank ", rank_, " waited ", secs, " s for rank ", q,
                    " in a shared-memory all-reduce, longer than the timeout (dist::InitOptions::timeout_seconds / "
                    "BRISK_TIMEOUT_SECONDS); every rank must run the same synced backward passes and the same "
                    "collectives (a rank that skips backward() or a collective, or hangs, stops the others here)",
                    report ? report() : std::string());
    }
  }
}

void reduce_ranks_in_place(void* const* data, int world, int64_t begin, int64_t end, DType dt, ReduceOp op) {
  const size_t es = dtype_size(dt);
  // Blocks of 16 KiB: the block stays in L1 while every rank's values are added to it, then goes
  // back to every rank's region.
  constexpr size_t kBlockBytes = 16384;
  alignas(64) char scratch[kBlockBytes];
  const int64_t block = std::max<int64_t>(1, static_cast<int64_t>(kBlockBytes / es));
  const ReduceOp combine = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  for (int64_t i0 = begin; i0 < end; i0 += block) {
    const int64_t n = std::min(block, end - i0);
    const size_t off = static_cast<size_t>(i0) * es, bytes = static_cast<size_t>(n) * es;
    std::memcpy(scratch, static_cast<const char*>(data[0]) + off, bytes);
    for (int r = 1; r < world; ++r) reduce_into(scratch, static_cast<const char*>(data[r]) + off, n, dt, combine);
    if (op == ReduceOp::Avg) divide_by(scratch, n, dt, world);
    for (int r = 0; r < world; ++r) std::memcpy(static_cast<char*>(data[r]) + off, scratch, bytes);
  }
}

}  // namespace brisk::dist::detail
