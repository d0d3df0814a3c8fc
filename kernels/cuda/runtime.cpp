// The CUDA runtime layer: devices, the calling thread's current device and stream, the stream
// pool, events, copies, the device-error word, and recording mode (every call below checks
// recording() first and logs instead of calling CUDA; see brisk/kernels/cuda_recording.h).
#include "cuda/runtime.h"

#include <cublas_v2.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "brisk/kernels/dispatch.h"

#if __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#define BRISK_HAVE_CUDNN_HEADER 1
#endif

namespace brisk::cuda {

// --- recording state ---------------------------------------------------------------------------
namespace {

struct RecordingState {
  std::mutex mu;
  std::atomic<bool> active{false};
  std::atomic<bool> hold_events{false};  // Event::query() says "not yet" (Session::hold_events)
  int devices = 0;
  std::vector<recording::Entry> log;
  std::unordered_map<void*, uint64_t> stream_ids;  // fake stream handle -> id
  uint64_t next_stream = 1;
  uint64_t next_event = 1;
};

RecordingState& rec() {
  static auto* r = new RecordingState;
  return *r;
}

thread_local int tl_device = 0;                                     // current device (recording and real)
thread_local std::unordered_map<int, void*>* tl_streams = nullptr;  // device -> current stream handle

std::unordered_map<int, void*>& thread_streams() {
  if (!tl_streams) tl_streams = new std::unordered_map<int, void*>();  // lives as long as the thread
  return *tl_streams;
}

}  // namespace

namespace recording {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Launch:
      return "launch";
    case Kind::Library:
      return "library";
    case Kind::Copy:
      return "copy";
    case Kind::Memset:
      return "memset";
    case Kind::EventRecord:
      return "event_record";
    case Kind::EventWait:
      return "event_wait";
    case Kind::Sync:
      return "sync";
    case Kind::Malloc:
      return "malloc";
    case Kind::Free:
      return "free";
  }
  return "?";
}

bool supported() {
  return true;
}
bool active() {
  return rec().active.load(std::memory_order_relaxed);
}

Session::Session(int devices) {
  BRISK_CHECK(devices >= 1, "cuda::recording::Session: devices must be >= 1, got ", devices);
  RecordingState& r = rec();
  std::lock_guard lk(r.mu);
  BRISK_CHECK(!r.active, "cuda::recording::Session: another session is alive");
  r.devices = devices;
  r.log.clear();
  r.stream_ids.clear();
  r.next_stream = 1;
  r.next_event = 1;
  thread_streams().clear();
  tl_device = 0;
  r.hold_events = false;
  r.active = true;
}

Session::~Session() {
  // Fake device blocks cached by the allocator must not survive into real use.
  empty_cache();
  RecordingState& r = rec();
  std::lock_guard lk(r.mu);
  r.active = false;
  r.log.clear();
  thread_streams().clear();
  tl_device = 0;
}

std::vector<Entry> Session::entries() const {
  std::lock_guard lk(rec().mu);
  return rec().log;
}

std::vector<Entry> Session::entries(Kind k) const {
  std::vector<Entry> out;
  for (const Entry& e : entries())
    if (e.kind == k) out.push_back(e);
  return out;
}

size_t Session::count(Kind k) const {
  return entries(k).size();
}

void Session::clear() {
  std::lock_guard lk(rec().mu);
  rec().log.clear();
}

void Session::hold_events(bool hold) {
  rec().hold_events = hold;
}

void record(Entry e) {
  if (!active()) return;
  std::lock_guard lk(rec().mu);
  rec().log.push_back(std::move(e));
}

uint64_t stream_id(void* handle) {
  if (!handle) return 0;
  std::lock_guard lk(rec().mu);
  auto it = rec().stream_ids.find(handle);
  if (it != rec().stream_ids.end()) return it->second;
  // A real stream seen while recording (should not happen): give it an id of its own.
  return rec().stream_ids[handle] = rec().next_stream++;
}

}  // namespace recording

