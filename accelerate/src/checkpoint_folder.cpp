// A checkpoint folder opened for reading: the manifest checked in full, then bounded, hashed reads
// of the files it lists (checkpoint_folder.h says what is trusted).
#include "checkpoint_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "sha256.h"

namespace brisk::accelerate::detail {

namespace fs = std::filesystem;

CheckpointFolder::CheckpointFolder(const fs::path& dir, std::string prefix) : dir_(dir), prefix_(std::move(prefix)) {
  fd_.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_.fd < 0) fail("cannot open the folder: ", std::strerror(errno));
  const std::string raw = read_unlisted(kManifest);
  json::Value m;
  try {
    m = json::parse(raw);
  } catch (const Error& e) {
    fail(kManifest, " is not valid JSON: ", e.message());
  }
  if (!m.is_object()) fail(kManifest, " is not a JSON object");
  for (const auto& [k, v] : m.items())
    if (k != "format" && k != "version" && k != "files" && k != "manifest_sha256")
      fail(kManifest, " has an unknown key ", quoted(k));
  const json::Value* format = m.find("format");
  const json::Value* version = m.find("version");
  const json::Value* files = m.find("files");
  const json::Value* sum = m.find("manifest_sha256");
  if (!format || !version || !files || !sum) fail(kManifest, " lacks format, version, files or manifest_sha256");
  if (!format->is_string() || format->as_string() != kManifestFormat)
    fail(kManifest, ": format is not \"", kManifestFormat, "\"");
  if (!version->is_integer() || version->as_int() != kManifestVersion)
    fail(kManifest, ": version must be ", kManifestVersion, ", got ", version->dump());
  if (!sum->is_string() || !is_lower_hex64(sum->as_string()))
    fail(kManifest, ": manifest_sha256 is not 64 lowercase hexadecimal digits");
  // Only the exact bytes save_state writes: no whitespace or escapes that mean the same.
  if (m.dump(2) + "\n" != raw) fail(kManifest, " is not in the form save_state writes (edited or damaged)");
  if (manifest_checksum(m) != sum->as_string()) fail(kManifest, "'s own checksum does not match its contents");
  if (!files->is_array()) fail(kManifest, ": files is not an array");
  for (size_t i = 0; i < files->size(); ++i) {
    const json::Value& f = files->at(i);
    const std::string at = std::string(kManifest) + ": files[" + std::to_string(i) + "]";
    if (!f.is_object() || f.size() != 3 || !f.contains("path") || !f.contains("size") || !f.contains("sha256"))
      fail(at, " must be an object with exactly path, size and sha256");
    const json::Value& path = f.at("path");
    const json::Value& size = f.at("size");
    const json::Value& sha = f.at("sha256");
    if (!path.is_string()) fail(at, ".path is not a string");
    const std::string& name = path.as_string();
    if (std::string why = bad_name(name); !why.empty())
      fail(at, ".path ", quoted(name), " ", why, " (a checkpoint lists only plain files of its own folder)");
    if (name == kManifest) fail(at, " lists ", kManifest, " itself");
    if (!size.is_integer() || size.as_double() < 0 || size.as_double() > static_cast<double>(kMaxFileBytes))
      fail(at, ".size of ", quoted(name), " must be an integer from 0 to 2^50, got ", size.dump());
    if (!sha.is_string() || !is_lower_hex64(sha.as_string()))
      fail(at, ".sha256 of ", quoted(name), " is not 64 lowercase hexadecimal digits");
    if (!files_.emplace(name, Entry{size.as_int(), sha.as_string()}).second)
      fail(at, " lists ", quoted(name), " a second time");
  }
}
std::string CheckpointFolder::read(const std::string& name, int64_t max_bytes) const {
  const Entry& e = entry(name);
  if (max_bytes >= 0 && e.size > max_bytes) fail(name, " is listed with ", e.size, " bytes, more than ", max_bytes);
  std::string bytes;
  Sha256 h;
  size_t done = 0;
  // Memory is taken only once the file is known to have the listed size.
  auto allocate = [&] {
    try {
      bytes.resize(static_cast<size_t>(e.size));
    } catch (const std::bad_alloc&) {
      fail("cannot allocate ", e.size, " bytes to read ", name);
    }
  };
  read_listed(name, e, allocate, [&](int fd, size_t want) {
    const ssize_t n = ::read(fd, bytes.data() + done, want);
    if (n > 0) {
      h.update(bytes.data() + done, static_cast<size_t>(n));
      done += static_cast<size_t>(n);
    }
    return n;
  });
  if (h.hex() != e.sha256) fail(name, "'s SHA-256 does not match the manifest");
  return bytes;
}

