// The CUDA runtime API of a CPU-only build: no devices, streams and events that do nothing,
// zero statistics, plain host memory for "pinned" tensors, and clear errors for device work.
// (A CUDA build compiles kernels/cuda/ instead and this file is empty.)
#ifndef BRISK_WITH_CUDA
#include <atomic>

#include "brisk/kernels/cuda.h"
#include "brisk/kernels/cuda_recording.h"
#include "brisk/util/error.h"

namespace brisk::cuda {

int device_count() {
  return 0;
}
bool is_available() {
  return false;
}
void synchronize(int) {}
int current_device() {
  return 0;
}
void set_device(int device) {
  BRISK_THROW("cuda::set_device(", device, "): this build of brisk has no CUDA support");
}
DeviceGuard::DeviceGuard(int device) {
  set_device(device);
}
DeviceGuard::~DeviceGuard() = default;
DeviceProperties device_properties(int device) {
  BRISK_THROW("cuda::device_properties(", device, "): this build of brisk has no CUDA support");
}
Versions versions() {
  return {};
}

Stream Stream::create(int, bool) {
  BRISK_THROW("cuda::Stream::create: this build of brisk has no CUDA support");
}
Stream Stream::default_stream(int) {
  return Stream();
}
void Stream::synchronize() const {}
bool Stream::query() const {
  return true;
}
Stream current_stream(int) {
  return Stream();
}
void set_current_stream(const Stream&) {}
Stream stream_from_handle(void* handle, int device) {
  return Stream(handle, device);
}
StreamGuard::StreamGuard(const Stream&) {}
StreamGuard::~StreamGuard() = default;

Event::Event(bool enable_timing) : timing_(enable_timing) {}
Event::~Event() = default;
Event::Event(Event&& o) noexcept : handle_(o.handle_), device_(o.device_), timing_(o.timing_) {}
Event& Event::operator=(Event&&) noexcept {
  return *this;
}
void Event::create(int) {}
void Event::record(const Stream&) {
  BRISK_THROW("cuda::Event::record: this build of brisk has no CUDA support");
}
void Event::wait(const Stream&) const {}
void Event::synchronize() const {}
bool Event::query() const {
  return true;
}
float Event::elapsed_ms(const Event&) const {
  BRISK_THROW("cuda::Event::elapsed_ms: this build of brisk has no CUDA support");
}

AllocatorStats allocator_stats(int) {
  return {};
}
void reset_peak_stats(int) {}
void empty_cache() {}
void record_stream(const Tensor&, const Stream&) {
  BRISK_THROW("cuda::record_stream: this build of brisk has no CUDA support");
}

struct Graph::Impl {};
Graph::Graph() = default;
Graph::~Graph() = default;
void Graph::capture(const std::function<void()>&) {
  BRISK_THROW("cuda::Graph::capture: this build of brisk has no CUDA support");
}
void Graph::replay() {
  BRISK_THROW("cuda::Graph::replay: this build of brisk has no CUDA support");
}
bool Graph::captured() const {
  return false;
}
void Graph::reset() {}
bool is_capturing() {
  return false;
}

Tensor empty_pinned(const Shape& sizes, DType dtype) {
  return empty(sizes, dtype, kCPU);
}
Tensor pin_memory(const Tensor& t) {
  BRISK_CHECK(t.defined() && t.device().is_cpu(), "pin_memory: expected a CPU tensor");
  return t;
}

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

namespace checks {
std::vector<uint32_t> philox_on_device(uint64_t, uint64_t, int64_t) {
  BRISK_THROW("cuda::checks::philox_on_device: this build of brisk has no CUDA support");
}
std::vector<uint16_t> to_16bit_on_device(const std::vector<float>&, bool) {
  BRISK_THROW("cuda::checks::to_16bit_on_device: this build of brisk has no CUDA support");
}
}  // namespace checks

namespace recording {
const char* kind_name(Kind) {
  return "?";
}
bool supported() {
  return false;
}
bool active() {
  return false;
}
Session::Session(int) {
  BRISK_THROW("cuda::recording::Session: this build of brisk has no CUDA support");
}
Session::~Session() = default;
std::vector<Entry> Session::entries() const {
  return {};
}
std::vector<Entry> Session::entries(Kind) const {
  return {};
}
size_t Session::count(Kind) const {
  return 0;
}
void Session::clear() {}
void Session::hold_events(bool) {}
void record(Entry) {}  // NOLINT(performance-unnecessary-value-param): the signature of the CUDA build's
uint64_t stream_id(void*) {
  return 0;
}
}  // namespace recording

}  // namespace brisk::cuda
#endif