namespace detail {

using recording::Entry;
using recording::Kind;

std::string op_context() {
  return kernels::OpScope::describe();
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
  std::string ctx = op_context();
  throw_error(brisk::detail::str_cat("CUDA error in ", call, ": ", cudaGetErrorString(err), " (", cudaGetErrorName(err),
                                     ")", ctx.empty() ? "" : " ", ctx),
              file, line);
}

bool recording_library_call(const char* name, cudaStream_t stream) {
  return recording_library_call(name, stream, "");
}

bool recording_library_call(const char* name, cudaStream_t stream, const char* detail) {
  if (!recording()) return false;
  Entry e;
  e.kind = Kind::Library;
  e.name = name;
  e.detail = detail;
  e.device = tl_device;
  e.stream = recording::stream_id(stream);
  recording::record(std::move(e));
  return true;
}

namespace {
void log_simple(Kind k, const char* name, cudaStream_t stream, uint64_t bytes) {
  Entry e;
  e.kind = k;
  e.name = name;
  e.device = tl_device;
  e.stream = recording::stream_id(stream);
  e.bytes = bytes;
  recording::record(std::move(e));
}

// A recorded copy's name: which way it went ("DtoH" is a host read of device data, the kind of
// copy a training step must count).
const char* copy_direction(const void* dst, const void* src) {
  const bool from_device = is_device_pointer(src), to_device = is_device_pointer(dst);
  if (from_device) return to_device ? "DtoD" : "DtoH";
  return to_device ? "HtoD" : "HtoH";
}
}  // namespace

void memcpy_async(void* dst, const void* src, size_t nbytes, cudaStream_t stream, bool sync) {
  if (nbytes == 0) return;
  if (cuda::is_capturing()) {
    if (sync) throw_if_capturing("a copy to the host waits for the GPU");
    if (!is_device_pointer(src) || !is_device_pointer(dst)) throw_if_capturing("a copy reads or writes host memory");
  }
  if (recording()) {
    // All "device" memory is host memory while recording: the copy is real, so host code
    // reading back what it uploaded behaves; kernels never ran, so their outputs are zeros.
    std::memmove(dst, src, nbytes);
    log_simple(Kind::Copy, copy_direction(dst, src), stream, nbytes);
    if (sync) log_simple(Kind::Sync, "stream", stream, 0);
    return;
  }
  BRISK_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream));
  if (sync) {
    BRISK_CUDA_CHECK(cudaStreamSynchronize(stream));
    check_device_errors();
  }
}

void memset_async(void* dst, int value, size_t nbytes, cudaStream_t stream) {
  if (nbytes == 0) return;
  if (recording()) {
    std::memset(dst, value, nbytes);
    log_simple(Kind::Memset, "memset", stream, nbytes);
    return;
  }
  BRISK_CUDA_CHECK(cudaMemsetAsync(dst, value, nbytes, stream));
}

namespace {
std::mutex g_fake_mu;
std::map<void*, size_t>& fake_blocks() {  // ordered: is_device_pointer finds the block holding p
  static auto* m = new std::map<void*, size_t>;
  return *m;
}
}  // namespace

