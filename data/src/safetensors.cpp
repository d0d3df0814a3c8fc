// safetensors writer (byte-identical to the reference implementation's output) and a
// validating reader that rejects every malformation with its own message.
#include "brisk/data/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>

#include "brisk/core/checked_size.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/util/fs.h"
#include "brisk/util/json.h"

namespace brisk::data {

namespace {

constexpr uint64_t kMaxHeader = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

// The reference crate sorts tensors by its Dtype enum (declared in increasing alignment:
// BOOL, U8, I8, F8*, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64), descending.
int reference_rank(DType t) {
  switch (t) {
    case DType::Bool:
      return 0;
    case DType::U8:
      return 1;
    case DType::F16:
      return 7;
    case DType::BF16:
      return 8;
    case DType::I32:
      return 9;
    case DType::F32:
      return 11;
    case DType::F64:
      return 12;
    case DType::I64:
      return 13;
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

std::string sys_error() {
  return std::strerror(errno);
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end() && it->second < tensors.size() && tensors[it->second].first == name)
    return &tensors[it->second].second;
  auto at_place = [&](size_t i) {
    auto e = index_.find(tensors[i].first);
    return e != index_.end() && e->second == i;
  };
  const bool current = it == index_.end() && index_.size() == tensors.size() &&
                       (tensors.empty() || (at_place(0) && at_place(tensors.size() - 1)));
  if (!current) {
    // `tensors` was edited since the index was built: search it.
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
  }
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const Tensor* t = find(name);
  BRISK_CHECK(t != nullptr, "SafetensorsFile::at: no tensor named \"", name, "\"");
  return *t;
}

void SafetensorsFile::reindex() {
  index_.clear();
  index_.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) index_.emplace(tensors[i].first, i);
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
  // Disjoint views of one buffer (an optimizer's flat state: one slot per parameter) are
  // independent tensors and are saved as such.
  auto extent = [](const Tensor& t) {
    const auto* begin = static_cast<const char*>(t.data_ptr());
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.size(d) > 1) last += (t.size(d) - 1) * std::abs(t.stride(d));
    return std::pair{begin, begin + (t.numel() == 0 ? 0 : (last + 1) * static_cast<int64_t>(t.element_size()))};
  };
  auto overlap = [&](const Tensor& a, const Tensor& b) {
    if (a.storage() != b.storage()) return false;
    const auto [a0, a1] = extent(a);
    const auto [b0, b1] = extent(b);
    return a0 < b1 && b0 < a1;
  };
  for (size_t i = 0; i < tensors.size(); ++i)
    for (size_t j = i + 1; j < tensors.size(); ++j)
      BRISK_CHECK(!overlap(tensors[i].second, tensors[j].second), "save_safetensors: tensors \"", tensors[i].first,
                  "\" and \"", tensors[j].first,
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
  io::write_file_atomic(path, safetensors_bytes(tensors, metadata), "save_safetensors");
}

namespace {

// An entry of the header: where a tensor's bytes are and what they hold.
struct Entry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// The text of the value that began at `start` and ends at the reader's position, for messages.
std::string excerpt(const json::Reader& r, size_t start) {
  std::string_view v = r.text().substr(start, r.offset() - start);
  if (v.size() <= 80) return std::string(v);
  return std::string(v.substr(0, 77)) + "...";
}

// Where the next value begins (after any whitespace).
size_t value_start(json::Reader& r) {
  r.next_type();
  return r.offset();
}

// Reads one tensor's {dtype, shape, data_offsets} object (any other field is skipped). The header
// is read value by value (never as a whole tree), so memory stays with what is kept: a name, a
// dtype, at most kMaxUntrustedDims sizes and two offsets per tensor.
Entry read_entry(json::Reader& r, std::string name, const std::string& who) {
  const std::string tensor = who + ": tensor \"" + name + "\"";
  BRISK_CHECK(r.next_type() == json::Type::Object, tensor, " must be described by an object, got ",
              json::type_name(r.next_type()));
  Entry e;
  e.name = std::move(name);
  bool have_dtype = false, have_shape = false, have_offsets = false;
  auto once = [&](bool& seen, const std::string& field) {
    BRISK_CHECK(!seen, tensor, " has a duplicated field \"", field, "\"");
    seen = true;
  };
  r.begin_object();
  std::string field, text;
  while (r.next_key(field)) {
    if (field == "dtype") {
      once(have_dtype, field);
      const size_t start = value_start(r);
      if (r.next_type() != json::Type::String) {
        r.skip_value();
        BRISK_THROW(tensor, " has a non-string dtype ", excerpt(r, start));
      }
      text.clear();
      r.read_string(text);
      BRISK_CHECK(dtype_from_safetensors(text, &e.dtype), tensor, " has unknown dtype \"", text,
                  "\" (brisk reads F64, F32, F16, BF16, I32, I64, U8, BOOL)");
    } else if (field == "shape") {
      once(have_shape, field);
      const size_t start = value_start(r);
      if (r.next_type() != json::Type::Array) {
        r.skip_value();
        BRISK_THROW(tensor, " has a shape that is not an array: ", excerpt(r, start));
      }
      r.begin_array();
      bool bad = false;
      size_t dims = 0;
      while (r.next_element()) {
        if (bad || r.next_type() != json::Type::Number) {
          bad = true;
          r.skip_value();
          continue;
        }
        const json::Value d = r.read_value();
        if (!d.is_integer() || d.as_double() < 0 || d.as_uint() > static_cast<uint64_t>(INT64_MAX)) {
          bad = true;
          continue;
        }
        // Past the limit only count, so that memory stays bounded and the error names the count.
        if (++dims <= kMaxUntrustedDims) e.shape.push_back(static_cast<int64_t>(d.as_uint()));
      }
      BRISK_CHECK(!bad, tensor, " has a bad shape ", excerpt(r, start), " (sizes must be non-negative integers)");
      BRISK_CHECK(dims <= kMaxUntrustedDims, tensor, ": shape has ", dims, " dims, more than the ", kMaxUntrustedDims,
                  " allowed");
    } else if (field == "data_offsets") {
      once(have_offsets, field);
      const size_t start = value_start(r);
      uint64_t offs[2] = {0, 0};
      size_t count = 0;
      bool bad = r.next_type() != json::Type::Array;
      if (bad) {
        r.skip_value();
      } else {
        r.begin_array();
        while (r.next_element()) {
          if (bad || count == 2 || r.next_type() != json::Type::Number) {
            bad = true;
            r.skip_value();
            continue;
          }
          const json::Value d = r.read_value();
          if (!d.is_integer() || d.as_double() < 0) {
            bad = true;
            continue;
          }
          offs[count++] = d.as_uint();
        }
      }
      BRISK_CHECK(!bad && count == 2, tensor, " has bad data_offsets ", excerpt(r, start),
                  " (expected [begin, end], non-negative integers)");
      e.begin = offs[0];
      e.end = offs[1];
    } else {
      r.skip_value();
    }
  }
  BRISK_CHECK(have_dtype && have_shape && have_offsets, tensor, " needs \"dtype\", \"shape\" and \"data_offsets\"");
  return e;
}

// The validated layout of a file: its entries in data order, its metadata, and where the data
// section begins.
struct Layout {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

// Parses and validates the header of a whole file of `size` bytes at `bytes`, and checks that the
// entries tile the data section and that BOOL data holds only 0 and 1.
Layout parse_layout(const char* bytes, uint64_t size, const std::string& who) {
  BRISK_CHECK(size >= 8, who, ": file is ", size, " bytes, smaller than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  BRISK_CHECK(n <= kMaxHeader, who, ": header length ", n, " exceeds the limit of ", kMaxHeader, " bytes");
  BRISK_CHECK(8 + n <= size, who, ": header length ", n, " runs past the end of the file (", size, " bytes)");
  const std::string_view text(bytes + 8, n);
  size_t bad = 0;
  BRISK_CHECK(json::valid_utf8(text, &bad), who, ": header is not valid UTF-8 (byte ", bad, " of the header)");

  // The JSON syntax first (a pass that keeps nothing), so that a syntax error is reported as such
  // wherever it is; then the entries, value by value.
  try {
    json::Reader check(text);
    check.skip_value();
    check.finish();
  } catch (const Error& e) {
    BRISK_THROW(who, ": header is not valid JSON: ", e.message());
  }
  Layout out;
  std::vector<Entry>& entries = out.entries;
  {
    json::Reader r(text);
    BRISK_CHECK(r.next_type() == json::Type::Object, who, ": header must be a JSON object, got ",
                json::type_name(r.next_type()));
    bool have_metadata = false;
    r.begin_object();
    for (std::string key; r.next_key(key);) {
      if (key != kMetadataKey) {
        entries.push_back(read_entry(r, std::move(key), who));
        continue;
      }
      BRISK_CHECK(!have_metadata, who, ": duplicate \"", kMetadataKey, "\"");
      have_metadata = true;
      BRISK_CHECK(r.next_type() == json::Type::Object, who, ": \"", kMetadataKey,
                  "\" must be an object of strings, got ", json::type_name(r.next_type()));
      r.begin_object();
      for (std::string mk; r.next_key(mk);) {
        BRISK_CHECK(r.next_type() == json::Type::String, who, ": metadata \"", mk, "\" must be a string, got ",
                    json::type_name(r.next_type()));
        auto [it, fresh] = out.metadata.try_emplace(std::move(mk));
        BRISK_CHECK(fresh, who, ": duplicated metadata key \"", it->first, "\"");
        r.read_string(it->second);
      }
    }
    r.finish();
  }

  // Tensor names are unique (checked by sorting, in O(n log n)).
  {
    std::vector<const Entry*> by_name(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) by_name[i] = &entries[i];
    std::sort(by_name.begin(), by_name.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
    for (size_t i = 1; i < by_name.size(); ++i)
      BRISK_CHECK(by_name[i]->name != by_name[i - 1]->name, who, ": duplicate tensor name \"", by_name[i]->name, "\"");
  }

  // Files may list tensors in any order; their data must tile [0, total) exactly.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
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

  out.data_start = 8 + n;
  const char* data = bytes + 8 + n;
  for (const Entry& e : entries) {
    if (e.dtype == DType::Bool) {
      // Any other byte would be a bool holding neither value (undefined behaviour in C++).
      const auto* p = reinterpret_cast<const unsigned char*>(data + e.begin);
      const auto* bad = std::find_if(p, p + (e.end - e.begin), [](unsigned char b) { return b > 1; });
      BRISK_CHECK(bad == p + (e.end - e.begin), who, ": tensor \"", e.name, "\" (BOOL) has byte ", int{*bad},
                  " at element ", bad - p, "; BOOL bytes must be 0 or 1");
    }
  }
  return out;
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what) {
  Layout layout = parse_layout(bytes.data(), bytes.size(), "load_safetensors: " + what);
  SafetensorsFile out;
  out.metadata = std::move(layout.metadata);
  const char* data = bytes.data() + layout.data_start;
  out.tensors.reserve(layout.entries.size());
  for (Entry& e : layout.entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out.tensors.emplace_back(std::move(e.name), std::move(t));
    Shape().swap(e.shape);  // what is handed over is freed as it goes: the peak is one copy
  }
  out.reindex();
  return out;
}

namespace {

// A read-only file mapped copy-on-write, unmapped when the last tensor on it is freed.
struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, size);
  }
};

// Hands the bytes of one mapped tensor to the StorageImpl being constructed (a StorageImpl
// takes its bytes from an allocator), and drops its hold on the mapping when they are freed.
// Allocators are never deleted (a storage keeps a raw pointer to its allocator): an idle one
// (no mapped bytes handed out) is reused for the next file. After release() a storage allocates
// again from the CPU allocator, and those bytes go back there.
class MappedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (next_) return std::exchange(next_, nullptr);  // set by wrap() on this thread, just before
    return cpu_allocator()->allocate(nbytes);
  }
  void deallocate(void* ptr, size_t nbytes) override {
    const auto* p = static_cast<const char*>(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    if (map_ && p >= static_cast<const char*>(map_->base) && p < static_cast<const char*>(map_->base) + map_->size) {
      if (--live_ == 0) map_.reset();
      return;
    }
    cpu_allocator()->deallocate(ptr, nbytes);
  }
  Device device() const override { return kCPU; }

  // A storage of `nbytes` at `p` inside the mapping.
  Storage wrap(const char* p, size_t nbytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++live_;
    }
    next_ = const_cast<char*>(p);
    return std::make_shared<StorageImpl>(nbytes, kCPU, MemoryCategory::Activations, this);
  }

