// Internal: the part of save_state that touches the disk (docs/checkpoints.md, "Saving in the
// background"): a rank's files, already copied out of the training state, written, synced and
// hashed, and on the main process the manifest, the atomic publication and total_limit; on a
// background thread (async_save) or at once. It never runs a collective: the main process learns
// that another rank's files are on disk from a small file that rank writes last.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "brisk/core/tensor.h"
#include "checkpoint_format.h"

namespace brisk::accelerate::detail {

// The trace's thread id of the background writer (BRISK_TRACE; tid 0 is the training loop, 1 the
// Reducer's communication thread, 2, 3 ... the profiler's other threads).
inline constexpr int kTraceCheckpointTid = 9;

// One file of a checkpoint (the copy of the state taken by save_state): its bytes, or a
// safetensors file's tensors (host copies) that the job makes into its bytes.
struct SaveFile {
  std::string name;
  std::string bytes;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  bool is_safetensors = false;  // bytes = safetensors_bytes(tensors, metadata), made by the job
};

// Everything a rank's share of a save needs once the state is copied out.
struct SavePlan {
  std::filesystem::path final_dir, parent, tmp;  // the folder to publish, its parent, the temporary folder
  std::vector<SaveFile> files;                   // this rank's files, in the order they are written
  int rank = 0, world_size = 1;
  // Main process: after publishing, remove the oldest checkpoint_<n> under root beyond `total_limit`.
  std::filesystem::path root;
  std::optional<int64_t> total_limit;
};

class SaveJob {
 public:
  // Starts the job: on a background thread, or (background false) writes this rank's files here
  // and leaves the rest to wait_all().
  SaveJob(SavePlan plan, bool background);
  ~SaveJob();  // stops waiting for other ranks, then waits for the thread
  SaveJob(const SaveJob&) = delete;
  SaveJob& operator=(const SaveJob&) = delete;

  // Waits until this rank's own files are written (or failed); rethrows its error.
  void wait_own_files();
  // Main process: stop waiting for the other ranks' files (one of them failed); the job fails.
  void cancel();
  // Waits for the whole job (main process: manifest, publication, total_limit); rethrows its error.
  void wait_all();
  // The folder the job publishes.
  const std::filesystem::path& final_dir() const { return plan_.final_dir; }
  // The name of the file that rank r writes after its own files (never part of the checkpoint).
  static std::string done_file(int rank);

 private:
  void finish_own_files();
  void complete();
  void write_own_files();
  void write_done_file(const std::string& error);
  void collect_other_ranks();
  void write_manifest();
  void publish();
  void remove_beyond_total_limit();
  void discard();

  SavePlan plan_;
  std::map<std::string, ManifestEntry> written_;  // every rank's files, as the manifest lists them
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;  // guards own_done_ and own_error_ (error_ and all_done_ are read after the join)
  std::condition_variable cv_;
  bool own_done_ = false, all_done_ = false;
  std::exception_ptr own_error_, error_;  // this rank's files; the whole job
  std::thread thread_;
};

}  // namespace brisk::accelerate::detail