bool is_device_pointer(const void* p) {
  if (recording()) {
    std::lock_guard lk(g_fake_mu);
    auto it = fake_blocks().upper_bound(const_cast<void*>(p));
    if (it == fake_blocks().begin()) return false;
    --it;
    return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
  }
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void* raw_malloc(size_t nbytes, int device) {
  if (recording()) {
    void* p = std::aligned_alloc(256, (nbytes + 255) / 256 * 256);
    BRISK_CHECK(p, "cuda recording: out of host memory for a fake device block of ", nbytes, " bytes");
    std::memset(p, 0, nbytes);
    {
      std::lock_guard lk(g_fake_mu);
      fake_blocks()[p] = nbytes;
    }
    Entry e;
    e.kind = Kind::Malloc;
    e.name = "cudaMalloc";
    e.device = device;
    e.bytes = nbytes;
    recording::record(std::move(e));
    return p;
  }
  DeviceGuard guard(device);
  void* p = nullptr;
  BRISK_CUDA_CHECK(cudaMalloc(&p, nbytes));
  return p;
}

void raw_free(void* p, int device) {
  if (!p) return;
  {
    std::lock_guard lk(g_fake_mu);
    auto it = fake_blocks().find(p);
    if (it != fake_blocks().end()) {
      fake_blocks().erase(it);
      std::free(p);
      Entry e;
      e.kind = Kind::Free;
      e.name = "cudaFree";
      e.device = device;
      recording::record(std::move(e));
      return;
    }
  }
  DeviceGuard guard(device);
  BRISK_CUDA_CHECK(cudaFree(p));
}

// --- device errors ----------------------------------------------------------------------------
namespace {
std::mutex g_err_mu;
std::vector<std::string>& error_names() {
  static auto* v = new std::vector<std::string>{""};
  return *v;
}
DeviceErrorSlot* g_host_slot = nullptr;    // mapped pinned memory (host view)
DeviceErrorSlot* g_device_slot = nullptr;  // the same memory as the GPU sees it
DeviceErrorSlot g_fake_slot{};             // while recording
}  // namespace

DeviceErrorSlot* device_error_slot() {
  if (recording()) return &g_fake_slot;
  std::lock_guard lk(g_err_mu);
  if (!g_device_slot) {
    void* p = nullptr;
    BRISK_CUDA_CHECK(cudaHostAlloc(&p, sizeof(DeviceErrorSlot), cudaHostAllocMapped));
    g_host_slot = static_cast<DeviceErrorSlot*>(p);
    std::memset(g_host_slot, 0, sizeof(DeviceErrorSlot));
    void* d = nullptr;
    BRISK_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
    g_device_slot = static_cast<DeviceErrorSlot*>(d);
  }
  return g_device_slot;
}

int32_t register_device_error(const char* what) {
  std::lock_guard lk(g_err_mu);
  auto& names = error_names();
  for (size_t i = 1; i < names.size(); ++i)
    if (names[i] == what) return static_cast<int32_t>(i);
  names.emplace_back(what);
  return static_cast<int32_t>(names.size() - 1);
}

void check_device_errors() {
  volatile DeviceErrorSlot* slot = g_host_slot;
  if (!slot || slot->code == 0) return;
  const int32_t code = slot->code;
  const int64_t value = slot->value, limit = slot->limit;
  slot->code = 0;
  std::string what;
  {
    std::lock_guard lk(g_err_mu);
    what = code > 0 && static_cast<size_t>(code) < error_names().size() ? error_names()[code] : "unknown device error";
  }
  BRISK_THROW(what, " (value ", value, ", limit ", limit, "; found on the GPU by a kernel launched earlier)");
}

// --- launches ---------------------------------------------------------------------------------
bool prepare_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream) {
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  BRISK_CHECK(threads >= 1 && threads <= kMaxThreadsPerBlock && block.z <= 64, "cuda launch of ", name,
              ": bad block shape (", block.x, ", ", block.y, ", ", block.z, ") ", op_context());
  BRISK_CHECK(grid.x >= 1 && grid.x <= 0x7fffffffu && grid.y >= 1 && grid.y <= 65535 && grid.z >= 1 && grid.z <= 65535,
              "cuda launch of ", name, ": bad grid shape (", grid.x, ", ", grid.y, ", ", grid.z, ") ", op_context());
  BRISK_CHECK(shared_bytes <= 227 * 1024, "cuda launch of ", name, ": ", shared_bytes,
              " bytes of shared memory exceed the 227 KiB a block can have ", op_context());
  if (recording()) {
    Entry e;
    e.kind = Kind::Launch;
    e.name = name;
    e.device = tl_device;
    e.stream = recording::stream_id(stream);
    e.grid[0] = grid.x, e.grid[1] = grid.y, e.grid[2] = grid.z;
    e.block[0] = block.x, e.block[1] = block.y, e.block[2] = block.z;
    e.shared_bytes = shared_bytes;
    recording::record(std::move(e));
    return false;
  }
  return true;
}

void check_launch(const char* name) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) [[unlikely]] {
    std::string ctx = op_context();
    BRISK_THROW("CUDA error launching kernel ", name, ": ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ")",
                ctx.empty() ? "" : " ", ctx);
  }
}

}  // namespace detail

