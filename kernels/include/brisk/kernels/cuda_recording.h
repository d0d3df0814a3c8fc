// Recording mode: the CUDA layer's host-side logic, run without a GPU. While a
// recording::Session is alive (CUDA builds only), brisk behaves as if `devices` GPUs existed but
// touches no CUDA API: device memory is host memory, and every kernel launch, library call
// (cuBLASLt, cuDNN, NCCL), copy, memset, event record/wait and synchronisation is appended to a
// log with its device and stream instead of running. Results in "device" memory are therefore
// meaningless; what the log shows is which kernels an op dispatches to for a dtype, with which
// launch shapes, on which streams, in which order. Tests use it to check every op's CUDA path
// for every dtype and the ordering of the Reducer's streams and events on a machine without a
// GPU. Not thread-safe against a real GPU in the same process: use it in tests only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brisk::cuda::recording {

enum class Kind : uint8_t {
  Launch,   // a kernel: name, grid and block sizes, dynamic shared memory
  Library,  // a library call (name such as "cublasLtMatmul", "cudnnConvolutionForward")
  Copy,     // cudaMemcpy(Async): name says the direction ("HtoD", "DtoH", "DtoD")
  Memset,
  EventRecord,  // event id recorded on stream
  EventWait,    // stream waits for event id
  Sync,         // host waits: name says for what ("stream", "event", "device")
  Malloc,
  Free,
};
const char* kind_name(Kind k);

struct Entry {
  Kind kind = Kind::Launch;
  std::string name;
  int device = 0;
  uint64_t stream = 0;  // 0: the default stream; other streams are numbered from 1
  uint64_t event = 0;   // for EventRecord / EventWait
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint64_t shared_bytes = 0;
  uint64_t bytes = 0;  // Copy, Memset, Malloc
  // Library: what the call was asked to do beyond its name (cublasLtMatmul: the epilogue, as
  // cublasLt.h names it without its prefix: "DEFAULT", "BIAS", "GELU_AUX_BIAS", "DGELU_BGRAD", ...).
  std::string detail;
};

// True in a CUDA build (recording needs the CUDA layer to exist at all).
bool supported();
// True while a Session is alive.
bool active();

class Session {
 public:
  // Throws brisk::Error in a CPU-only build, or when another session is alive.
  explicit Session(int devices = 1);
  ~Session();  // NOLINT(performance-trivially-destructible): not trivial with CUDA
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::vector<Entry> entries() const;
  // Entries of one kind, and how many launches/library calls there were.
  std::vector<Entry> entries(Kind k) const;
  size_t count(Kind k) const;
  void clear();
  // While held, Event::query() answers "not done yet": the work a recording never runs stays in
  // flight, so what waits for it (a collective's timeout, a peer that left) can be checked.
  void hold_events(bool hold);
};

// Appends an entry while a session is alive (no-op otherwise). Libraries outside kernels/
// (dist's NCCL backend) log their calls through this.
void record(Entry e);
// The stream number recording mode uses for a stream handle (0 for the default stream).
uint64_t stream_id(void* handle);

}  // namespace brisk::cuda::recording
