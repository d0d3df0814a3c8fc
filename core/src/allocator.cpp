// The CPU allocator (64-byte aligned) and the per-category byte counters.
#include "brisk/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <sstream>

#include "brisk/core/error.h"

namespace brisk {

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::Parameters:
      return "parameters";
    case MemoryCategory::Gradients:
      return "gradients";
    case MemoryCategory::OptimizerState:
      return "optimizer_state";
    case MemoryCategory::Activations:
      return "activations";
    case MemoryCategory::Other:
      return "other";
  }
  return "?";
}

namespace {

struct Counters {
  std::atomic<int64_t> current[kNumMemoryCategories]{};
  std::atomic<int64_t> peak[kNumMemoryCategories]{};
  std::atomic<int64_t> total{0};
  std::atomic<int64_t> total_peak{0};
};

Counters& counters(DeviceKind k) {
  static Counters c[2];
  return c[static_cast<int>(k)];
}

void raise_peak(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    BRISK_CHECK(p != nullptr, "cpu_allocator: out of memory allocating ", nbytes, " bytes");
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  Device device() const override { return kCPU; }
};

Allocator* g_cuda_allocator = nullptr;
Allocator* g_pinned_allocator = nullptr;

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator a;
  return &a;
}

void register_allocator(DeviceKind kind, Allocator* a) {
  BRISK_CHECK(kind == DeviceKind::CUDA, "register_allocator: only the CUDA allocator can be registered");
  g_cuda_allocator = a;
}

Allocator* pinned_allocator() {
  return g_pinned_allocator;
}
void register_pinned_allocator(Allocator* a) {
  g_pinned_allocator = a;
}

Allocator* allocator_for(Device d) {
  if (d.is_cpu()) return cpu_allocator();
  BRISK_CHECK(g_cuda_allocator != nullptr, "allocator_for: no CUDA allocator for ", d.str(),
              ": this build of brisk has no CUDA support (rebuild with the CUDA toolkit installed)");
  return g_cuda_allocator;
}

namespace detail {
void count_alloc(DeviceKind kind, MemoryCategory c, int64_t nbytes) {
  Counters& k = counters(kind);
  int i = static_cast<int>(c);
  int64_t now = k.current[i].fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  int64_t tot = k.total.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  if (nbytes > 0) {
    raise_peak(k.peak[i], now);
    raise_peak(k.total_peak, tot);
  }
}
}  // namespace detail

MemoryStats memory_stats(DeviceKind kind) {
  Counters& k = counters(kind);
  MemoryStats s;
  for (int i = 0; i < kNumMemoryCategories; ++i) {
    s.current[i] = k.current[i].load();
    s.peak[i] = k.peak[i].load();
  }
  s.total_current = k.total.load();
  s.total_peak = k.total_peak.load();
  return s;
}

void reset_peak_memory_stats(DeviceKind kind) {
  Counters& k = counters(kind);
  for (int i = 0; i < kNumMemoryCategories; ++i) k.peak[i] = k.current[i].load();
  k.total_peak = k.total.load();
}

std::string memory_report(DeviceKind kind) {
  MemoryStats s = memory_stats(kind);
  std::ostringstream os;
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  os.setf(std::ios::fixed);
  os.precision(2);
  for (int i = 0; i < kNumMemoryCategories; ++i)
    os << memory_category_name(static_cast<MemoryCategory>(i)) << ": " << mib(s.current[i]) << " MiB (peak "
       << mib(s.peak[i]) << " MiB)\n";
  os << "total: " << mib(s.total_current) << " MiB (peak " << mib(s.total_peak) << " MiB)\n";
  return os.str();
}

}  // namespace brisk