// --- devices ----------------------------------------------------------------------------------
int device_count() {
  if (detail::recording()) return rec().devices;
  // Asked once: without a driver or GPU the runtime reports an error, which means "none".
  static const int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() {
  return device_count() > 0;
}

int current_device() {
  if (detail::recording() || !is_available()) return tl_device;
  int d = 0;
  BRISK_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int device) {
  BRISK_CHECK(device >= 0 && device < device_count(), "cuda::set_device: device ", device, " does not exist (",
              device_count(), " CUDA devices visible)");
  tl_device = device;
  if (!detail::recording()) BRISK_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::DeviceGuard(int device) : prev_(current_device()) {
  if (device != prev_) set_device(device);
}

DeviceGuard::~DeviceGuard() {
  if (current_device() == prev_) return;
  tl_device = prev_;
  if (!detail::recording()) (void)cudaSetDevice(prev_);
}

void synchronize(int device) {
  if (!is_available()) return;
  detail::throw_if_capturing("cuda::synchronize() waits for the GPU");
  if (detail::recording()) {
    recording::Entry e;
    e.kind = recording::Kind::Sync;
    e.name = "device";
    e.device = device < 0 ? tl_device : device;
    recording::record(std::move(e));
    return;
  }
  if (device < 0) {
    BRISK_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    DeviceGuard guard(device);
    BRISK_CUDA_CHECK(cudaDeviceSynchronize());
  }
  detail::check_device_errors();
}

DeviceProperties device_properties(int device) {
  BRISK_CHECK(device >= 0 && device < device_count(), "cuda::device_properties: device ", device, " does not exist (",
              device_count(), " CUDA devices visible)");
  DeviceProperties p;
  if (detail::recording()) {
    p.name = "recording (no GPU)";
    p.major = 9;
    p.minor = 0;
    p.total_memory = int64_t{80} << 30;
    p.multiprocessors = 132;
    return p;
  }
  cudaDeviceProp prop{};
  BRISK_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  p.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  p.multiprocessors = prop.multiProcessorCount;
  return p;
}

namespace {
// A device attribute, asked of the driver once per (attribute, device); in recording mode what an
// H100 answers (recording pretends to be one).
int cached_attribute(cudaDeviceAttr attr, int device, int h100_value) {
  if (detail::recording()) return h100_value;
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  std::lock_guard lk(mu);
  const std::pair<int, int> key{static_cast<int>(attr), device};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int n = 0;
  BRISK_CUDA_CHECK(cudaDeviceGetAttribute(&n, attr, device));
  return cache[key] = n;
}
}  // namespace

int detail::multiprocessor_count(int device) {
  return cached_attribute(cudaDevAttrMultiProcessorCount, device, 132);
}
int detail::compute_capability_major(int device) {
  return cached_attribute(cudaDevAttrComputeCapabilityMajor, device, 9);
}
int detail::shared_memory_optin(int device) {
  return cached_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device, 227 * 1024);
}

Versions versions() {
  Versions v;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) {
    (void)cudaGetLastError();
    v.runtime = 0;
  }
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) {
    (void)cudaGetLastError();
    v.driver = 0;
  }
  v.cublas = CUBLAS_VERSION;
#ifdef BRISK_HAVE_CUDNN_HEADER
  v.cudnn = CUDNN_VERSION;
#endif
  return v;
}

// --- streams ------------------------------------------------------------------------------------
namespace {

constexpr int kPoolSize = 32;  // streams per device and priority, handed out round robin

struct StreamPool {
  std::mutex mu;
  std::map<std::pair<int, bool>, std::vector<void*>> streams;  // (device, high) -> handles
  std::map<std::pair<int, bool>, size_t> next;
};

StreamPool& pool() {
  static auto* p = new StreamPool;  // streams live as long as the process
  return *p;
}

int resolve(int device) {
  return device < 0 ? current_device() : device;
}

}  // namespace

Stream Stream::create(int device, bool high_priority) {
  device = resolve(device);
  BRISK_CHECK(device >= 0 && device < device_count(), "cuda::Stream::create: device ", device, " does not exist (",
              device_count(), " CUDA devices visible)");
  if (detail::recording()) {
    std::lock_guard lk(rec().mu);
    const uint64_t id = rec().next_stream++;
    void* h = reinterpret_cast<void*>(static_cast<uintptr_t>(0x10000 + id));
    rec().stream_ids[h] = id;
    return Stream(h, device);
  }
  StreamPool& p = pool();
  std::lock_guard lk(p.mu);
  auto key = std::make_pair(device, high_priority);
  auto& v = p.streams[key];
  if (v.size() < kPoolSize) {
    DeviceGuard guard(device);
    int lo = 0, hi = 0;
    BRISK_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t s = nullptr;
    BRISK_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high_priority ? hi : lo));
    v.push_back(s);
    return Stream(s, device);
  }
  size_t& n = p.next[key];
  void* h = v[n++ % v.size()];
  return Stream(h, device);
}

Stream Stream::default_stream(int device) {
  return Stream(nullptr, resolve(device));
}

void Stream::synchronize() const {
  detail::throw_if_capturing("Stream::synchronize() waits for the GPU");
  if (detail::recording()) {
    recording::Entry e;
    e.kind = recording::Kind::Sync;
    e.name = "stream";
    e.device = device_;
    e.stream = recording::stream_id(handle_);
    recording::record(std::move(e));
    return;
  }
  if (!is_available()) return;
  DeviceGuard guard(device_);
  BRISK_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
  detail::check_device_errors();
}

bool Stream::query() const {
  if (detail::recording() || !is_available()) return true;
  DeviceGuard guard(device_);
  cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  BRISK_CUDA_CHECK(err);
  return true;
}

Stream current_stream(int device) {
  device = resolve(device);
  auto& m = thread_streams();
  auto it = m.find(device);
  return Stream(it == m.end() ? nullptr : it->second, device);
}

void set_current_stream(const Stream& s) {
  thread_streams()[s.device()] = s.handle();
}

Stream stream_from_handle(void* handle, int device) {
  return Stream(handle, resolve(device));
}

