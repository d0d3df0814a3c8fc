// The caching CPU allocator (64-byte aligned) and the per-category byte counters.
#include "brisk/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <unordered_map>

#include "brisk/util/error.h"

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

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

int64_t cache_limit_from_env() {
  constexpr int64_t kDefaultMiB = 2048;
  const char* v = std::getenv("BRISK_CPU_CACHE_MB");
  if (!v || !*v) return kDefaultMiB << 20;
  char* end = nullptr;
  const long long mib = std::strtoll(v, &end, 10);
  BRISK_CHECK(end && *end == '\0' && mib >= 0, "BRISK_CPU_CACHE_MB='", v,
              "' is not a number of MiB >= 0 (0 turns the CPU allocator's cache off)");
  return static_cast<int64_t>(mib) << 20;
}

// The caching CPU allocator (see allocator.h). Blocks are 64-byte aligned and rounded up to 64
// bytes; free blocks wait in a size-ordered multimap (best fit), live blocks remember their size
// (a block may serve a request up to 1/8 smaller than itself, and the tensor frees by its own
// size). One mutex: an allocation costs a map look-up, far less than the page faults it saves.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : limit_(kAddressSanitizer ? 0 : cache_limit_from_env()) {}
  ~CpuAllocator() override { empty_cache(); }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    BRISK_CHECK(nbytes <= (size_t{1} << 62), "cpu_allocator: cannot allocate ", nbytes, " bytes");
    const size_t size = (nbytes + 63) / 64 * 64;
    if (limit_ > 0) {
      std::lock_guard lk(m_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first - size <= size / 8) {
        void* p = it->second;
        const size_t got = it->first;
        free_.erase(it);
        cached_bytes_ -= static_cast<int64_t>(got);
        live_.emplace(p, got);
        ++cache_hits_;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr && limit_ > 0) {
      empty_cache();
      p = std::aligned_alloc(64, size);
    }
    BRISK_CHECK(p != nullptr, "cpu_allocator: out of memory allocating ", nbytes, " bytes");
    std::lock_guard lk(m_);
    ++system_allocs_;
    if (limit_ > 0) live_.emplace(p, size);
    return p;
  }

  void deallocate(void* ptr, size_t) override {
    if (ptr == nullptr) return;
    {
      std::lock_guard lk(m_);
      if (limit_ > 0) {
        auto node = live_.extract(ptr);
        if (!node.empty()) {
          const size_t size = node.mapped();
          if (cached_bytes_ + static_cast<int64_t>(size) <= limit_) {
            free_.emplace(size, ptr);
            cached_bytes_ += static_cast<int64_t>(size);
            return;
          }
        }
      }
      ++system_frees_;
    }
    std::free(ptr);
  }

  Device device() const override { return kCPU; }

  void empty_cache() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard lk(m_);
      blocks.swap(free_);
      system_frees_ += static_cast<int64_t>(blocks.size());
      cached_bytes_ = 0;
    }
    for (auto& [size, p] : blocks) std::free(p);
  }

  CpuAllocatorStats stats() {
    std::lock_guard lk(m_);
    CpuAllocatorStats s;
    s.system_allocs = system_allocs_;
    s.system_frees = system_frees_;
    s.cache_hits = cache_hits_;
    s.cached_blocks = static_cast<int64_t>(free_.size());
    s.cached_bytes = cached_bytes_;
    s.cache_limit_bytes = limit_;
    s.caching = limit_ > 0;
    return s;
  }

 private:
  const int64_t limit_;
  std::mutex m_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> live_;
  int64_t cached_bytes_ = 0;
  int64_t system_allocs_ = 0, system_frees_ = 0, cache_hits_ = 0;
};

CpuAllocator& the_cpu_allocator() {
  // Never destroyed: tensors in static storage may be freed after this file's statics are gone.
  static CpuAllocator* a = new CpuAllocator();
  return *a;
}

Allocator* g_cuda_allocator = nullptr;
Allocator* g_pinned_allocator = nullptr;

}  // namespace

Allocator* cpu_allocator() {
  return &the_cpu_allocator();
}

CpuAllocatorStats cpu_allocator_stats() {
  return the_cpu_allocator().stats();
}

void cpu_empty_cache() {
  the_cpu_allocator().empty_cache();
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
