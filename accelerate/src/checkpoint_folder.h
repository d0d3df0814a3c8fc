// Internal: a checkpoint folder opened for reading (docs/checkpoints.md, "What a checkpoint folder
// is trusted with: nothing"). It trusts nothing but the folder's own path: the manifest must be a
// plain regular file in the folder, in the exact form save_state writes, with a matching checksum;
// after that only the files it lists (plain names, regular files, not symbolic links) are opened,
// each read is bounded by the listed size and its bytes are checked against the listed SHA-256
// before they are used.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "brisk/util/error.h"
#include "checkpoint_format.h"

namespace brisk::accelerate::detail {

class CheckpointFolder {
 public:
  using Entry = ManifestEntry;

  // Opens `dir` and reads and checks its manifest; errors start with `prefix`.
  CheckpointFolder(const std::filesystem::path& dir, std::string prefix);
  ~CheckpointFolder() = default;
  CheckpointFolder(const CheckpointFolder&) = delete;
  CheckpointFolder& operator=(const CheckpointFolder&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const std::map<std::string, Entry>& files() const { return files_; }
  bool lists(const std::string& name) const { return files_.count(name) != 0; }

  // The bytes of listed file `name`, checked against the manifest; `max_bytes` bounds what the
  // caller accepts (-1: the listed size is the bound).
  std::string read(const std::string& name, int64_t max_bytes = -1) const;
  // Checks that listed file `name` is there, a regular file of the listed size, without reading it.
  void check_present(const std::string& name) const;
  // Checks listed file `name` (type, size, SHA-256) without keeping its bytes.
  void verify(const std::string& name) const;

  template <class... A>
  [[noreturn]] void fail(const A&... a) const {
    BRISK_THROW(prefix_, a...);
  }

 private:
  const Entry& entry(const std::string& name) const;
  // Opens `name` in the folder: a regular file, not a symbolic link, FIFO, device or folder.
  int open_regular(const std::string& name, struct stat* st) const;
  // Reads exactly the listed size through `chunk(fd, max)` (a read(2) that returns what it got),
  // checking the size before and that the file ends there.
  void read_listed(const std::string& name, const Entry& e, const std::function<void()>& sized,
                   const std::function<ssize_t(int, size_t)>& chunk) const;
  // The manifest itself (not listed in itself): a regular file of at most kMaxJsonBytes.
  std::string read_unlisted(const std::string& name) const;

  std::filesystem::path dir_;
  std::string prefix_;
  // The folder, closed also when the constructor throws (a member's destructor runs then; the
  // class's own does not).
  struct Fd {
    int fd = -1;
    ~Fd();
  } fd_;
  std::map<std::string, Entry> files_;
};

}  // namespace brisk::accelerate::detail