void CheckpointFolder::check_present(const std::string& name) const {
  const Entry& e = entry(name);
  struct stat st {};
  const int fd = open_regular(name, &st);
  ::close(fd);
  if (st.st_size != e.size) fail(name, " has ", static_cast<int64_t>(st.st_size), " bytes, the manifest says ", e.size);
}

void CheckpointFolder::verify(const std::string& name) const {
  const Entry& e = entry(name);
  Sha256 h;
  std::vector<char> buf(static_cast<size_t>(std::clamp<int64_t>(e.size, 1, int64_t{1} << 20)));
  read_listed(
      name, e, [] {},
      [&](int fd, size_t want) {
        const ssize_t n = ::read(fd, buf.data(), std::min(want, buf.size()));
        if (n > 0) h.update(buf.data(), static_cast<size_t>(n));
        return n;
      });
  if (h.hex() != e.sha256) fail(name, "'s SHA-256 does not match the manifest");
}

const CheckpointFolder::Entry& CheckpointFolder::entry(const std::string& name) const {
  auto it = files_.find(name);
  if (it == files_.end()) {
    if (std::string why = bad_name(name); !why.empty()) fail(quoted(name), " ", why);
    fail(quoted(name), " is not listed in ", kManifest, " (only listed files are read)");
  }
  return it->second;
}

int CheckpointFolder::open_regular(const std::string& name, struct stat* st) const {
  struct stat ls {};
  if (::fstatat(fd_.fd, name.c_str(), &ls, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) fail(name, " is missing");
    fail("cannot stat ", name, ": ", std::strerror(errno));
  }
  if (S_ISLNK(ls.st_mode)) fail(name, " is a symbolic link (a checkpoint holds only regular files)");
  if (!S_ISREG(ls.st_mode))
    fail(name, " is not a regular file (",
         S_ISFIFO(ls.st_mode)                         ? "a named pipe"
         : S_ISDIR(ls.st_mode)                        ? "a folder"
         : S_ISCHR(ls.st_mode) || S_ISBLK(ls.st_mode) ? "a device"
                                                      : "a socket or other special file",
         ")");
  // O_NOFOLLOW and O_NONBLOCK: a file swapped for a link or a pipe in between is not followed
  // and does not block; fstat then checks what was really opened.
  const int fd = ::openat(fd_.fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail("cannot open ", name, ": ", std::strerror(errno));
  if (::fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    ::close(fd);
    fail(name, " is not a regular file");
  }
  return fd;
}

void CheckpointFolder::read_listed(const std::string& name, const Entry& e, const std::function<void()>& sized,
                                   const std::function<ssize_t(int, size_t)>& chunk) const {
  struct stat st {};
  const int fd = open_regular(name, &st);
  if (st.st_size != e.size) {
    ::close(fd);
    fail(name, " has ", static_cast<int64_t>(st.st_size), " bytes, the manifest says ", e.size);
  }
  try {
    sized();
  } catch (...) {
    ::close(fd);
    throw;
  }
  int64_t done = 0;
  while (done < e.size) {
    const ssize_t n = chunk(fd, static_cast<size_t>(std::min<int64_t>(e.size - done, int64_t{1} << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      if (n == 0) fail(name, " ended after ", done, " of the ", e.size, " bytes the manifest lists");
      fail("reading ", name, " failed: ", std::strerror(err));
    }
    done += n;
  }
  char extra;
  const ssize_t more = ::read(fd, &extra, 1);
  ::close(fd);
  if (more != 0) fail(name, " is longer than the ", e.size, " bytes the manifest lists");
}

std::string CheckpointFolder::read_unlisted(const std::string& name) const {
  struct stat ls {};
  if (::fstatat(fd_.fd, name.c_str(), &ls, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT)
    fail("no ", name, " (an unfinished save?)");
  struct stat st {};
  const int fd = open_regular(name, &st);
  if (st.st_size > kMaxJsonBytes) {
    ::close(fd);
    fail(name, " has ", static_cast<int64_t>(st.st_size), " bytes, more than the ", kMaxJsonBytes, " allowed");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("reading ", name, " failed");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

CheckpointFolder::Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

}  // namespace brisk::accelerate::detail
