// Durable file writes: write to a temp file in the same folder, fsync, rename, fsync the folder.
#include "brisk/util/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "brisk/util/error.h"

namespace brisk::io {

namespace {

std::string sys_error(int err) {
  std::string s = std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
  if (err == ENOSPC || err == EFBIG || err == EDQUOT) s += ": the disk is full or a file size limit was reached";
  return s;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Writes all of bytes to fd; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

int fsync_retry(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

// Opens a new, unique temporary file next to `path` (O_EXCL, so a leftover of an earlier crash or a
// concurrent writer is never reused). Returns the descriptor and sets tmp.
int open_temp(const std::string& path, std::string& tmp, const char* who) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0;; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    const int err = errno;
    if ((err == EEXIST || err == EINTR) && attempt < 100) continue;
    BRISK_THROW(who, ": cannot write '", path, "': creating the temporary file '", tmp, "' failed: ", sys_error(err));
  }
}

}  // namespace

void fsync_dir(const std::string& dir, const char* who) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  BRISK_CHECK(fd >= 0, who, ": cannot open the folder '", dir, "' to fsync it: ", sys_error(errno));
  const int err = fsync_retry(fd);
  ::close(fd);
  // Some file systems cannot fsync a folder (EINVAL): nothing more can be done there.
  BRISK_CHECK(err == 0 || err == EINVAL, who, ": fsync of the folder '", dir, "' failed: ", sys_error(err));
}

void write_file_atomic(const std::string& path, std::string_view bytes, const char* who) {
  BRISK_CHECK(!path.empty(), who, ": empty file name");
  std::string tmp;
  const int fd = open_temp(path, tmp, who);
  auto fail = [&](const char* what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    BRISK_THROW(who, ": cannot write '", path, "': ", what, " '", tmp, "' failed: ", sys_error(err),
                "; the previous file is unchanged");
  };
  if (int err = write_all(fd, bytes)) fail("writing", err);
  if (int err = fsync_retry(fd)) fail("fsync of", err);
  if (::close(fd) != 0 && errno != EINTR) {
    const int err = errno;
    ::unlink(tmp.c_str());
    BRISK_THROW(who, ": cannot write '", path, "': closing '", tmp, "' failed: ", sys_error(err),
                "; the previous file is unchanged");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    BRISK_THROW(who, ": cannot replace '", path, "' with '", tmp, "': ", sys_error(err),
                "; the previous file is unchanged");
  }
  fsync_dir(parent_of(path), who);
}

void write_file_synced(const std::string& path, std::string_view bytes, const char* who) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BRISK_CHECK(fd >= 0, who, ": cannot create '", path, "': ", sys_error(errno));
  int err = write_all(fd, bytes);
  const char* what = "writing";
  if (!err) {
    err = fsync_retry(fd);
    what = "fsync of";
  }
  if (::close(fd) != 0 && !err && errno != EINTR) {
    err = errno;
    what = "closing";
  }
  BRISK_CHECK(err == 0, who, ": ", what, " '", path, "' failed: ", sys_error(err));
}

AppendFile::AppendFile(const std::string& path, bool truncate, const char* who) : path_(path), who_(who) {
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  BRISK_CHECK(fd_ >= 0, who, ": cannot open '", path, "' for appending: ", sys_error(errno));
  if (!existed) {
    try {
      fsync_dir(parent_of(path), who);
    } catch (...) {
      ::close(fd_);
      fd_ = -1;
      throw;
    }
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile::AppendFile(AppendFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), who_(std::move(other.who_)) {}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    who_ = std::move(other.who_);
  }
  return *this;
}

void AppendFile::append(std::string_view bytes, bool sync_now) {
  BRISK_CHECK(fd_ >= 0, who_, ": append to '", path_, "' after it was closed");
  if (int err = write_all(fd_, bytes))
    BRISK_THROW(who_, ": appending ", bytes.size(), " bytes to '", path_, "' failed: ", sys_error(err));
  if (sync_now) sync();
}

void AppendFile::sync() {
  BRISK_CHECK(fd_ >= 0, who_, ": fsync of '", path_, "' after it was closed");
  if (int err = fsync_retry(fd_)) BRISK_THROW(who_, ": fsync of '", path_, "' failed: ", sys_error(err));
}

void AppendFile::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && errno != EINTR) BRISK_THROW(who_, ": closing '", path_, "' failed: ", sys_error(errno));
}

}  // namespace brisk::io