  // After a file's tensors are made: a mapping none of them uses is let go at once.
  void done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_ == 0) map_.reset();
  }

  // An idle allocator from the pool (or a new one) now serving `map`.
  static MappedAllocator* for_mapping(std::shared_ptr<Mapping> map) {
    static std::mutex pool_mu;
    static std::vector<std::unique_ptr<MappedAllocator>> pool;
    std::lock_guard<std::mutex> pool_lock(pool_mu);
    MappedAllocator* a = nullptr;
    for (auto& candidate : pool) {
      std::lock_guard<std::mutex> lock(candidate->mu_);
      if (candidate->live_ == 0 && !candidate->map_) {
        a = candidate.get();
        break;
      }
    }
    if (!a) a = pool.emplace_back(std::make_unique<MappedAllocator>()).get();
    std::lock_guard<std::mutex> lock(a->mu_);
    a->map_ = std::move(map);
    return a;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<Mapping> map_;
  int64_t live_ = 0;
  static thread_local char* next_;
};

thread_local char* MappedAllocator::next_ = nullptr;

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string who = "load_safetensors: " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BRISK_CHECK(fd >= 0, "load_safetensors: cannot open ", path, ": ", sys_error());
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const std::string stat_error = stat_ok ? "" : sys_error();
  auto map = std::make_shared<Mapping>();
  if (stat_ok && S_ISREG(st.st_mode) && st.st_size > 0) {
    map->size = static_cast<size_t>(st.st_size);
    map->base = ::mmap(nullptr, map->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  const std::string map_error = map->base == MAP_FAILED ? sys_error() : "";
  ::close(fd);
  BRISK_CHECK(stat_ok, "load_safetensors: cannot stat ", path, ": ", stat_error);
  BRISK_CHECK(S_ISREG(st.st_mode), "load_safetensors: ", path, " is not a regular file");
  BRISK_CHECK(st.st_size == 0 || map->base != MAP_FAILED, "load_safetensors: cannot map ", path, ": ", map_error);
  const char* bytes = map->base == MAP_FAILED ? "" : static_cast<const char*>(map->base);
  Layout layout = parse_layout(bytes, map->size, who);

  SafetensorsFile out;
  out.metadata = std::move(layout.metadata);
  out.tensors.reserve(layout.entries.size());
  const char* data = bytes + layout.data_start;
  MappedAllocator* alloc = nullptr;
  for (Entry& e : layout.entries) {
    const size_t nbytes = e.end - e.begin;
    const char* p = data + e.begin;
    Tensor t;
    if (nbytes == 0 || reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) != 0) {
      t = empty(e.shape, e.dtype);  // nothing to map, or misaligned for its type: a copy
      if (nbytes > 0) std::memcpy(t.data_ptr(), p, nbytes);
    } else {
      if (!alloc) alloc = MappedAllocator::for_mapping(map);
      auto impl = std::make_shared<TensorImpl>();
      impl->storage = alloc->wrap(p, nbytes);
      impl->strides = contiguous_strides(e.shape);
      impl->sizes = std::move(e.shape);
      impl->dtype = e.dtype;
      t = Tensor(std::move(impl));
    }
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  if (alloc) alloc->done();
  out.reindex();
  return out;
}

void save_safetensors(const std::string& path, const nn::Module& module,
                      const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, nn::remove_tied_duplicates(module.state_dict()), metadata);
}

nn::LoadResult load_safetensors_into(nn::Module& module, const std::string& path, bool strict) {
  const SafetensorsFile file = load_safetensors(path);
  try {
    return module.load_state_dict(file.tensors, strict);
  } catch (const Error& e) {
    BRISK_THROW("load_safetensors_into: ", path, ": ", e.message());
  }
}

}  // namespace brisk::data
