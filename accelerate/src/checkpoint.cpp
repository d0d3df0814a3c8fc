// Checkpoints (docs/checkpoints.md): save_state / load_state with a checksummed manifest written
// last, atomic publication by swapping in a finished temporary folder, per-rank files for what
// differs between ranks, automatic naming and total_limit; save_model (sharded safetensors +
// Hugging Face index) and save. Loading trusts nothing in the folder: only plain regular files
// that the manifest lists are opened, each read is bounded by its listed size and checked
// against its SHA-256, and every value read is checked before anything is changed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <set>

#include "accelerator_impl.h"
#include "brisk/autograd/grad_mode.h"
#include "brisk/core/rng.h"
#include "brisk/data/safetensors.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/fs.h"
#include "brisk/util/trace.h"
#include "sha256.h"

namespace brisk {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kState = "state.json";
constexpr const char* kFormat = "brisk-checkpoint";
constexpr const char* kManifestFormat = "brisk-checkpoint-manifest";
// state.json's version. 2: what differs between ranks (random state, data loader positions,
// unsynchronised gradients) is in per-rank files; version 1 kept the main process's gradients only.
// 3: under zero3 each rank writes its shard of the parameters (the model file holds the rest);
// version 2's zero3 model file held the full parameters, and is still read.
constexpr int kVersion = 3;
constexpr int kOldestVersion = 2;
constexpr int kManifestVersion = 1;
// The JSON files of a checkpoint are small (kilobytes; a manifest ~150 bytes per file): anything
// bigger than 16 MiB is refused before it is read (a parsed JSON value takes many times its text).
constexpr int64_t kMaxJsonBytes = int64_t{16} << 20;
// The largest file size a manifest may list (1 PiB).
constexpr int64_t kMaxFileBytes = int64_t{1} << 50;
// Step counts, epochs, positions: integers that a double holds exactly.
constexpr int64_t kMaxCount = int64_t{1} << 53;

// Test hook: BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES=k makes this process SIGKILL itself after
// writing k checkpoint files, as a crash half-way through a save would.
int files_written = 0;
void count_file_written() {
  ++files_written;
  if (const char* v = std::getenv("BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES"); v && std::atoi(v) == files_written)
    std::raise(SIGKILL);
}

void fsync_path(const fs::path& p, bool directory) {
  if (directory) io::fsync_dir(p.string(), "Accelerator::save_state");
}

// Writes bytes to path and fsyncs it (the folder it is in is published by a rename later).
void write_synced(const fs::path& path, const std::string& bytes) {
  io::write_file_synced(path.string(), bytes, "Accelerator::save_state");
  count_file_written();
}

// A temp file beside it, fsync, rename, fsync the folder (a reader sees the old file or the whole new one).
void write_atomic(const fs::path& path, const std::string& bytes) {
  io::write_file_atomic(path.string(), bytes, "Accelerator::save_state");
  count_file_written();
}

json::Value scalars_json(const std::map<std::string, double>& m) {
  json::Value o = json::Value::object();
  for (const auto& [k, v] : m) o.set(k, v);
  return o;
}

// The manifest's own checksum: SHA-256 of its compact JSON without the checksum field.
std::string manifest_checksum(const json::Value& manifest) {
  json::Value body = json::Value::object();
  for (const auto& [k, v] : manifest.items())
    if (k != "manifest_sha256") body.set(k, v);
  return accelerate::sha256_hex(body.dump());
}

// checkpoint_<n> folders under root, by n.
std::vector<std::pair<int64_t, fs::path>> numbered_checkpoints(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "checkpoint_";
    if (!e.is_directory() || name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 15)
      continue;
    out.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string model_file(size_t i) {
  return i == 0 ? "model.safetensors" : "model_" + std::to_string(i) + ".safetensors";
}
std::string gradients_file(size_t i, int rank) {
  return (i == 0 ? std::string("gradients") : "gradients_" + std::to_string(i)) + "_rank" + std::to_string(rank) +
         ".safetensors";
}
std::string optimizer_file(size_t i) {
  return i == 0 ? "optimizer.safetensors" : "optimizer_" + std::to_string(i) + ".safetensors";
}
// Sharded optimizers (docs/sharding.md): each rank writes its own shard of the state.
std::string optimizer_shard_file(size_t i, int rank) {
  return (i == 0 ? std::string("optimizer") : "optimizer_" + std::to_string(i)) + "_shard" + std::to_string(rank) +
         ".safetensors";
}
std::string rank_file(int rank) {
  return "rank_" + std::to_string(rank) + ".json";
}

bool is_lower_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Why `name` is not a plain file name inside the checkpoint folder ("" when it is one): letters,
// digits, '_', '-' and '.', not starting with '.', so no '/', no "..", no absolute path.
std::string bad_name(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > 255) return "is longer than 255 bytes";
  if (name[0] == '/') return "is an absolute path";
  if (name == ".." || name.rfind("../", 0) == 0 || name.find("/..") != std::string::npos)
    return "leads out of the folder ('..')";
  if (name.find('/') != std::string::npos) return "is a path ('/'), not a file name inside the folder";
  if (name[0] == '.') return "starts with '.'";
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
          c == '.'))
      return "has a character other than letters, digits, '_', '-' and '.'";
  return "";
}

std::string quoted(const std::string& s) {
  std::string out;
  json::write_string(out, s);
  return out;
}

// A checkpoint folder opened for reading. It trusts nothing but the folder's own path: the
// manifest must be a plain regular file in the folder, in the exact form save_state writes, with
// a matching checksum; after that only the files it lists (plain names, regular files, not
// symbolic links) are opened, each read is bounded by the listed size and its bytes are checked
// against the listed SHA-256 before they are used. Errors start with `prefix`.
class CheckpointFolder {
 public:
  struct Entry {
    int64_t size = 0;
    std::string sha256;
  };