StreamGuard::StreamGuard(const Stream& s) : prev_stream_(current_stream(s.device())), prev_device_(current_device()) {
  if (s.device() != prev_device_) set_device(s.device());
  set_current_stream(s);
}

StreamGuard::~StreamGuard() {
  set_current_stream(prev_stream_);
  if (current_device() != prev_device_) {
    tl_device = prev_device_;
    if (!detail::recording()) (void)cudaSetDevice(prev_device_);
  }
}

// --- events -----------------------------------------------------------------------------------
Event::Event(bool enable_timing) : timing_(enable_timing) {}

Event::~Event() {
  if (handle_ && !detail::recording() && !(reinterpret_cast<uintptr_t>(handle_) & 1u)) {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
  }
}

Event::Event(Event&& o) noexcept : handle_(o.handle_), device_(o.device_), timing_(o.timing_) {
  o.handle_ = nullptr;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    this->~Event();
    handle_ = o.handle_;
    device_ = o.device_;
    timing_ = o.timing_;
    o.handle_ = nullptr;
  }
  return *this;
}

void Event::create(int device) {
  device_ = device;
  if (detail::recording()) {
    std::lock_guard lk(rec().mu);
    // Odd values mark fake handles (real ones are aligned pointers).
    handle_ = reinterpret_cast<void*>(static_cast<uintptr_t>(2 * rec().next_event++ + 1));
    return;
  }
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  BRISK_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming));
  handle_ = e;
}

namespace {
uint64_t event_id(void* h) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h) >> 1);
}
}  // namespace

void Event::record(const Stream& s) {
  const bool fake = reinterpret_cast<uintptr_t>(handle_) & 1u;
  if (handle_ && fake != detail::recording()) handle_ = nullptr;  // made in the other mode
  if (!handle_) create(s.device());
  BRISK_CHECK(device_ == s.device(), "cuda::Event::record: the event belongs to cuda:", device_,
              " but the stream to cuda:", s.device());
  if (detail::recording()) {
    recording::Entry e;
    e.kind = recording::Kind::EventRecord;
    e.name = "event";
    e.device = s.device();
    e.stream = recording::stream_id(s.handle());
    e.event = event_id(handle_);
    recording::record(std::move(e));
    return;
  }
  DeviceGuard guard(device_);
  BRISK_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(s.handle())));
}

void Event::wait(const Stream& s) const {
  if (!handle_) return;  // never recorded: nothing to wait for
  if (detail::recording()) {
    recording::Entry e;
    e.kind = recording::Kind::EventWait;
    e.name = "event";
    e.device = s.device();
    e.stream = recording::stream_id(s.handle());
    e.event = event_id(handle_);
    recording::record(std::move(e));
    return;
  }
  DeviceGuard guard(s.device());
  BRISK_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle()), static_cast<cudaEvent_t>(handle_), 0));
}

void Event::synchronize() const {
  if (!handle_) return;
  detail::throw_if_capturing("Event::synchronize() waits for the GPU");
  if (detail::recording()) {
    recording::Entry e;
    e.kind = recording::Kind::Sync;
    e.name = "event";
    e.device = device_;
    e.event = event_id(handle_);
    recording::record(std::move(e));
    return;
  }
  BRISK_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
  detail::check_device_errors();
}

bool Event::query() const {
  if (!handle_) return true;
  if (detail::recording()) return !rec().hold_events.load(std::memory_order_relaxed);
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  BRISK_CUDA_CHECK(err);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  BRISK_CHECK(handle_ && end.handle_, "cuda::Event::elapsed_ms: both events must have been recorded");
  BRISK_CHECK(timing_ && end.timing_, "cuda::Event::elapsed_ms: both events need enable_timing = true");
  if (detail::recording()) return 0.0f;
  float ms = 0;
  BRISK_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)));
  return ms;
}

// --- math settings ------------------------------------------------------------------------------
namespace {
std::atomic<bool> g_matmul_tf32{false};
std::atomic<bool> g_cudnn_tf32{true};
std::atomic<bool> g_matmul_reduced_reduction{true};
}  // namespace

void set_matmul_allow_tf32(bool allow) {
  g_matmul_tf32 = allow;
}
bool matmul_allow_tf32() {
  return g_matmul_tf32;
}
void set_matmul_allow_reduced_precision_reduction(bool allow) {
  g_matmul_reduced_reduction = allow;
}
bool matmul_allow_reduced_precision_reduction() {
  return g_matmul_reduced_reduction;
}
void set_cudnn_allow_tf32(bool allow) {
  g_cudnn_tf32 = allow;
}
bool cudnn_allow_tf32() {
  return g_cudnn_tf32;
}

}  // namespace brisk::cuda
