// safetensors writer (byte-identical to the reference implementation's output) and a
// validating reader that rejects every malformation with its own message.
#include "brisk/data/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "brisk/core/checked_size.h"
#include "brisk/data/json.h"
#include "brisk/kernels/elementwise.h"

namespace brisk::data {

namespace {

constexpr uint64_t kMaxHeader = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

// The reference crate sorts tensors by its Dtype enum (declared in increasing alignment:
// BOOL, U8, I8, F8*, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64), descending.
int reference_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::U8: return 1;
    case DType::F16: return 7;
    case DType::BF16: return 8;
    case DType::I32: return 9;
    case DType::F32: return 11;
    case DType::F64: return 12;
    case DType::I64: return 13;
  }
  return -1;
}

bool dtype_from_safetensors(const std::string& name, DType* out) {
  for (const DTypeTraits& t : kDTypeTable)
    if (name == t.safetensors_name) {
      *out = t.dtype;
      return true;
    }
  return false;
}

void put_le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::string sys_error() { return std::strerror(errno); }

}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  BRISK_THROW("SafetensorsFile::at: no tensor named \"", name, "\"");
}

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    BRISK_CHECK(t.defined(), "save_safetensors: tensor \"", name, "\" is undefined");
    BRISK_CHECK(name != kMetadataKey, "save_safetensors: \"", kMetadataKey, "\" is reserved and cannot name a tensor");
    BRISK_CHECK(seen.insert(name).second, "save_safetensors: duplicate tensor name \"", name, "\"");
  }
  // Like the reference implementation, refuse tensors that share memory (tied weights): the file
  // would hold two copies that load back untied. nn::remove_tied_duplicates keeps one name each.
  for (size_t i = 0; i < tensors.size(); ++i)
    for (size_t j = i + 1; j < tensors.size(); ++j)
      BRISK_CHECK(tensors[i].second.storage() != tensors[j].second.storage(), "save_safetensors: tensors \"",
                  tensors[i].first, "\" and \"", tensors[j].first,
                  "\" share memory (tied weights); save one name per shared tensor, e.g. with "
                  "nn::remove_tied_duplicates(module.state_dict())");
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& entry : tensors) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const int ra = reference_rank(a->second.dtype()), rb = reference_rank(b->second.dtype());
    return ra != rb ? ra > rb : a->first < b->first;
  });

  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value meta = json::Value::object();
    for (const auto& [k, v] : metadata) {
      BRISK_CHECK(json::valid_utf8(k) && json::valid_utf8(v), "save_safetensors: metadata entry \"", k,
                  "\" is not valid UTF-8");
      meta.items().emplace_back(k, json::Value(v));
    }
    header.items().emplace_back(kMetadataKey, std::move(meta));
  }
  uint64_t offset = 0;
  for (const auto* entry : order) {
    const Tensor& t = entry->second;
    BRISK_CHECK(json::valid_utf8(entry->first), "save_safetensors: tensor name is not valid UTF-8");
    json::Value shape = json::Value::array();
    for (int64_t s : t.sizes()) shape.push_back(json::Value(s));
    const uint64_t n = t.nbytes();
    json::Value info = json::Value::object();
    info.set("dtype", json::Value(traits(t.dtype()).safetensors_name));
    info.set("shape", std::move(shape));
    info.set("data_offsets", json::Value::array({json::Value(offset), json::Value(offset + n)}));
    header.items().emplace_back(entry->first, std::move(info));
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  put_le64(out, text.size());
  out += text;
  for (const auto* entry : order) {
    Tensor t = entry->second;
    if (t.numel() == 0) continue;
    if (t.device() != kCPU) t = kernels::to_device(t, kCPU);
    t = kernels::contiguous(t);
    out.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string bytes = safetensors_bytes(tensors, metadata);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BRISK_CHECK(fd >= 0, "save_safetensors: cannot create ", tmp, ": ", sys_error());
  auto fail = [&](const std::string& what) {
    const std::string err = sys_error();
    ::close(fd);
    ::unlink(tmp.c_str());
    BRISK_THROW("save_safetensors: ", what, " ", tmp, " failed: ", err);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("writing");
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) fail("fsync of");
  if (::close(fd) != 0) {
    const std::string err = sys_error();
    ::unlink(tmp.c_str());
    BRISK_THROW("save_safetensors: closing ", tmp, " failed: ", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = sys_error();
    ::unlink(tmp.c_str());
    BRISK_THROW("save_safetensors: renaming ", tmp, " to ", path, " failed: ", err);
  }
  // Make the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what) {
  const std::string who = "load_safetensors: " + what;
  const uint64_t size = bytes.size();
  BRISK_CHECK(size >= 8, who, ": file is ", size, " bytes, smaller than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  BRISK_CHECK(n <= kMaxHeader, who, ": header length ", n, " exceeds the limit of ", kMaxHeader, " bytes");
  BRISK_CHECK(8 + n <= size, who, ": header length ", n, " runs past the end of the file (", size, " bytes)");
  const std::string_view text(bytes.data() + 8, n);
  size_t bad = 0;
  BRISK_CHECK(json::valid_utf8(text, &bad), who, ": header is not valid UTF-8 (byte ", bad, " of the header)");
  json::Value header;
  try {
    header = json::parse(text, {.allow_duplicate_keys = true});
  } catch (const Error& e) {
    BRISK_THROW(who, ": header is not valid JSON: ", e.message());
  }
  BRISK_CHECK(header.is_object(), who, ": header must be a JSON object, got ", json::type_name(header.type()));

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  SafetensorsFile out;
  std::vector<Entry> entries;
  std::set<std::string> names;
  bool have_metadata = false;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      BRISK_CHECK(!have_metadata, who, ": duplicate \"", kMetadataKey, "\"");
      have_metadata = true;
      BRISK_CHECK(value.is_object(), who, ": \"", kMetadataKey, "\" must be an object of strings, got ",
                  json::type_name(value.type()));
      for (const auto& [mk, mv] : value.items()) {
        BRISK_CHECK(mv.is_string(), who, ": metadata \"", mk, "\" must be a string, got ", json::type_name(mv.type()));
        BRISK_CHECK(out.metadata.emplace(mk, mv.as_string()).second, who, ": duplicated metadata key \"", mk, "\"");
      }
      continue;
    }
    BRISK_CHECK(names.insert(key).second, who, ": duplicate tensor name \"", key, "\"");
    BRISK_CHECK(value.is_object(), who, ": tensor \"", key, "\" must be described by an object, got ",
                json::type_name(value.type()));
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      const size_t count = static_cast<size_t>(
          std::count_if(value.items().begin(), value.items().end(), [&](const auto& kv) { return kv.first == field; }));
      BRISK_CHECK(count <= 1, who, ": tensor \"", key, "\" has a duplicated field \"", field, "\"");
    }
    const json::Value* dt = value.find("dtype");
    const json::Value* sh = value.find("shape");
    const json::Value* off = value.find("data_offsets");
    BRISK_CHECK(dt && sh && off, who, ": tensor \"", key, "\" needs \"dtype\", \"shape\" and \"data_offsets\"");
    BRISK_CHECK(dt->is_string(), who, ": tensor \"", key, "\" has a non-string dtype ", dt->dump());
    Entry e{key, DType::F32, {}, 0, 0};
    BRISK_CHECK(dtype_from_safetensors(dt->as_string(), &e.dtype), who, ": tensor \"", key, "\" has unknown dtype \"",
                dt->as_string(), "\" (brisk reads F64, F32, F16, BF16, I32, I64, U8, BOOL)");
    BRISK_CHECK(sh->is_array(), who, ": tensor \"", key, "\" has a shape that is not an array: ", sh->dump());
    for (const json::Value& d : sh->as_array()) {
      BRISK_CHECK(d.is_integer() && d.as_double() >= 0 && d.as_uint() <= static_cast<uint64_t>(INT64_MAX), who,
                  ": tensor \"", key, "\" has a bad shape ", sh->dump(), " (sizes must be non-negative integers)");
      e.shape.push_back(static_cast<int64_t>(d.as_uint()));
    }
    BRISK_CHECK(off->is_array() && off->size() == 2 && (*off)[0].is_integer() && (*off)[0].as_double() >= 0 &&
                    (*off)[1].is_integer() && (*off)[1].as_double() >= 0,
                who, ": tensor \"", key, "\" has bad data_offsets ", off->dump(),
                " (expected [begin, end], non-negative integers)");
    e.begin = (*off)[0].as_uint();
    e.end = (*off)[1].as_uint();
    entries.push_back(std::move(e));
  }

  // Files may list tensors in any order; their data must tile [0, total) exactly.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t expected = 0;
  std::string prev = "";
  for (const Entry& e : entries) {
    const std::string offs = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    BRISK_CHECK(e.end >= e.begin, who, ": tensor \"", e.name, "\" has data_offsets ", offs,
                " that are not sorted (end before begin)");
    BRISK_CHECK(e.begin >= expected, who, ": tensor \"", e.name, "\" has data_offsets ", offs, " overlapping \"", prev,
                "\", which ends at ", expected);
    BRISK_CHECK(e.begin == expected, who, ": tensor \"", e.name, "\" has data_offsets ", offs,
                " that are not contiguous: expected it to begin at ", expected);
    const auto nbytes = static_cast<uint64_t>(
        checked_nbytes(e.shape, static_cast<int64_t>(dtype_size(e.dtype)), who + ": tensor \"" + e.name + "\""));
    BRISK_CHECK(e.end - e.begin == nbytes, who, ": tensor \"", e.name, "\" has data_offsets ", offs, " (",
                e.end - e.begin, " bytes) but shape ", e.shape, " of ", traits(e.dtype).safetensors_name, " needs ",
                nbytes, " bytes");
    expected = e.end;
    prev = e.name;
  }
  const uint64_t data_bytes = size - 8 - n;
  BRISK_CHECK(expected == data_bytes, who, ": the tensors' data ends at byte ", expected, " of the data section but ",
              "the file has ", data_bytes, " data bytes", expected < data_bytes ? " (trailing bytes)" : " (truncated)");

  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    if (e.dtype == DType::Bool) {
      // Any other byte would be a bool holding neither value (undefined behaviour in C++).
      const auto* p = reinterpret_cast<const unsigned char*>(data + e.begin);
      const auto* bad = std::find_if(p, p + (e.end - e.begin), [](unsigned char b) { return b > 1; });
      BRISK_CHECK(bad == p + (e.end - e.begin), who, ": tensor \"", e.name, "\" (BOOL) has byte ", int{*bad},
                  " at element ", bad - p, "; BOOL bytes must be 0 or 1");
    }
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  BRISK_CHECK(f.good(), "load_safetensors: cannot open ", path, ": ", sys_error());
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  BRISK_CHECK(!f.bad(), "load_safetensors: reading ", path, " failed: ", sys_error());
  return parse_safetensors(bytes, path);
}

}  // namespace brisk::data