  CheckpointFolder(const fs::path& dir, std::string prefix) : dir_(dir), prefix_(std::move(prefix)) {
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
  ~CheckpointFolder() = default;
  CheckpointFolder(const CheckpointFolder&) = delete;
  CheckpointFolder& operator=(const CheckpointFolder&) = delete;

  const fs::path& dir() const { return dir_; }
  const std::map<std::string, Entry>& files() const { return files_; }
  bool lists(const std::string& name) const { return files_.count(name) != 0; }

  // The bytes of listed file `name`, checked against the manifest; `max_bytes` bounds what the
  // caller accepts (-1: the listed size is the bound).
  std::string read(const std::string& name, int64_t max_bytes = -1) const {
    const Entry& e = entry(name);
    if (max_bytes >= 0 && e.size > max_bytes) fail(name, " is listed with ", e.size, " bytes, more than ", max_bytes);
    std::string bytes;
    accelerate::detail::Sha256 h;
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

  // Checks that listed file `name` is there, a regular file of the listed size, without reading it.
  void check_present(const std::string& name) const {
    const Entry& e = entry(name);
    struct stat st {};
    const int fd = open_regular(name, &st);
    ::close(fd);
    if (st.st_size != e.size)
      fail(name, " has ", static_cast<int64_t>(st.st_size), " bytes, the manifest says ", e.size);
  }

  // Checks listed file `name` (type, size, SHA-256) without keeping its bytes.
  void verify(const std::string& name) const {
    const Entry& e = entry(name);
    accelerate::detail::Sha256 h;
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

  template <class... A>
  [[noreturn]] void fail(const A&... a) const {
    BRISK_THROW(prefix_, a...);
  }

 private:
  const Entry& entry(const std::string& name) const {
    auto it = files_.find(name);
    if (it == files_.end()) {
      if (std::string why = bad_name(name); !why.empty()) fail(quoted(name), " ", why);
      fail(quoted(name), " is not listed in ", kManifest, " (only listed files are read)");
    }
    return it->second;
  }

  // Opens `name` in the folder: a regular file, not a symbolic link, FIFO, device or folder.
  int open_regular(const std::string& name, struct stat* st) const {
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

  // Reads exactly the listed size through `chunk(fd, max)` (a read(2) that returns what it got),
  // checking the size before and that the file ends there.
  void read_listed(const std::string& name, const Entry& e, const std::function<void()>& sized,
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

  // The manifest itself (not listed in itself): a regular file of at most kMaxJsonBytes.
  std::string read_unlisted(const std::string& name) const {
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

  fs::path dir_;
  std::string prefix_;
  // The folder, closed also when the constructor throws (a member's destructor runs then; the
  // class's own does not).
  struct Fd {
    int fd = -1;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } fd_;
  std::map<std::string, Entry> files_;
};

// Checked reading of a JSON document of the checkpoint: every value's type and range, with
// errors naming the file and the key ("optimizers[0].scalars.steps_taken").
class Fields {
 public:
  explicit Fields(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  template <class... A>
  [[noreturn]] void fail(const std::string& key, const A&... a) const {
    BRISK_THROW("Accelerator::load_state: ", file_, ": ", key.empty() ? std::string("the document") : key, ": ", a...);
  }
  const json::Value& object(const json::Value& v, const std::string& key) const {
    if (!v.is_object()) fail(key, "expected an object, got ", json::type_name(v.type()));
    return v;
  }
  const json::Value& member(const json::Value& o, const std::string& key, const std::string& name) const {
    object(o, key);
    const json::Value* v = o.find(name);
    if (!v) fail(join(key, name), "missing");
    return *v;
  }
  const json::Value::Array& array(const json::Value& v, const std::string& key, size_t expected,
                                  const char* what) const {
    if (!v.is_array()) fail(key, "expected an array, got ", json::type_name(v.type()));
    if (v.size() != expected)
      fail(key, "the checkpoint has ", v.size(), " ", what, " but ", expected,
           " were prepared (prepare the same objects, in the same order, before load_state)");
    return v.as_array();
  }
  const std::string& string(const json::Value& v, const std::string& key) const {
    if (!v.is_string()) fail(key, "expected a string, got ", json::type_name(v.type()));
    return v.as_string();
  }
  bool boolean(const json::Value& v, const std::string& key) const {
    if (!v.is_bool()) fail(key, "expected true or false, got ", json::type_name(v.type()));
    return v.as_bool();
  }
  // An integer in [lo, hi]: a JSON integer, or a number with an integral value (scalars are doubles).
  int64_t integer(const json::Value& v, const std::string& key, int64_t lo, int64_t hi) const {
    if (!v.is_number()) fail(key, "expected an integer, got ", json::type_name(v.type()));
    const double d = v.as_double();
    if (!std::isfinite(d) || d != std::floor(d))
      fail(key, "expected an integer from ", lo, " to ", hi, ", got ", v.dump());
    if (v.is_integer() && d >= -9.2e18 && d <= 9.2e18) {
      const int64_t i = v.as_int();
      if (i < lo || i > hi) fail(key, "expected an integer from ", lo, " to ", hi, ", got ", i);
      return i;
    }
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail(key, "expected an integer from ", lo, " to ", hi, ", got ", v.dump());
    return static_cast<int64_t>(d);
  }
  uint64_t uinteger(const json::Value& v, const std::string& key) const {
    if (!v.is_integer() || v.as_double() < 0)
      fail(key, "expected an integer from 0 to 2^64-1, got ", v.is_number() ? v.dump() : json::type_name(v.type()));
    return v.as_uint();
  }
  // A finite number in [lo, hi] (or (lo, hi] when lo_open).
  double number(const json::Value& v, const std::string& key, double lo, double hi, bool lo_open = false) const {
    if (!v.is_number()) fail(key, "expected a number, got ", json::type_name(v.type()));
    const double d = v.as_double();
    if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
      fail(key, "expected a finite number in ", lo_open ? "(" : "[", lo, ", ", hi, "], got ", v.dump());
    return d;
  }
  static std::string join(const std::string& key, const std::string& name) {
    return key.empty() ? name : key + "." + name;
  }
  static std::string index(const std::string& key, size_t i) { return key + "[" + std::to_string(i) + "]"; }

 private:
  std::string file_;
};

// The scalars of a state dict, checked key for key against `current` (the prepared object's own
// state_dict): the same keys, each a finite number, checked further by `check(key, value)`.
std::map<std::string, double> checked_scalars(
    const Fields& f, const json::Value& v, const std::string& key, const std::map<std::string, double>& current,
    const std::function<double(const std::string&, const json::Value&, const std::string&)>& check) {
  f.object(v, key);
  std::map<std::string, double> out;
  for (const auto& [k, value] : v.items()) {
    if (!current.count(k)) f.fail(Fields::join(key, k), "not a key of the prepared object's state");
    out[k] = check(k, value, Fields::join(key, k));
  }
  for (const auto& [k, value] : current)
    if (!out.count(k)) f.fail(Fields::join(key, k), "missing");
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// An optimizer's scalars: counts are integers in [0, 2^53], num_params equals the prepared
// group's, learning rates and the like are finite and non-negative, betas in [0, 1), flags 0 or 1.
double optimizer_scalar(const Fields& f, const std::string& k, const json::Value& x, const std::string& at);

std::map<std::string, double> optimizer_scalars(const Fields& f, const json::Value& v, const std::string& key,
                                                const optim::Optimizer& opt) {
  const std::map<std::string, double> current = opt.state_dict().scalars;
  return checked_scalars(f, v, key, current, [&](const std::string& k, const json::Value& x, const std::string& at) {
    if (ends_with(k, ".num_params")) {
      const auto want = static_cast<int64_t>(current.at(k));
      const int64_t got = f.integer(x, at, 0, kMaxCount);
      if (got != want) f.fail(at, "the checkpoint's group has ", got, " parameters, the prepared one ", want);
      return static_cast<double>(got);
    }
    return optimizer_scalar(f, k, x, at);
  });
}

// One scalar of an optimizer's state dict other than num_params, checked by its kind.
double optimizer_scalar(const Fields& f, const std::string& k, const json::Value& x, const std::string& at) {
  {
    if (k == "steps_taken" || (k.rfind("state.", 0) == 0 && ends_with(k, ".step")))
      return static_cast<double>(f.integer(x, at, 0, kMaxCount));
    const std::string hyper = k.substr(k.rfind('.') + 1);
    if (hyper == "beta1" || hyper == "beta2") {
      const double b = f.number(x, at, 0, 1);
      if (b >= 1) f.fail(at, "expected a number in [0, 1), got ", x.dump());
      return b;
    }
    if (hyper == "amsgrad" || hyper == "maximize" || hyper == "nesterov") {
      const double b = f.number(x, at, 0, 1);
      if (b != 0 && b != 1) f.fail(at, "expected 0 or 1, got ", x.dump());
      return b;
    }
    if (hyper == "lr" || hyper == "eps" || hyper == "weight_decay" || hyper == "momentum" || hyper == "dampening")
      return f.number(x, at, 0, HUGE_VAL);
    return f.number(x, at, -HUGE_VAL, HUGE_VAL);
  }
}

// A file name read from a state file: a plain name that the manifest lists (else an error naming
// the state file and the key).
const std::string& listed_name(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                               const std::string& key) {
  if (std::string why = bad_name(name); !why.empty())
    f.fail(key, quoted(name), " ", why, " (a checkpoint reads only plain files of its own folder)");
  if (!folder.lists(name)) f.fail(key, quoted(name), " is not listed in ", kManifest, " (only listed files are read)");
  return name;
}

// The tensors of a safetensors file from the checkpoint, checked against what they are loaded
// into: every name known, the same shape and dtype.
data::NamedTensors checked_tensors(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                                   const std::string& key, const std::map<std::string, Tensor>& targets,
                                   const char* what) {
  listed_name(f, folder, name, key);
  data::SafetensorsFile sf;
  {
    const std::string bytes = folder.read(name);
    try {
      sf = data::parse_safetensors(bytes, (folder.dir() / name).string());
    } catch (const Error& e) {
      f.fail(key, e.message());
    }
  }
  for (const auto& [tname, t] : sf.tensors) {
    auto it = targets.find(tname);
    if (it == targets.end()) f.fail(key, name, " has a tensor ", quoted(tname), " that is not a ", what);
    if (t.sizes() != it->second.sizes() || t.dtype() != it->second.dtype())
      f.fail(key, name, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but the ", what, " is ",
             dtype_name(it->second.dtype()), " ", it->second.sizes());
  }
  return std::move(sf.tensors);
}

using accelerate::detail::ZeroLayout;

// A sharded optimizer's layout as state.json records it: {"num_processes": N, "group_params":
// [...], "buckets": [{"group": g, "padded": n, "params": [[index, numel], ...]}, ...]}.
json::Value layout_json(const ZeroLayout& l) {
  json::Value o = json::Value::object();
  o.set("num_processes", l.num_processes);
  json::Value gp = json::Value::array();
  for (size_t n : l.group_params) gp.push_back(static_cast<int64_t>(n));
  o.set("group_params", gp);
  json::Value bs = json::Value::array();
  for (const ZeroLayout::Bucket& b : l.buckets) {
    json::Value jb = json::Value::object();
    jb.set("group", static_cast<int64_t>(b.group));
    jb.set("padded", b.padded);
    json::Value ms = json::Value::array();
    for (const ZeroLayout::Member& m : b.members) {
      json::Value pair = json::Value::array();
      pair.push_back(static_cast<int64_t>(m.param));
      pair.push_back(m.numel);
      ms.push_back(pair);
    }
    jb.set("params", ms);
    bs.push_back(jb);
  }
  o.set("buckets", bs);
  return o;
}

// The layout read back, checked against the parameters it must cover (`numels`, the prepared
// optimizer's parameters in registration order, split into groups of `group_sizes`): every
// parameter exactly once, in its own group, with its size; padding below num_processes per bucket.
ZeroLayout parse_layout(const Fields& f, const json::Value& v, const std::string& key, int64_t saved_world,
                        const std::vector<int64_t>& numels, const std::vector<size_t>& group_sizes) {
  ZeroLayout l;
  l.num_processes = static_cast<int>(f.integer(f.member(v, key, "num_processes"), key + ".num_processes", 1, 1 << 20));
  if (l.num_processes != saved_world)
    f.fail(key + ".num_processes", "is ", l.num_processes, " but the checkpoint was saved by ", saved_world,
           " processes");
  const auto& gp =
      f.array(f.member(v, key, "group_params"), key + ".group_params", group_sizes.size(), "parameter group(s)");
  std::vector<size_t> first(group_sizes.size() + 1, 0);
  for (size_t g = 0; g < gp.size(); ++g) {
    const auto n = static_cast<size_t>(f.integer(gp[g], Fields::index(key + ".group_params", g), 0, kMaxCount));
    if (n != group_sizes[g])
      f.fail(Fields::index(key + ".group_params", g), "the checkpoint's group has ", n,
             " parameters, the prepared one ", group_sizes[g]);
    l.group_params.push_back(n);
    first[g + 1] = first[g] + n;
  }
  const json::Value& bs = f.member(v, key, "buckets");
  if (!bs.is_array()) f.fail(key + ".buckets", "expected an array");
  std::vector<char> seen(numels.size(), 0);
  for (size_t k = 0; k < bs.size(); ++k) {
    const std::string at = Fields::index(key + ".buckets", k);
    ZeroLayout::Bucket b;
    b.group = static_cast<size_t>(
        f.integer(f.member(bs.at(k), at, "group"), at + ".group", 0, static_cast<int64_t>(group_sizes.size()) - 1));
    b.padded = f.integer(f.member(bs.at(k), at, "padded"), at + ".padded", 0, kMaxCount);
    const json::Value& ms = f.member(bs.at(k), at, "params");
    if (!ms.is_array() || ms.size() == 0) f.fail(at + ".params", "expected a non-empty array");
    int64_t numel = 0;
    for (size_t j = 0; j < ms.size(); ++j) {
      const std::string mat = Fields::index(at + ".params", j);
      const json::Value& pair = ms.at(j);
      if (!pair.is_array() || pair.size() != 2) f.fail(mat, "expected [parameter index, numel]");
      const auto i = static_cast<size_t>(f.integer(pair.at(0), mat + "[0]", static_cast<int64_t>(first[b.group]),
                                                   static_cast<int64_t>(first[b.group + 1]) - 1));
      const int64_t n = f.integer(pair.at(1), mat + "[1]", 0, kMaxCount);
      if (n != numels[i])
        f.fail(mat + "[1]", "parameter ", i, " has ", n, " elements in the checkpoint, ", numels[i],
               " in the prepared model");
      if (seen[i]++) f.fail(mat, "parameter ", i, " is listed a second time");
      numel += n;
      b.members.push_back({i, n});
    }
    if (b.padded % l.num_processes != 0 || b.padded < numel || b.padded - numel >= l.num_processes)
      f.fail(at + ".padded", "expected ", numel, " rounded up to a multiple of ", l.num_processes, ", got ", b.padded);
    l.buckets.push_back(std::move(b));
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) f.fail(key + ".buckets", "parameter ", i, " is in no bucket");
  return l;
}

// "state.<i>.<kind>" -> i (and kind); -1 when the name has another form.
int64_t state_slot(const std::string& tname, std::string* kind) {
  const size_t dot = tname.find('.', 6);
  if (tname.rfind("state.", 0) != 0 || dot == std::string::npos || dot == 6 || dot - 6 > 12 ||
      dot + 1 >= tname.size() ||
      !std::all_of(tname.begin() + 6, tname.begin() + static_cast<std::ptrdiff_t>(dot),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  if (kind) *kind = tname.substr(dot + 1);
  return std::stoll(tname.substr(6, dot - 6));
}

// An optimizer's state saved in another layout than this job's (another number of processes, or
// sharded where this job is not, or the other way round): gathered parameter by parameter from
// the saved layout (the whole state, or every rank's shard with its padding) and sliced for this
// job's (docs/checkpoints.md). `zero` is this job's sharding engine for the optimizer, if any.
optim::StateDict reshard_optimizer(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                                   const std::string& key, const optim::Optimizer& opt,
                                   const accelerate::detail::ZeroEngine* zero, int64_t saved_world, int rank) {
  // The prepared parameters (the model's, not a sharded optimizer's shards) and their groups.
  std::vector<Tensor> params;
  std::vector<size_t> group_sizes;
  std::optional<ZeroLayout> mine;
  if (zero) {
    params = zero->params();
    mine = zero->layout();
    group_sizes = mine->group_params;
  } else {
    for (size_t g = 0; g < opt.num_groups(); ++g) {
      for (const Tensor& p : opt.params(g)) params.push_back(p);
      group_sizes.push_back(opt.params(g).size());
    }
  }
  const size_t G = group_sizes.size();
  std::vector<size_t> group_of, first(G + 1, 0);
  for (size_t g = 0; g < G; ++g) {
    first[g + 1] = first[g] + group_sizes[g];
    group_of.insert(group_of.end(), group_sizes[g], g);
  }
  std::vector<int64_t> numels;
  numels.reserve(params.size());
  for (const Tensor& p : params) numels.push_back(p.numel());
  const json::Value* shards = entry.find("shards");
  const bool sharded = shards && !shards->is_null();
  const size_t slots = sharded ? G : params.size();  // the saved state's "state.<i>" entries

  // Scalars: this job's hyper-parameter keys, the saved steps, nothing else.
  const std::string skey = key + ".scalars";
  const json::Value& saved = f.object(f.member(entry, key, "scalars"), skey);
  const std::map<std::string, double> current = opt.state_dict().scalars;
  optim::StateDict sd;
  for (const auto& [k, x] : saved.items()) {
    const std::string at = Fields::join(skey, k);
    std::string kind;
    const int64_t slot = state_slot(k, &kind);
    if (slot >= 0) {
      if (static_cast<size_t>(slot) >= slots || kind != "step")
        f.fail(at, "not a key of the saved state (", slots, " ", sharded ? "shard(s)" : "parameter(s)", ")");
      continue;
    }
    if (k == "steps_taken") continue;
    if (ends_with(k, ".num_params")) {
      bool known = false;
      for (size_t g = 0; g < G; ++g)
        if (k == "param_groups." + std::to_string(g) + ".num_params") {
          known = true;
          const int64_t want = sharded ? 1 : static_cast<int64_t>(group_sizes[g]);
          const int64_t got = f.integer(x, at, 0, kMaxCount);
          if (got != want)
            f.fail(at, "the checkpoint's group has ", got, " ", sharded ? "shard(s)" : "parameter(s)", ", expected ",
                   want);
        }
      if (!known) f.fail(at, "the checkpoint has more parameter groups than the ", G, " prepared");
      continue;
    }
    if (!current.count(k)) f.fail(at, "not a key of the prepared optimizer's state");
    sd.scalars[k] = optimizer_scalar(f, k, x, at);
  }
  for (const auto& [k, v] : current)
    if (k.rfind("param_groups.", 0) == 0 && !ends_with(k, ".num_params") && !sd.scalars.count(k))
      f.fail(Fields::join(skey, k), "missing");
  const json::Value* taken = saved.find("steps_taken");
  if (!taken) f.fail(Fields::join(skey, "steps_taken"), "missing");
  sd.scalars["steps_taken"] = optimizer_scalar(f, "steps_taken", *taken, Fields::join(skey, "steps_taken"));
  std::vector<int64_t> slot_steps(slots);
  for (size_t i = 0; i < slots; ++i) {
    const std::string k = "state." + std::to_string(i) + ".step";
    const json::Value* x = saved.find(k);
    if (!x) f.fail(Fields::join(skey, k), "missing");
    slot_steps[i] = f.integer(*x, Fields::join(skey, k), 0, kMaxCount);
  }

  auto read_tensors = [&](const std::string& name, const std::string& at) {
    data::SafetensorsFile sf;
    const std::string bytes = folder.read(name);
    try {
      sf = data::parse_safetensors(bytes, (folder.dir() / name).string());
    } catch (const Error& e) {
      f.fail(at, e.message());
    }
    return std::move(sf.tensors);
  };
  // Every parameter's state, flat, by kind; and its step.
  std::vector<std::map<std::string, Tensor>> full(params.size());
  std::vector<int64_t> steps(params.size());
  if (!sharded) {
    const std::string at = key + ".file";
    const std::string& file = listed_name(f, folder, f.string(f.member(entry, key, "file"), at), at);
    for (auto& [tname, t] : read_tensors(file, at)) {
      std::string kind;
      const int64_t i = state_slot(tname, &kind);
      if (i < 0 || static_cast<size_t>(i) >= params.size())
        f.fail(at, file, " has a tensor ", quoted(tname), " that is not state.<parameter index>.<name> of one of the ",
               params.size(), " parameters");
      const Tensor& p = params[static_cast<size_t>(i)];
      if (t.sizes() != p.sizes() || t.dtype() != p.dtype())
        f.fail(at, file, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but parameter ", i,
               " is ", dtype_name(p.dtype()), " ", p.sizes());
      full[static_cast<size_t>(i)][kind] = kernels::contiguous(t).view({t.numel()});
    }
    steps = slot_steps;
  } else {
    const json::Value* lj = entry.find("layout");
    if (!lj)
      f.fail(key + ".layout",
             "missing: the optimizer was saved sharded without its shard layout (by an older brisk), so "
             "its state can be resumed only on the ",
             saved_world, " processes that saved it");
    const ZeroLayout layout = parse_layout(f, *lj, key + ".layout", saved_world, numels, group_sizes);
    const auto& names = f.array(*shards, key + ".shards", static_cast<size_t>(saved_world), "shard(s)");
    // Rank r's shard tensors by (group, kind).
    std::vector<std::map<std::pair<size_t, std::string>, Tensor>> shard(names.size());
    for (size_t r = 0; r < names.size(); ++r) {
      const std::string at = Fields::index(key + ".shards", r);
      const std::string& file = listed_name(f, folder, f.string(names[r], at), at);
      for (auto& [tname, t] : read_tensors(file, at)) {
        std::string kind;
        const int64_t g = state_slot(tname, &kind);
        if (g < 0 || static_cast<size_t>(g) >= G)
          f.fail(at, file, " has a tensor ", quoted(tname), " that is not state.<group>.<name> of one of the ", G,
                 " groups' shards");
        const Tensor& p0 = params[first[static_cast<size_t>(g)]];
        const int64_t n = layout.shard_numel(static_cast<size_t>(g));
        if (t.sizes() != std::vector<int64_t>{n} || t.dtype() != p0.dtype())
          f.fail(at, file, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but the layout gives ",
                 dtype_name(p0.dtype()), " [", n, "]");
        shard[r][{static_cast<size_t>(g), kind}] = kernels::contiguous(t);
      }
      if (shard[r].size() != shard[0].size())
        f.fail(at, file, " holds other kinds of state than ", f.string(names[0], key + ".shards[0]"));
      for (const auto& [gk, t] : shard[0])
        if (!shard[r].count(gk))
          f.fail(at, file, " lacks ", quoted("state." + std::to_string(gk.first) + "." + gk.second));
    }
    std::vector<int64_t> shard_offset(G, 0);
    for (const ZeroLayout::Bucket& b : layout.buckets) {
      const int64_t block = b.padded / layout.num_processes;
      for (const auto& [gk, t0] : shard[0]) {
        if (gk.first != b.group) continue;
        Tensor flat = empty({b.padded}, t0.dtype(), t0.device());
        for (size_t r = 0; r < shard.size(); ++r)
          kernels::copy_(flat.narrow(0, static_cast<int64_t>(r) * block, block),
                         shard[r].at(gk).narrow(0, shard_offset[b.group], block));
        int64_t off = 0;
        for (const ZeroLayout::Member& m : b.members) {
          full[m.param][gk.second] = flat.narrow(0, off, m.numel);
          off += m.numel;
        }
      }
      shard_offset[b.group] += block;
    }
    for (size_t i = 0; i < params.size(); ++i) steps[i] = slot_steps[group_of[i]];
  }

  // This job's state dict.
  if (!zero) {
    for (size_t g = 0; g < G; ++g)
      sd.scalars["param_groups." + std::to_string(g) + ".num_params"] = static_cast<double>(group_sizes[g]);
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string sp = "state." + std::to_string(i) + ".";
      sd.scalars[sp + "step"] = static_cast<double>(steps[i]);
      for (const auto& [kind, t] : full[i]) sd.tensors.emplace_back(sp + kind, t.view(params[i].sizes()));
    }
    return sd;
  }
  const ZeroLayout& L = *mine;
  for (size_t g = 0; g < G; ++g) {
    const std::string sp = "state." + std::to_string(g) + ".";
    sd.scalars["param_groups." + std::to_string(g) + ".num_params"] = 1;
    // One step count per shard: its parameters', which a sharded run keeps equal.
    int64_t step = 0;
    std::set<std::string> kinds;
    for (size_t i = first[g]; i < first[g + 1]; ++i) {
      step = std::max(step, steps[i]);
      for (const auto& [kind, t] : full[i]) kinds.insert(kind);
    }
    sd.scalars[sp + "step"] = static_cast<double>(step);
    for (const std::string& kind : kinds) {
      Tensor t = zeros({L.shard_numel(g)}, {.dtype = params[first[g]].dtype()});
      int64_t so = 0;
      for (const ZeroLayout::Bucket& b : L.buckets) {
        if (b.group != g) continue;
        const int64_t block = b.padded / L.num_processes, lo = rank * block, hi = lo + block;
        int64_t off = 0;
        for (const ZeroLayout::Member& m : b.members) {
          const int64_t a = std::max(lo, off), e = std::min(hi, off + m.numel);
          auto it = full[m.param].find(kind);
          if (a < e && it != full[m.param].end())
            kernels::copy_(t.narrow(0, so + a - lo, e - a), it->second.narrow(0, a - off, e - a));
          off += m.numel;
        }
        so += block;
      }
      sd.tensors.emplace_back(sp + kind, t);
    }
  }
  return sd;
}

// --- zero3: per-rank parameter shards ------------------------------------------------------------
// Under zero3 each rank holds only its block of every bucket (a unit's parameters of one optimizer
// group, flat, padded to a multiple of N). save_state writes rank r's blocks to
// model_shard<r>.safetensors (model_<i>_shard<r> for model i), tensors "bucket.<k>", with the
// layout that rebuilds the full tensors in its metadata and in state.json's model entry:
//   {"num_processes": N, "buckets": [{"tensor": "bucket.0", "dtype": "F32", "padded": P, "shard": P/N,
//     "params": [{"name": "h0.attn.c_attn.weight", "shape": [64, 192], "offset": 0}, ...]}, ...]}
// The model file then holds the rest of the state dict (buffers, parameters no optimizer shards).

constexpr const char* kParamShardFormat = "brisk-zero3-parameter-shard";

std::string param_shard_file(size_t i, int rank) {
  return (i == 0 ? std::string("model") : "model_" + std::to_string(i)) + "_shard" + std::to_string(rank) +
         ".safetensors";
}

// This job's parameter shards of one model: the layout, this rank's blocks (views of the shards)
// and the names of the sharded parameters.
struct ParamShards {
  json::Value layout;
  std::vector<Tensor> blocks;
  std::set<std::string> names;
};

ParamShards param_shards(const nn::Module& model, const std::vector<const accelerate::detail::ZeroEngine*>& engines,
                         int world) {
  ParamShards out;
  const nn::NamedTensors named = nn::remove_tied_duplicates(model.state_dict());
  json::Value buckets = json::Value::array();
  for (const accelerate::detail::ZeroEngine* e : engines) {
    const ZeroLayout l = e->layout();
    const std::vector<Tensor>& params = e->params();
    const std::vector<Tensor> blocks = e->shard_blocks();
    for (size_t k = 0; k < l.buckets.size(); ++k) {
      const ZeroLayout::Bucket& b = l.buckets[k];
      json::Value jb = json::Value::object();
      jb.set("tensor", "bucket." + std::to_string(out.blocks.size()));
      jb.set("dtype", std::string(traits(blocks[k].dtype()).safetensors_name));
      jb.set("padded", b.padded);
      jb.set("shard", b.padded / l.num_processes);
      json::Value ps = json::Value::array();
      int64_t offset = 0;
      for (const ZeroLayout::Member& m : b.members) {
        const Tensor& p = params[m.param];
        std::string name;
        for (const auto& [n, t] : named)
          if (t.is_same(p)) {
            name = n;
            break;
          }
        BRISK_CHECK(!name.empty(), "Accelerator::save_state (sharding zero3): a sharded parameter of shape ", p.sizes(),
                    " is not in the model's state dict");
        json::Value jp = json::Value::object();
        jp.set("name", name);
        json::Value shape = json::Value::array();
        for (int64_t d : p.sizes()) shape.push_back(d);
        jp.set("shape", shape);
        jp.set("offset", offset);
        ps.push_back(jp);
        offset += m.numel;
        out.names.insert(name);
      }
      jb.set("params", ps);
      buckets.push_back(jb);
      out.blocks.push_back(blocks[k]);
    }
  }
  out.layout = json::Value::object();
  out.layout.set("num_processes", world);
  out.layout.set("buckets", buckets);
  return out;
}

// The zero3 engines that shard `model`'s parameters (full_parameters' choice).
template <class Optimizers>
std::vector<const accelerate::detail::ZeroEngine*> param_engines(const Optimizers& optimizers,
                                                                 const nn::Module& model) {
  std::vector<const accelerate::detail::ZeroEngine*> out;
  const std::vector<Tensor> params = model.parameters();
  for (const auto& o : optimizers) {
    if (!o->zero || !o->zero->shards_parameters()) continue;
    bool mine = false;
    for (const Tensor& p : params) mine = mine || o->zero->owns(p);
    if (mine) out.push_back(o->zero.get());
  }
  return out;
}

// A model entry's parameter shards as state.json records them, checked: the layout's every value
// (names once, offsets one after the other from 0, padding below num_processes, shard = padded /
// num_processes) and, with `targets` (the prepared model's tensors), each name, shape and dtype.
struct SavedParamShards {
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset = 0, numel = 0;
  };
  struct Bucket {
    std::string dtype;
    int64_t padded = 0, shard = 0;
    std::vector<Param> params;
  };
  int64_t world = 1;
  std::vector<Bucket> buckets;
  std::vector<std::string> files;  // per rank
  json::Value layout;
};

SavedParamShards parse_param_shards(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                                    const std::string& key, int64_t saved_world,
                                    const std::map<std::string, Tensor>* targets) {
  SavedParamShards s;
  s.world = saved_world;
  const std::string lkey = key + ".layout";
  s.layout = f.member(entry, key, "layout");
  f.object(s.layout, lkey);
  for (const auto& [k, v] : s.layout.items())
    if (k != "num_processes" && k != "buckets") f.fail(Fields::join(lkey, k), "not a key of a parameter shard layout");
  const int64_t world = f.integer(f.member(s.layout, lkey, "num_processes"), lkey + ".num_processes", 1, 1 << 20);
  if (world != saved_world)
    f.fail(lkey + ".num_processes", "is ", world, " but the checkpoint was saved by ", saved_world, " processes");
  const json::Value& bs = f.member(s.layout, lkey, "buckets");
  if (!bs.is_array() || bs.size() == 0) f.fail(lkey + ".buckets", "expected a non-empty array");
  std::set<std::string> seen;
  for (size_t k = 0; k < bs.size(); ++k) {
    const std::string at = Fields::index(lkey + ".buckets", k);
    const json::Value& jb = f.object(bs.at(k), at);
    if (jb.size() != 5) f.fail(at, "expected exactly tensor, dtype, padded, shard and params");
    SavedParamShards::Bucket b;
    if (f.string(f.member(jb, at, "tensor"), at + ".tensor") != "bucket." + std::to_string(k))
      f.fail(at + ".tensor", "expected \"bucket.", k, "\"");
    b.dtype = f.string(f.member(jb, at, "dtype"), at + ".dtype");
    bool known = false;
    for (const DTypeTraits& t : kDTypeTable) known = known || (t.is_float && b.dtype == t.safetensors_name);
    if (!known) f.fail(at + ".dtype", "expected F64, F32, F16 or BF16, got ", quoted(b.dtype));
    b.padded = f.integer(f.member(jb, at, "padded"), at + ".padded", 1, kMaxCount);
    b.shard = f.integer(f.member(jb, at, "shard"), at + ".shard", 1, kMaxCount);
    if (b.padded % world != 0 || b.shard != b.padded / world)
      f.fail(at + ".shard", "expected padded / num_processes = ", b.padded, " / ", world, " (padded a multiple of ",
             world, "), got ", b.shard);
    const json::Value& ps = f.member(jb, at, "params");
    if (!ps.is_array() || ps.size() == 0) f.fail(at + ".params", "expected a non-empty array");
    int64_t offset = 0;
    for (size_t j = 0; j < ps.size(); ++j) {
      const std::string pat = Fields::index(at + ".params", j);
      const json::Value& jp = f.object(ps.at(j), pat);
      if (jp.size() != 3) f.fail(pat, "expected exactly name, shape and offset");
      SavedParamShards::Param p;
      p.name = f.string(f.member(jp, pat, "name"), pat + ".name");
      if (!seen.insert(p.name).second) f.fail(pat + ".name", quoted(p.name), " is listed a second time");
      const json::Value& shape = f.member(jp, pat, "shape");
      if (!shape.is_array() || shape.size() > 8) f.fail(pat + ".shape", "expected an array of at most 8 sizes");
      p.numel = 1;
      for (size_t d = 0; d < shape.size(); ++d) {
        p.shape.push_back(f.integer(shape.at(d), Fields::index(pat + ".shape", d), 0, kMaxCount));
        if (p.shape.back() != 0 && p.numel > kMaxCount / p.shape.back())
          f.fail(pat + ".shape", "more than 2^53 elements");
        p.numel *= p.shape.back();
      }
      p.offset = f.integer(f.member(jp, pat, "offset"), pat + ".offset", 0, kMaxCount);
      if (p.offset != offset)
        f.fail(pat + ".offset", "expected ", offset, " (the parameters lie one after the other), got ", p.offset);
      offset += p.numel;
      if (offset > b.padded) f.fail(at + ".padded", "the parameters need ", offset, " elements, more than ", b.padded);
      if (targets) {
        auto it = targets->find(p.name);
        if (it == targets->end()) f.fail(pat + ".name", quoted(p.name), " is not a tensor of the prepared model");
        if (it->second.sizes() != p.shape || b.dtype != traits(it->second.dtype()).safetensors_name)
          f.fail(pat, quoted(p.name), " is ", b.dtype, " ", p.shape, " but the prepared model's is ",
                 traits(it->second.dtype()).safetensors_name, " ", it->second.sizes());
      }
      b.params.push_back(std::move(p));
    }
    if (b.padded - offset >= world)
      f.fail(at + ".padded", "expected ", offset, " rounded up to a multiple of ", world, ", got ", b.padded);
    s.buckets.push_back(std::move(b));
  }
  const json::Value& names = f.member(entry, key, "shards");
  if (!names.is_array() || names.size() != static_cast<size_t>(saved_world))
    f.fail(key + ".shards", "expected one parameter shard file for each of the ", saved_world,
           " processes that saved the checkpoint, got ", names.is_array() ? std::to_string(names.size()) : "no array");
  for (size_t r = 0; r < names.size(); ++r) {
    const std::string at = Fields::index(key + ".shards", r);
    s.files.push_back(listed_name(f, folder, f.string(names.at(r), at), at));
  }
  return s;
}

// Rank r's parameter shard file, checked against state.json's layout (its metadata: the format,
// its rank, the number of processes and the same layout; one block per bucket of the right size
// and dtype); its blocks in bucket order.
std::vector<Tensor> read_param_shard(const Fields& f, const CheckpointFolder& folder, const SavedParamShards& s,
                                     int64_t r, const std::string& key) {
  const std::string& file = s.files[static_cast<size_t>(r)];
  const std::string at = Fields::index(key + ".shards", static_cast<size_t>(r));
  data::SafetensorsFile sf;
  {
    const std::string bytes = folder.read(file);
    try {
      sf = data::parse_safetensors(bytes, (folder.dir() / file).string());
    } catch (const Error& e) {
      f.fail(at, e.message());
    }
  }
  auto meta = [&](const char* name) -> const std::string& {
    auto it = sf.metadata.find(name);
    if (it == sf.metadata.end()) f.fail(at, file, " lacks the metadata key ", quoted(name));
    return it->second;
  };
  if (meta("format") != kParamShardFormat)
    f.fail(at, file, " is not a parameter shard (its metadata's format is ", quoted(meta("format")), ", expected ",
           quoted(kParamShardFormat), ")");
  if (meta("rank") != std::to_string(r))
    f.fail(at, file, " was written by rank ", quoted(meta("rank")), ", expected rank ", r);
  if (meta("num_processes") != std::to_string(s.world))
    f.fail(at, file, " was written by one of ", quoted(meta("num_processes")),
           " processes, but the checkpoint was saved by ", s.world, " (state.json's num_processes)");
  if (meta("layout") != s.layout.dump())
    f.fail(at, file, "'s parameter layout differs from the one state.json records at ", key, ".layout");
  if (sf.tensors.size() != s.buckets.size())
    f.fail(at, file, " holds ", sf.tensors.size(), " tensor(s), the layout has ", s.buckets.size(), " bucket(s)");
  std::vector<Tensor> blocks(s.buckets.size());
  for (auto& [name, t] : sf.tensors) {
    size_t k = s.buckets.size();
    for (size_t j = 0; j < s.buckets.size(); ++j)
      if (name == "bucket." + std::to_string(j)) k = j;
    if (k == s.buckets.size()) f.fail(at, file, " has a tensor ", quoted(name), " that is not a bucket of the layout");
    const SavedParamShards::Bucket& b = s.buckets[k];
    if (t.sizes() != std::vector<int64_t>{b.shard} || b.dtype != traits(t.dtype()).safetensors_name)
      f.fail(at, file, ": ", quoted(name), " is ", traits(t.dtype()).safetensors_name, " ", t.sizes(),
             " but the layout gives ", b.dtype, " [", b.shard, "]");
    blocks[k] = std::move(t);
  }
  return blocks;
}

// The full parameters rebuilt from every rank's shard file (read one at a time into the padded
// buckets), by name in the layout's order.
nn::NamedTensors gather_param_shards(const Fields& f, const CheckpointFolder& folder, const SavedParamShards& s,
                                     const std::string& key) {
  std::vector<Tensor> flats(s.buckets.size());
  for (int64_t r = 0; r < s.world; ++r) {
    const std::vector<Tensor> blocks = read_param_shard(f, folder, s, r, key);
    for (size_t k = 0; k < s.buckets.size(); ++k) {
      const SavedParamShards::Bucket& b = s.buckets[k];
      if (!flats[k].defined()) flats[k] = empty({b.padded}, blocks[k].dtype(), Device(kCPU));
      kernels::copy_(flats[k].narrow(0, r * b.shard, b.shard), blocks[k]);
    }
  }
  nn::NamedTensors out;
  for (size_t k = 0; k < s.buckets.size(); ++k)
    for (const SavedParamShards::Param& p : s.buckets[k].params)
      out.emplace_back(p.name, flats[k].narrow(0, p.offset, p.numel).view(p.shape));
  return out;
}

}  // namespace

namespace accelerate {

bool is_complete_checkpoint(const std::string& dir, std::string* why) {
  try {
    CheckpointFolder folder(dir, "");
    if (!folder.lists(kState)) folder.fail(kManifest, " does not list ", kState);
    for (const auto& [name, entry] : folder.files()) folder.verify(name);
  } catch (const Error& e) {
    if (why) *why = e.message();
    return false;
  }
  if (why) why->clear();
  return true;
}

std::string merged_model_weights(const std::string& dir, size_t model) {
  const std::string where = "merge-weights: '" + dir + "': ";
  std::error_code ec;
  if (!fs::exists(dir, ec)) BRISK_THROW(where, "no such folder");
  if (!fs::is_directory(dir, ec)) BRISK_THROW(where, "not a folder (expected a checkpoint folder from save_state)");
  CheckpointFolder folder(dir, where + "not a complete checkpoint: ");
  if (!folder.lists(kState)) folder.fail(kManifest, " does not list ", kState);
  // A damaged or truncated file anywhere (a model, an optimizer shard) is reported, not skipped.
  for (const auto& [name, entry] : folder.files()) folder.verify(name);
  const Fields sf((fs::path(dir) / kState).string());
  json::Value st;
  try {
    st = json::parse(folder.read(kState, kMaxJsonBytes));
  } catch (const Error& e) {
    BRISK_THROW(where, kState, " is not valid JSON: ", e.message());
  }
  sf.object(st, "");
  if (sf.string(sf.member(st, "", "format"), "format") != kFormat) sf.fail("format", "not a brisk checkpoint");
  const json::Value& models = sf.member(st, "", "models");
  if (!models.is_array() || models.size() == 0) sf.fail("models", "expected a non-empty array");
  if (model >= models.size())
    BRISK_THROW(where, "the checkpoint has ", models.size(), " model(s); there is no model ", model,
                " (--model counts from 0)");
  const std::string key = Fields::index("models", model);
  const std::string& file =
      listed_name(sf, folder, sf.string(sf.member(models.at(model), key, "file"), key + ".file"), key + ".file");
  data::SafetensorsFile weights;
  {
    const std::string bytes = folder.read(file);
    try {
      weights = data::parse_safetensors(bytes, (fs::path(dir) / file).string());
    } catch (const Error& e) {
      BRISK_THROW(where, e.message());
    }
  }
  // Every rank holds the whole parameters under none, zero1 and zero2 (and zero3 checkpoints of
  // format version 2 gathered them), so the main process's file is the whole model; a zero3
  // checkpoint's sharded parameters are rebuilt from every rank's shard file. Written again
  // exactly as save_model writes it (safetensors orders the tensors by dtype and name).
  const json::Value* shards = models.at(model).find("shards");
  if (shards && !shards->is_null()) {
    const int64_t saved_world = sf.integer(sf.member(st, "", "num_processes"), "num_processes", 1, kMaxCount);
    const SavedParamShards saved = parse_param_shards(sf, folder, models.at(model), key, saved_world, nullptr);
    nn::NamedTensors full = gather_param_shards(sf, folder, saved, key);
    for (const auto& [name, t] : full)
      if (weights.contains(name))
        sf.fail(key + ".file", file, " holds ", quoted(name), ", which the parameter shards hold too");
    for (auto& e : full) weights.tensors.push_back(std::move(e));
  }
  return data::safetensors_bytes(weights.tensors, {{"format", "pt"}});
}

int64_t parse_size(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ' ') s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  size_t digits = 0;
  while (digits < s.size() && ((s[digits] >= '0' && s[digits] <= '9') || s[digits] == '.')) ++digits;
  BRISK_CHECK(digits > 0, "parse_size: expected a size such as 10GB, 500MB, 2GiB or a byte count, got '", text, "'");
  const double number = std::stod(s.substr(0, digits));
  const std::string unit = s.substr(digits);
  double mult = 0;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else if (unit == "KIB")
    mult = 1024.0;
  else if (unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  BRISK_CHECK(mult > 0, "parse_size: unknown unit '", text.substr(digits), "' in '", text,
              "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  BRISK_CHECK(number * mult >= 1, "parse_size: the size must be at least one byte, got '", text, "'");
  return static_cast<int64_t>(number * mult);
}

}  // namespace accelerate

void Accelerator::register_for_checkpointing(const std::string& name, std::function<json::Value()> save,
                                             std::function<void(const json::Value&)> load) {
  BRISK_CHECK(save && load, "Accelerator::register_for_checkpointing: '", name, "' needs both save and load");
  for (const CustomState& c : custom_)
    BRISK_CHECK(c.name != name, "Accelerator::register_for_checkpointing: '", name, "' is already registered");
  custom_.push_back({name, std::move(save), std::move(load)});
}

std::string Accelerator::checkpoint_root() const {
  return (fs::path(s_.project_dir) / "checkpoints").string();
}

namespace {

// Runs `body`, catching its error; then every rank learns whether any rank failed. The failing
// ranks throw their own error, the others one that says another rank failed: no rank is left
// waiting in a collective that the others never reach.
void on_every_rank(dist::ProcessGroup* pg, int world_size, const char* op, const std::function<void()>& body,
                   const std::function<void()>& on_failure = {}) {
  std::string error;
  try {
    body();
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = std::string(op) + ": " + e.what();
  }
  bool failed_elsewhere = false;
  if (world_size > 1) {
    Tensor flag = full({1}, error.empty() ? 0.0 : 1.0, {.dtype = DType::I64});
    pg->all_reduce(flag, {.op = dist::ReduceOp::Max});
    failed_elsewhere = error.empty() && flag.item<int64_t>() != 0;
  }
  if ((!error.empty() || failed_elsewhere) && on_failure) on_failure();
  if (!error.empty()) BRISK_THROW(error);
  if (failed_elsewhere) BRISK_THROW(op, ": another rank failed (see its error)");
}

}  // namespace

std::string Accelerator::save_state(const std::string& dir) {
  auto span = trace_span("save_state", "checkpoint");
  // zero3: nothing is gathered. Each rank writes its own shard of the parameters (edits made by
  // hand inside a full_parameters guard are written back into the shards first).
  std::vector<ParamShards> sharded(models_.size());
  std::vector<bool> has_shards(models_.size(), false);
  for (size_t i = 0; i < models_.size(); ++i) {
    const auto engines = param_engines(optimizers_, *models_[i]->model);
    if (engines.empty()) continue;
    for (const accelerate::detail::ZeroEngine* e : engines) e->scatter_gathered();
    sharded[i] = param_shards(*models_[i]->model, engines, world_size_);
    has_shards[i] = true;
  }
  fs::path final_dir;
  if (dir.empty()) {
    BRISK_CHECK(s_.automatic_checkpoint_naming,
                "Accelerator::save_state: no folder given; pass one, or set automatic_checkpoint_naming "
                "(checkpoints then go to <project_dir>/checkpoints/checkpoint_<n>)");
    // The main process picks the number (one more than the highest there) and tells the others.
    const fs::path root = checkpoint_root();
    Tensor n = zeros({1}, {.dtype = DType::I64});
    on_every_rank(pg_, world_size_, "Accelerator::save_state", [&] {
      if (!is_main_process()) return;
      fs::create_directories(root);
      auto existing = numbered_checkpoints(root);
      n.data<int64_t>()[0] = existing.empty() ? 0 : existing.back().first + 1;
    });
    if (world_size_ > 1) pg_->broadcast(n, {.root = 0});
    final_dir = root / ("checkpoint_" + std::to_string(n.item<int64_t>()));
  } else {
    final_dir = dir;
  }
  final_dir = final_dir.lexically_normal();
  if (final_dir.filename().empty()) final_dir = final_dir.parent_path();
  const fs::path parent = final_dir.parent_path().empty() ? fs::path(".") : final_dir.parent_path();
  std::string tmp_name = ".";  // (not "." + name: GCC 12 warns falsely about that at -O3)
  tmp_name += final_dir.filename().string();
  tmp_name += ".partial";
  const fs::path tmp = parent / tmp_name;
  // A failed save leaves nothing behind but the checkpoints that were there before.
  auto discard = [&] {
    std::error_code ec;
    if (is_main_process()) fs::remove_all(tmp, ec);
  };

  on_every_rank(pg_, world_size_, "Accelerator::save_state", [&] {
    if (!is_main_process()) return;
    fs::create_directories(parent);
    fs::remove_all(tmp);  // a save that died earlier
    fs::create_directories(tmp);
  });

  // What this process wrote, with sizes and checksums (the main process hashes the others' files).
  std::map<std::string, CheckpointFolder::Entry> written;
  auto put = [&](const std::string& name, const std::string& bytes) {
    write_synced(tmp / name, bytes);
    written[name] = {static_cast<int64_t>(bytes.size()), accelerate::sha256_hex(bytes)};
  };

  on_every_rank(
      pg_, world_size_, "Accelerator::save_state",
      [&] {
        // Every rank: what differs between ranks, in files of its own. Its random state; its
        // data loaders' epoch and position; and, saved in the middle of a gradient accumulation,
        // the gradients its micro-steps accumulated so far (not synchronised yet, so different on
        // every rank: without them the resumed run would step with part of its gradient).
        {
          const Generator::State g = default_generator().state();
          json::Value r = json::Value::object();
          r.set("rank", rank_);
          json::Value gen = json::Value::object();
          gen.set("seed", static_cast<uint64_t>(g.seed));
          gen.set("offset", static_cast<uint64_t>(g.offset));
          r.set("default_generator", gen);
          json::Value loaders = json::Value::array();
          // Examples per step over all processes: a resume on another number of processes keeps
          // the loader's position only when this is unchanged.
          auto global_batch = [&](const LoaderState& l) -> int64_t {
            const int64_t bs = l.loader->options().batch_size;
            return !l.iterable && l.sharded && s_.split_batches ? bs : bs * world_size_;
          };
          for (auto& l : loaders_) {
            json::Value o = json::Value::object();
            o.set("epoch", static_cast<uint64_t>(l->loader->epoch()));
            o.set("position", l->loader->position());
            o.set("iterable", l->iterable);
            o.set("global_batch", global_batch(*l));
            loaders.push_back(o);
          }
          r.set("data_loaders", loaders);
          json::Value grad_files = json::Value::array();
          for (size_t i = 0; i < models_.size(); ++i) {
            nn::NamedTensors grads;
            for (auto& [name, p] : models_[i]->model->named_parameters())
              if (p.grad().defined()) grads.emplace_back(name, p.grad());
            if (grads.empty()) {
              grad_files.push_back(json::Value());
              continue;
            }
            put(gradients_file(i, rank_), data::safetensors_bytes(grads));
            grad_files.push_back(gradients_file(i, rank_));
          }
          r.set("gradients", grad_files);
          for (size_t i = 0; i < models_.size(); ++i) {
            if (!has_shards[i]) continue;
            nn::NamedTensors blocks;
            for (size_t k = 0; k < sharded[i].blocks.size(); ++k)
              blocks.emplace_back("bucket." + std::to_string(k), sharded[i].blocks[k]);
            put(param_shard_file(i, rank_),
                data::safetensors_bytes(blocks, {{"format", kParamShardFormat},
                                                 {"rank", std::to_string(rank_)},
                                                 {"num_processes", std::to_string(world_size_)},
                                                 {"layout", sharded[i].layout.dump()}}));
          }
          for (size_t i = 0; i < optimizers_.size(); ++i)
            if (optimizers_[i]->zero)
              put(optimizer_shard_file(i, rank_), data::safetensors_bytes(optimizers_[i]->opt->state_dict().tensors));
          put(rank_file(rank_), r.dump(2) + "\n");
        }
        if (!is_main_process()) return;
        json::Value st = json::Value::object();
        st.set("format", kFormat);
        st.set("version", kVersion);
        st.set("num_processes", world_size_);
        st.set("step", step_);
        json::Value cfg = json::Value::object();
        cfg.set("mixed_precision", std::string(enum_name(s_.mixed_precision)));
        cfg.set("sharding", std::string(enum_name(s_.sharding)));
        cfg.set("gradient_accumulation_steps", s_.gradient_accumulation_steps);
        cfg.set("split_batches", s_.split_batches);
        cfg.set("even_batches", s_.even_batches);
        cfg.set("seed", s_.seed ? json::Value(static_cast<uint64_t>(*s_.seed)) : json::Value());
        st.set("config", cfg);

        json::Value models = json::Value::array();
        for (size_t i = 0; i < models_.size(); ++i) {
          nn::NamedTensors sd;
          for (auto& [name, t] : nn::remove_tied_duplicates(models_[i]->model->state_dict()))
            if (!sharded[i].names.count(name)) sd.emplace_back(name, t);
          put(model_file(i), data::safetensors_bytes(sd, {{"format", "pt"}}));
          json::Value m = json::Value::object();
          m.set("file", model_file(i));
          if (has_shards[i]) {
            // zero3: the rest of the state dict above; the parameters in every rank's shard file.
            json::Value shards = json::Value::array();
            for (int r = 0; r < world_size_; ++r) shards.push_back(param_shard_file(i, r));
            m.set("shards", shards);
            m.set("layout", sharded[i].layout);
          }
          models.push_back(m);
        }
        st.set("models", models);
        json::Value opts = json::Value::array();
        for (size_t i = 0; i < optimizers_.size(); ++i) {
          optim::StateDict sd = optimizers_[i]->opt->state_dict();
          json::Value o = json::Value::object();
          if (optimizers_[i]->zero) {
            // Every rank wrote its shard above; rank r reads shards[r] back.
            json::Value shards = json::Value::array();
            for (int r = 0; r < world_size_; ++r) shards.push_back(optimizer_shard_file(i, r));
            o.set("file", optimizer_shard_file(i, 0));
            o.set("shards", shards);
            o.set("layout", layout_json(optimizers_[i]->zero->layout()));
          } else {
            put(optimizer_file(i), data::safetensors_bytes(sd.tensors));
            o.set("file", optimizer_file(i));
          }
          o.set("name", optimizers_[i]->opt->name());
          o.set("scalars", scalars_json(sd.scalars));
          opts.push_back(o);
        }
        st.set("optimizers", opts);
        json::Value scheds = json::Value::array();
        for (optim::LRScheduler* s : schedulers_) {
          json::Value o = json::Value::object();
          o.set("scalars", scalars_json(s->state_dict().scalars));
          scheds.push_back(o);
        }
        st.set("schedulers", scheds);
        st.set("scaler", scaler_ ? scalars_json(scaler_->state_dict().scalars) : json::Value());
        json::Value custom = json::Value::object();
        for (const CustomState& c : custom_) custom.set(c.name, c.save());
        st.set("custom", custom);
        put(kState, st.dump(2) + "\n");
      },
      discard);  // after this, every rank's files are on disk

  on_every_rank(
      pg_, world_size_, "Accelerator::save_state",
      [&] {
        if (!is_main_process()) return;
        // The manifest, written last, lists every file with its size and SHA-256 and carries
        // its own checksum: it is what makes the checkpoint complete.
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(tmp)) names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        json::Value files = json::Value::array();
        for (const std::string& name : names) {
          auto it = written.find(name);
          const CheckpointFolder::Entry e =
              it != written.end() ? it->second
                                  : CheckpointFolder::Entry{static_cast<int64_t>(fs::file_size(tmp / name)),
                                                            accelerate::sha256_file((tmp / name).string())};
          json::Value f = json::Value::object();
          f.set("path", name);
          f.set("size", e.size);
          f.set("sha256", e.sha256);
          files.push_back(f);
        }
        json::Value m = json::Value::object();
        m.set("format", kManifestFormat);
        m.set("version", kManifestVersion);
        m.set("files", files);
        m.set("manifest_sha256", manifest_checksum(m));
        write_synced(tmp / kManifest, m.dump(2) + "\n");
        fsync_path(tmp, true);
        // Publish: swap the finished folder with an older one of that name in one atomic step
        // (renameat2 RENAME_EXCHANGE), so that a crash at any point leaves a complete
        // checkpoint there; then remove the old one.
        std::error_code ec;
        if (fs::exists(final_dir, ec)) {
          if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
            fsync_path(parent, true);
            fs::remove_all(tmp);
          } else {
            // A file system without RENAME_EXCHANGE: move the old one aside first.
            BRISK_CHECK(errno == EINVAL || errno == ENOSYS || errno == ENOTSUP,
                        "Accelerator::save_state: cannot replace '", final_dir.string(), "': ", std::strerror(errno));
            const fs::path old = parent / ("." + final_dir.filename().string() + ".old");
            fs::remove_all(old);
            fs::rename(final_dir, old);
            fs::rename(tmp, final_dir);
            fs::remove_all(old);
          }
        } else {
          fs::rename(tmp, final_dir);
        }
        fsync_path(parent, true);
        // total_limit: the oldest automatic checkpoints go once the new one is in place.
        if (dir.empty() && s_.total_limit) {
          auto existing = numbered_checkpoints(checkpoint_root());
          for (size_t i = 0; i + static_cast<size_t>(*s_.total_limit) < existing.size(); ++i)
            fs::remove_all(existing[i].second);
        }
      },
      discard);
  return final_dir.string();
}

// What load_state reads and checks before it changes anything.
struct Accelerator::LoadedCheckpoint {
  struct Loader {
    uint64_t epoch = 0;
    int64_t position = 0;
    // Resumed on another number of processes with another global batch: the position does not
    // carry over, the run continues at the next epoch.
    bool restart = false;
  };
  int64_t saved_world = 1;
  bool has_generator = true;  // false: this rank had no counterpart in the saved run
  std::vector<data::NamedTensors> models;
  // zero3, per model: this rank's saved parameter blocks, loaded straight into its shards (the
  // model file then holds the rest); empty: `models` holds the full parameters.
  std::vector<std::vector<Tensor>> param_blocks;
  std::vector<std::map<std::string, Tensor>> gradients;  // per model; empty: none saved
  std::vector<optim::StateDict> optimizers;
  std::vector<optim::StateDict> schedulers;
  std::optional<optim::StateDict> scaler;
  std::vector<Loader> loaders;
  Generator::State generator{};
  std::vector<const json::Value*> custom;
  std::optional<uint64_t> seed;
  int64_t step = 0;
  json::Value state, rank;  // the parsed documents (custom points into state)
};

void Accelerator::read_checkpoint(const std::string& dir, LoadedCheckpoint& out) const {
  const std::string where = "Accelerator::load_state: '" + dir + "' is not a complete checkpoint: ";
  CheckpointFolder folder(dir, where);
  auto parse = [&](const std::string& name, const Fields& f) {
    const std::string bytes = folder.read(name, kMaxJsonBytes);
    try {
      return json::parse(bytes);
    } catch (const Error& e) {
      f.fail("", "not valid JSON: ", e.message());
    }
  };
  // state.json: what every rank shares.
  const Fields sf((fs::path(dir) / kState).string());
  out.state = parse(kState, sf);
  const json::Value& st = sf.object(out.state, "");
  if (sf.string(sf.member(st, "", "format"), "format") != kFormat) sf.fail("format", "not a brisk checkpoint");
  const int64_t version = sf.integer(sf.member(st, "", "version"), "version", 0, kMaxCount);
  if (version < kOldestVersion || version > kVersion)
    sf.fail("version", "checkpoint format version ", version, "; this brisk reads versions ", kOldestVersion, " to ",
            kVersion,
            version == 1 ? " (version 1 kept only the main process's gradients: resume it with the brisk that wrote it)"
                         : "");
  const int64_t saved_world = sf.integer(sf.member(st, "", "num_processes"), "num_processes", 1, kMaxCount);
  out.saved_world = saved_world;
  out.step = sf.integer(sf.member(st, "", "step"), "step", 0, kMaxCount);
  const json::Value& seed = sf.member(sf.member(st, "", "config"), "config", "seed");
  if (!seed.is_null()) out.seed = sf.uinteger(seed, "config.seed");

  const auto& models = sf.array(sf.member(st, "", "models"), "models", models_.size(), "model(s)");
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string key = Fields::index("models", i);
    const std::string& file = sf.string(sf.member(models[i], key, "file"), key + ".file");
    std::map<std::string, Tensor> targets;
    for (auto& [name, t] : models_[i]->model->state_dict()) targets.emplace(name, t);
    out.param_blocks.emplace_back();
    const json::Value* shards = models[i].find("shards");
    std::set<std::string> have;
    if (version >= 3 && shards && !shards->is_null()) {
      // zero3 parameter shards: checked against the prepared model, then either this rank's own
      // file straight into its shards (the same processes and layout: nothing else is read but
      // the other files' presence), or the full parameters rebuilt from every rank's file.
      const SavedParamShards saved = parse_param_shards(sf, folder, models[i], key, saved_world, &targets);
      std::map<std::string, Tensor> rest = targets;
      for (const SavedParamShards::Bucket& b : saved.buckets)
        for (const SavedParamShards::Param& p : b.params) {
          rest.erase(p.name);
          have.insert(p.name);
        }
      out.models.push_back(checked_tensors(sf, folder, file, key + ".file", rest,
                                           "tensor of the prepared model outside its parameter shards"));
      const auto engines = param_engines(optimizers_, *models_[i]->model);
      if (saved_world == world_size_ && !engines.empty() &&
          param_shards(*models_[i]->model, engines, world_size_).layout.dump() == saved.layout.dump()) {
        for (int64_t r = 0; r < saved_world; ++r)
          if (r != rank_) folder.check_present(saved.files[static_cast<size_t>(r)]);
        out.param_blocks.back() = read_param_shard(sf, folder, saved, rank_, key);
      } else {
        for (auto& e : gather_param_shards(sf, folder, saved, key)) out.models.back().push_back(std::move(e));
      }
    } else {
      out.models.push_back(checked_tensors(sf, folder, file, key + ".file", targets, "tensor of the prepared model"));
    }
    for (auto& [name, t] : out.models.back()) have.insert(name);
    for (auto& [name, t] : nn::remove_tied_duplicates(models_[i]->model->state_dict()))
      if (!have.count(name)) sf.fail(key + ".file", file, " lacks the model's tensor ", quoted(name));
  }
  const auto& opts = sf.array(sf.member(st, "", "optimizers"), "optimizers", optimizers_.size(), "optimizer(s)");
  for (size_t i = 0; i < opts.size(); ++i) {
    const std::string key = Fields::index("optimizers", i);
    const optim::Optimizer& opt = *optimizers_[i]->opt;
    const std::string& name = sf.string(sf.member(opts[i], key, "name"), key + ".name");
    if (name != opt.name()) sf.fail(key + ".name", "the checkpoint has ", name, " but ", opt.name(), " was prepared");
    // A sharded optimizer's state: this rank's shard, from the list of every rank's.
    const json::Value* shards = opts[i].find("shards");
    const bool sharded = shards && !shards->is_null();
    // Saved in another layout (another number of processes or sharding): re-sharded.
    const accelerate::detail::ZeroEngine* zero = optimizers_[i]->zero.get();
    const json::Value* layout = opts[i].find("layout");
    if (sharded != (zero != nullptr) || saved_world != world_size_ ||
        (sharded && layout && layout->dump() != layout_json(zero->layout()).dump())) {
      out.optimizers.push_back(reshard_optimizer(sf, folder, opts[i], key, opt, zero, saved_world, rank_));
      continue;
    }
    optim::StateDict sd;
    sd.scalars = optimizer_scalars(sf, sf.member(opts[i], key, "scalars"), key + ".scalars", opt);
    // The state tensors: state.<parameter index>.<name>, each shaped like its parameter.
    const std::vector<Tensor> params = opt.all_params();
    const std::string& file =
        sharded ? listed_name(sf, folder,
                              sf.string(sf.array(*shards, key + ".shards", static_cast<size_t>(world_size_),
                                                 "shard(s)")[static_cast<size_t>(rank_)],
                                        Fields::index(key + ".shards", static_cast<size_t>(rank_))),
                              key + ".shards")
                : listed_name(sf, folder, sf.string(sf.member(opts[i], key, "file"), key + ".file"), key + ".file");
    const std::string& bytes_name = file;
    {
      data::SafetensorsFile probe;
      const std::string bytes = folder.read(bytes_name);
      try {
        probe = data::parse_safetensors(bytes, (folder.dir() / bytes_name).string());
      } catch (const Error& e) {
        sf.fail(key + ".file", e.message());
      }
      for (auto& [tname, t] : probe.tensors) {
        const std::string at = key + ".file";
        size_t dot = std::string::npos;
        int64_t idx = -1;
        if (tname.rfind("state.", 0) == 0 && (dot = tname.find('.', 6)) != std::string::npos && dot > 6 &&
            dot - 6 <= 12 && dot + 1 < tname.size() &&
            std::all_of(tname.begin() + 6, tname.begin() + static_cast<std::ptrdiff_t>(dot),
                        [](char c) { return c >= '0' && c <= '9'; }))
          idx = std::stoll(tname.substr(6, dot - 6));
        if (idx < 0 || idx >= static_cast<int64_t>(params.size()))
          sf.fail(at, file, " has a tensor ", quoted(tname),
                  " that is not state.<parameter index>.<name> of one of the ", params.size(), " parameters");
        const Tensor& p = params[static_cast<size_t>(idx)];
        if (t.sizes() != p.sizes() || t.dtype() != p.dtype())
          sf.fail(at, file, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but parameter ", idx,
                  " is ", dtype_name(p.dtype()), " ", p.sizes());
      }
      sd.tensors = std::move(probe.tensors);
    }
    out.optimizers.push_back(std::move(sd));
  }
  const auto& scheds = sf.array(sf.member(st, "", "schedulers"), "schedulers", schedulers_.size(), "scheduler(s)");
  for (size_t i = 0; i < scheds.size(); ++i) {
    const std::string key = Fields::index("schedulers", i) + ".scalars";
    optim::StateDict sd;
    sd.scalars = checked_scalars(sf, sf.member(scheds[i], Fields::index("schedulers", i), "scalars"), key,
                                 schedulers_[i]->state_dict().scalars,
                                 [&](const std::string& k, const json::Value& x, const std::string& at) {
                                   if (k == "last_step") return static_cast<double>(sf.integer(x, at, 0, kMaxCount));
                                   if (k.rfind("base_lrs.", 0) == 0) return sf.number(x, at, 0, HUGE_VAL);
                                   return sf.number(x, at, -HUGE_VAL, HUGE_VAL);
                                 });
    out.schedulers.push_back(std::move(sd));
  }
  const json::Value& scaler = sf.member(st, "", "scaler");
  if (scaler_) {
    if (scaler.is_null())
      sf.fail("scaler", "the checkpoint has no GradScaler state (it was saved without mixed_precision fp16)");
    const std::map<std::string, double> current = scaler_->state_dict().scalars;
    optim::StateDict sd;
    sd.scalars = checked_scalars(sf, scaler, "scaler", current,
                                 [&](const std::string& k, const json::Value& x, const std::string& at) -> double {
                                   if (k == "scale") return sf.number(x, at, 0, HUGE_VAL, true);
                                   if (k == "growth_factor") {
                                     const double g = sf.number(x, at, 1, HUGE_VAL, true);
                                     return g;
                                   }
                                   if (k == "backoff_factor") {
                                     const double b = sf.number(x, at, 0, 1, true);
                                     if (b >= 1) sf.fail(at, "expected a number in (0, 1), got ", x.dump());
                                     return b;
                                   }
                                   if (k == "growth_interval")
                                     return static_cast<double>(sf.integer(x, at, 1, kMaxCount));
                                   if (k == "growth_tracker")
                                     return static_cast<double>(sf.integer(x, at, 0, kMaxCount));
                                   return sf.number(x, at, -HUGE_VAL, HUGE_VAL);
                                 });
    if (sd.scalars.count("growth_tracker") && sd.scalars.count("growth_interval") &&
        sd.scalars["growth_tracker"] >= sd.scalars["growth_interval"])
      sf.fail("scaler.growth_tracker", "must be less than growth_interval (", sd.scalars["growth_interval"], "), got ",
              sd.scalars["growth_tracker"]);
    out.scaler = std::move(sd);
  }
  const json::Value& custom = sf.object(sf.member(st, "", "custom"), "custom");
  for (const CustomState& c : custom_) {
    const json::Value* v = custom.find(c.name);
    if (!v) sf.fail(Fields::join("custom", c.name), "the checkpoint has no state registered under this name");
    out.custom.push_back(v);
  }

  // rank_<r>.json: this rank's own state. On another number of processes: the main process's
  // loader positions (every rank's are the same), this rank's random state when the saved run had
  // a rank r, and no rank may hold unsynchronised gradients.
  const bool same_world = saved_world == world_size_;
  auto global_batch = [&](const LoaderState& l) -> int64_t {
    const int64_t bs = l.loader->options().batch_size;
    return !l.iterable && l.sharded && s_.split_batches ? bs : bs * world_size_;
  };
  const int own = same_world ? rank_ : 0;
  if (!same_world)
    for (int64_t r = 0; r < saved_world; ++r) {
      const Fields gf((fs::path(dir) / rank_file(static_cast<int>(r))).string());
      const json::Value doc = parse(rank_file(static_cast<int>(r)), gf);
      if (gf.integer(gf.member(gf.object(doc, ""), "", "rank"), "rank", 0, kMaxCount) != r)
        gf.fail("rank", "the file belongs to another rank");
      const json::Value& g = gf.member(doc, "", "gradients");
      if (!g.is_array()) gf.fail("gradients", "expected an array");
      for (size_t i = 0; i < g.size(); ++i)
        if (!g.at(i).is_null())
          BRISK_THROW("Accelerator::load_state: '", dir, "' was saved inside a gradient accumulation window: rank ", r,
                      " of the ", saved_world,
                      " processes that saved it holds gradients its micro-steps accumulated "
                      "but had not synchronised yet, and such per-rank partial gradients cannot be redistributed "
                      "over ",
                      world_size_, " process(es). Resume it on ", saved_world,
                      " processes, or save where the gradients are synchronised (accelerator.sync_gradients() "
                      "true, after optimizer.step() and zero_grad()) to resume elsewhere (docs/checkpoints.md)");
      if (r == rank_) {
        const json::Value& gen = gf.member(doc, "", "default_generator");
        out.generator.seed = gf.uinteger(gf.member(gen, "default_generator", "seed"), "default_generator.seed");
        out.generator.offset = gf.uinteger(gf.member(gen, "default_generator", "offset"), "default_generator.offset");
      }
    }
  out.has_generator = rank_ < saved_world;
  const Fields rf((fs::path(dir) / rank_file(own)).string());
  out.rank = parse(rank_file(own), rf);
  const json::Value& rs = rf.object(out.rank, "");
  if (rf.integer(rf.member(rs, "", "rank"), "rank", 0, kMaxCount) != own)
    rf.fail("rank", "the file belongs to another rank");
  if (same_world) {
    const json::Value& gen = rf.member(rs, "", "default_generator");
    out.generator.seed = rf.uinteger(rf.member(gen, "default_generator", "seed"), "default_generator.seed");
    out.generator.offset = rf.uinteger(rf.member(gen, "default_generator", "offset"), "default_generator.offset");
  }
  const auto& loaders = rf.array(rf.member(rs, "", "data_loaders"), "data_loaders", loaders_.size(), "data loader(s)");
  for (size_t i = 0; i < loaders.size(); ++i) {
    const std::string key = Fields::index("data_loaders", i);
    const LoaderState& l = *loaders_[i];
    LoadedCheckpoint::Loader s;
    s.epoch = static_cast<uint64_t>(rf.integer(rf.member(loaders[i], key, "epoch"), key + ".epoch", 0, kMaxCount));
    const bool iterable = rf.boolean(rf.member(loaders[i], key, "iterable"), key + ".iterable");
    if (iterable != l.iterable)
      rf.fail(key + ".iterable", "the checkpoint's loader ", iterable ? "reads" : "does not read",
              " an IterableDataset but the prepared one ", l.iterable ? "does" : "does not");
    if (!same_world) {
      // The position counts this loader's batches: the same examples only with the same global batch.
      const json::Value* gb = loaders[i].find("global_batch");
      const int64_t saved_gb = gb ? rf.integer(*gb, key + ".global_batch", 1, kMaxCount) : -1;
      const int64_t pos = rf.integer(rf.member(loaders[i], key, "position"), key + ".position", 0, kMaxCount);
      if (saved_gb != global_batch(l)) {
        s.restart = pos > 0;
        s.position = pos;
        out.loaders.push_back(s);
        continue;
      }
    }
    const int64_t batches = l.iterable ? kMaxCount : static_cast<int64_t>(l.loader->batch_indices(s.epoch).size());
    s.position =
        rf.integer(rf.member(loaders[i], key, "position"), key + ".position", 0, same_world ? batches : kMaxCount);
    s.position = std::min(s.position, batches);
    out.loaders.push_back(s);
  }
  const auto& grads = rf.array(rf.member(rs, "", "gradients"), "gradients", models_.size(), "model(s)");
  for (size_t i = 0; i < grads.size(); ++i) {
    out.gradients.emplace_back();
    if (grads[i].is_null()) continue;
    const std::string key = Fields::index("gradients", i);
    std::map<std::string, Tensor> params;
    for (auto& [name, p] : models_[i]->model->named_parameters()) params.emplace(name, p);
    for (auto& [name, t] : checked_tensors(rf, folder, rf.string(grads[i], key), key, params, "parameter of the model"))
      out.gradients.back()[name] = t;
  }
}

std::string Accelerator::load_state(const std::string& dir) {
  auto span = trace_span("load_state", "checkpoint");
  fs::path path;
  if (dir.empty()) {
    // The newest complete checkpoint, as the main process sees it.
    const fs::path root = checkpoint_root();
    Tensor n = full({1}, -1.0, {.dtype = DType::I64});
    if (is_main_process()) {
      auto existing = numbered_checkpoints(root);
      for (auto it = existing.rbegin(); it != existing.rend(); ++it)
        if (accelerate::is_complete_checkpoint(it->second.string())) {
          n.data<int64_t>()[0] = it->first;
          break;
        }
    }
    if (world_size_ > 1) pg_->broadcast(n, {.root = 0});
    BRISK_CHECK(n.item<int64_t>() >= 0, "Accelerator::load_state: no complete checkpoint under '", root.string(), "'");
    path = root / ("checkpoint_" + std::to_string(n.item<int64_t>()));
  } else {
    path = dir;
  }

  // Everything is read and checked first, on every rank; only when every rank succeeded is
  // anything changed.
  LoadedCheckpoint ck;
  on_every_rank(pg_, world_size_, "Accelerator::load_state", [&] { read_checkpoint(path.string(), ck); });

  // zero3: a checkpoint of this job's own layout goes straight into this rank's shards; full
  // parameters (another layout or stage, an older format) are loaded into the gathered model and
  // written back into the shards. Every rank decides alike (from state.json and the layout).
  std::vector<FullParameters> gathered;
  for (size_t i = 0; i < models_.size(); ++i)
    if (ck.param_blocks[i].empty()) gathered.push_back(full_parameters(*models_[i]->model));
  for (size_t i = 0; i < models_.size(); ++i) {
    const bool direct = !ck.param_blocks[i].empty();
    models_[i]->model->load_state_dict(ck.models[i], !direct);
    if (direct) {
      const auto engines = param_engines(optimizers_, *models_[i]->model);
      const std::vector<Tensor> blocks = param_shards(*models_[i]->model, engines, world_size_).blocks;
      {
        NoGradGuard no_grad;
        for (size_t k = 0; k < blocks.size(); ++k) kernels::copy_(blocks[k], ck.param_blocks[i][k]);
      }
      // Units gathered now (load_state inside a full_parameters guard) show the loaded values.
      for (const accelerate::detail::ZeroEngine* e : engines) e->refresh_gathered();
    }
    for (auto& [name, p] : models_[i]->model->named_parameters()) {
      auto it = ck.gradients[i].find(name);
      if (it == ck.gradients[i].end()) {
        p.set_grad(Tensor());
        continue;
      }
      Tensor g = empty(p.sizes(), p.dtype(), p.device());
      kernels::copy_(g, it->second);
      p.set_grad(g);
    }
  }
  for (size_t i = 0; i < optimizers_.size(); ++i) optimizers_[i]->opt->load_state_dict(ck.optimizers[i]);
  // load_state_dict re-applies the rate; the gate must not interfere.
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(ck.schedulers[i]);
  if (scaler_) scaler_->load_state_dict(*ck.scaler);
  if (ck.has_generator) default_generator().set_state(ck.generator);
  // Each loader continues with the batch the saved run would have taken next.
  std::string restarted;
  for (size_t i = 0; i < loaders_.size(); ++i) {
    LoaderState& l = *loaders_[i];
    const uint64_t epoch = ck.loaders[i].epoch;
    const int64_t position = ck.loaders[i].position;
    if (ck.loaders[i].restart) {
      l.loader->set_epoch(epoch + 1);
      restarted += (restarted.empty() ? "" : ", ") + std::to_string(i);
      continue;
    }
    if (l.iterable) {
      // A stream cannot seek: a save in the middle of an epoch restarts that epoch.
      if (position > 0 && !l.at_end())
        print("Accelerator::load_state: data loader ", i,
              " reads an IterableDataset, which cannot resume mid-epoch;"
              " epoch ",
              epoch, " starts over");
      l.loader->set_epoch(position > 0 && l.at_end() ? epoch + 1 : epoch);
      continue;
    }
    const int64_t batches = static_cast<int64_t>(l.loader->batch_indices(epoch).size());
    if (position >= batches) {
      l.loader->set_epoch(epoch + 1);
    } else {
      l.loader->set_epoch(epoch);
      l.loader->set_start_batch(position);
    }
  }
  if (!restarted.empty() && is_main_process())
    std::cerr << "brisk: warning: Accelerator::load_state: the checkpoint was saved by " << ck.saved_world
              << " process(es) with another global batch (per-process batch x processes) than this job's "
              << world_size_ << "; data loader(s) " << restarted
              << " cannot continue mid-epoch and start the next epoch (the rest of the saved epoch is skipped; "
                 "docs/checkpoints.md)\n";
  for (size_t i = 0; i < custom_.size(); ++i) custom_[i].load(*ck.custom[i]);
  // The shuffling seed is part of the loaders' state.
  if (ck.seed) {
    s_.seed = *ck.seed;
    sh_->seed = s_.seed;
  }
  step_ = ck.step;
  resumed_ = true;
  return path.string();
}

void Accelerator::save_model(const nn::Module& model, const std::string& dir, const std::string& max_shard_size) {
  const int64_t limit = accelerate::parse_size(max_shard_size);
  FullParameters gathered = full_parameters(model);  // zero3: gathered on every rank (call it on every rank)
  if (!is_main_process()) return;
  const fs::path out = dir;
  fs::create_directories(out);
  nn::NamedTensors state = nn::remove_tied_duplicates(model.state_dict());
  std::vector<nn::NamedTensors> shards(1);
  int64_t bytes = 0, total = 0;
  for (auto& [name, t] : state) {
    const auto n = static_cast<int64_t>(t.nbytes());
    if (!shards.back().empty() && bytes + n > limit) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().emplace_back(name, t);
    bytes += n;
    total += n;
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (shards.size() == 1) {
    data::save_safetensors((out / "model.safetensors").string(), shards.front(), meta);
    return;
  }
  // Hugging Face's layout: model-00001-of-00003.safetensors ... and an index naming each tensor's file.
  json::Value weight_map = json::Value::object();
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    data::save_safetensors((out / name).string(), shards[i], meta);
    for (auto& [tname, t] : shards[i]) entries.emplace_back(tname, name);
  }
  std::sort(entries.begin(), entries.end());
  for (auto& [tname, file] : entries) weight_map.set(tname, file);
  json::Value index = json::Value::object();
  json::Value metadata = json::Value::object();
  metadata.set("total_size", total);
  index.set("metadata", metadata);
  index.set("weight_map", weight_map);
  write_atomic(out / "model.safetensors.index.json", index.dump(2) + "\n");
}

void Accelerator::save(const nn::NamedTensors& state, const std::string& path) {
  if (!is_main_process()) return;
  const fs::path p = path;
  if (!p.parent_path().empty()) fs::create_directories(p.parent_path());
  data::save_safetensors(path, nn::remove_tied_duplicates(state), {{"format", "pt"}});
}

}  // namespace brisk
