// Durable file writes, shared by everything brisk writes to disk (checkpoints, safetensors,
// configs, trackers, traces, reports).
//
//   io::write_file_atomic("run/config.yaml", text, "save_config");
//       // a temp file in the same folder, fsync, rename over the target, fsync the folder:
//       // a reader (or a crash) sees the old file or the whole new one, never half of one.
//   io::AppendFile log("run/metrics.jsonl");
//   log.append(line);   // written at the end and fsynced; the earlier lines are never rewritten
//
// Every failure throws brisk::Error naming the caller (`who`), the path and the system's reason
// (strerror), and leaves the previous file as it was and no temporary file behind.
#pragma once
#include <string>
#include <string_view>

namespace brisk::io {

// Replaces `path` with `bytes` atomically and durably (see above). The folder must exist.
void write_file_atomic(const std::string& path, std::string_view bytes, const char* who = "write_file_atomic");

// Writes `bytes` to `path` (created or truncated) and fsyncs it, without the rename: for files of a
// folder that is itself published by a rename later (a checkpoint being assembled).
void write_file_synced(const std::string& path, std::string_view bytes, const char* who = "write_file_synced");

// fsyncs a folder so that the entries created, renamed or removed in it survive a crash.
void fsync_dir(const std::string& dir, const char* who = "fsync_dir");

// A file opened for appending: each append() writes all its bytes at the end (retrying short writes
// and interrupted calls) and, with `sync`, fsyncs them, so a crash loses at most the append in progress.
class AppendFile {
 public:
  AppendFile() = default;
  // Opens (creating it, 0644 before the umask, if missing) `path` for appending; `truncate` empties it
  // first. A new file's folder entry is fsynced too.
  explicit AppendFile(const std::string& path, bool truncate = false, const char* who = "AppendFile");
  ~AppendFile();
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  void append(std::string_view bytes, bool sync = true);
  void sync();
  // Closes the file (also done by the destructor, which cannot report a failure: call close() to see one).
  void close();

 private:
  int fd_ = -1;
  std::string path_;
  std::string who_;
};

}  // namespace brisk::io
