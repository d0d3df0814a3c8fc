// A model folder's safetensors weights, one file or sharded with an index: the reader that checks
// every name the index gives before opening it, and the deterministic writer.
#include "brisk/data/safetensors_folder.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "brisk/util/json.h"

namespace brisk::data {

namespace fs = std::filesystem;

namespace {

constexpr uintmax_t kMaxIndexBytes = 100'000'000;  // the safetensors header limit: an index is far smaller

std::string read_small_file(const fs::path& path, const char* who) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  BRISK_CHECK(!ec, who, ": cannot read ", path.string(), ": ", ec.message());
  BRISK_CHECK(size <= kMaxIndexBytes, who, ": ", path.string(), " is ", size, " bytes; an index over ", kMaxIndexBytes,
              " bytes is refused");
  std::ifstream f(path, std::ios::binary);
  BRISK_CHECK(f, who, ": cannot open ", path.string());
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return text;
}

// Whether `p` (canonical) lies inside the folder `dir` (canonical), at any depth.
bool inside(const fs::path& p, const fs::path& dir) {
  const fs::path rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

// Checks the file name `name` that the index at `index` gives, and returns its path in `dir`.
fs::path shard_path(const fs::path& dir, const std::string& name, const std::string& index) {
  const bool plain = !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
                     name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
  BRISK_CHECK(plain, "load_safetensors_folder: ", index, " names the shard \"", name,
              "\", which is not a file name in the folder (a path, \"..\" or an absolute name); shards must lie "
              "beside the index");
  fs::path p = dir / name;
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(p, ec);
  BRISK_CHECK(fs::exists(link), "load_safetensors_folder: the shard ", name, " that ", index, " names is missing from ",
              dir.string());
  if (fs::is_symlink(link)) {
    const fs::path target = fs::weakly_canonical(p, ec);
    BRISK_CHECK(!ec && fs::exists(target), "load_safetensors_folder: the shard ", name, " in ", dir.string(),
                " is a symbolic link to a missing file");
    const fs::path home = fs::canonical(dir);
    // The Hugging Face cache keeps models--<org>--<name>/snapshots/<revision>/<file> as links to
    // ../../blobs/<hash>: the one place outside the folder a shard may live.
    const bool hf_cache =
        home.parent_path().filename() == "snapshots" && inside(target, home.parent_path().parent_path() / "blobs");
    BRISK_CHECK(inside(target, home) || hf_cache, "load_safetensors_folder: the shard ", name, " in ", dir.string(),
                " is a symbolic link to ", target.string(),
                ", outside the folder; shards must lie in the folder (or in the Hugging Face cache's blobs folder of "
                "the same model)");
  }
  BRISK_CHECK(fs::is_regular_file(p, ec), "load_safetensors_folder: the shard ", name, " in ", dir.string(),
              " is not a regular file");
  return p;
}

// The shard names of an index in sorted order, and each tensor's file.
struct Index {
  std::vector<std::string> files;
  std::unordered_map<std::string, std::string> file_of;
};

Index read_index(const fs::path& path) {
  const std::string where = path.string();
  json::Value doc;
  try {
    doc = json::parse(read_small_file(path, "load_safetensors_folder"));
  } catch (const Error& e) {
    BRISK_THROW("load_safetensors_folder: ", where, " is not valid JSON: ", e.message());
  }
  BRISK_CHECK(doc.is_object(), "load_safetensors_folder: ", where, " must hold a JSON object, got ",
              json::type_name(doc.type()));
  if (const json::Value* meta = doc.find("metadata")) {
    BRISK_CHECK(meta->is_object() || meta->is_null(), "load_safetensors_folder: ", where,
                ": \"metadata\" must be an object, got ", meta->dump());
    const json::Value* total = meta->is_object() ? meta->find("total_size") : nullptr;
    BRISK_CHECK(!total || (total->is_number() && total->as_double() >= 0), "load_safetensors_folder: ", where,
                ": metadata.total_size must be a non-negative number, got ", total ? total->dump() : "");
  }
  const json::Value* map = doc.find("weight_map");
  BRISK_CHECK(map && map->is_object(), "load_safetensors_folder: ", where,
              " has no \"weight_map\" object (tensor name -> shard file)");
  Index index;
  std::set<std::string> files;
  for (const auto& [tensor, file] : map->items()) {
    BRISK_CHECK(file.is_string(), "load_safetensors_folder: ", where, ": weight_map[\"", tensor,
                "\"] must be a file name, got ", file.dump());
    index.file_of[tensor] = file.as_string();
    files.insert(file.as_string());
  }
  index.files.assign(files.begin(), files.end());
  return index;
}

// The error for a folder without safetensors weights: pickles are named and refused.
[[noreturn]] void no_safetensors(const fs::path& dir) {
  std::vector<std::string> pickles, others;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt" || ext == ".pkl" ||
        name == "pytorch_model.bin.index.json")
      pickles.push_back(name);
    else if (name == "tf_model.h5" || name == "flax_model.msgpack")
      others.push_back(name);
  }
  std::sort(pickles.begin(), pickles.end());
  std::sort(others.begin(), others.end());
  std::ostringstream os;
  os << "load_safetensors_folder: " << dir.string() << " has no " << kSafetensorsWeightsName << " and no "
     << kSafetensorsIndexName;
  if (!pickles.empty()) {
    os << "; it holds pickled PyTorch weights (" << ::brisk::detail::str_cat(pickles)
       << "), which brisk refuses and never opens: unpickling a file runs whatever code it carries. Convert them "
          "to safetensors once, in Python, from a copy you trust: `AutoModel.from_pretrained(dir)."
          "save_pretrained(dir, safe_serialization=True)` with transformers (tied weights handled), or "
          "safetensors.torch.save_file(torch.load(file, weights_only=True), \"model.safetensors\", "
          "{\"format\": \"pt\"}) (docs/pretrained.md)";
  } else if (!others.empty()) {
    os << "; it holds " << ::brisk::detail::str_cat(others)
       << " (TensorFlow or Flax weights), which brisk does not read: save the model with transformers' "
          "save_pretrained(dir, safe_serialization=True) first (docs/pretrained.md)";
  } else {
    os << " (is it a Hugging Face model folder?)";
  }
  BRISK_THROW(os.str());
}

void load_shards(const fs::path& dir, const fs::path& index_path, SafetensorsFolder& out) {
  const Index index = read_index(index_path);
  const std::string where = index_path.string();
  BRISK_CHECK(!index.files.empty(), "load_safetensors_folder: ", where, " names no shard (empty weight_map)");
  std::unordered_map<std::string, std::string> seen;  // tensor -> the shard it was found in
  for (const std::string& file : index.files) {
    const SafetensorsFile shard = load_safetensors(shard_path(dir, file, where).string());
    for (const auto& [name, t] : shard) {
      auto listed = index.file_of.find(name);
      BRISK_CHECK(listed != index.file_of.end(), "load_safetensors_folder: the shard ", file, " holds \"", name,
                  "\", which ", where, " does not list; the index and the shards disagree");
      BRISK_CHECK(listed->second == file, "load_safetensors_folder: \"", name, "\" is in the shard ", file, " but ",
                  where, " places it in ", listed->second, "; the index and the shards disagree");
      BRISK_CHECK(seen.emplace(name, file).second, "load_safetensors_folder: \"", name, "\" is in both ", seen[name],
                  " and ", file);
      out.tensors.emplace_back(name, t);
      out.file_of.push_back(file);
    }
    out.files.push_back(file);
  }
  for (const auto& [name, file] : index.file_of)
    BRISK_CHECK(seen.count(name), "load_safetensors_folder: ", where, " places \"", name, "\" in ", file,
                ", which does not hold it");
  out.sharded = true;
}

// model-00001-of-00003.safetensors: the names save_safetensors_folder gives shards.
bool is_shard_name(const std::string& name) {
  const std::string shape = "model-#####-of-#####.safetensors";
  if (name.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == '#' ? (name[i] < '0' || name[i] > '9') : name[i] != shape[i]) return false;
  return true;
}

}  // namespace

SafetensorsFolder load_safetensors_folder(const std::string& dir_name) {
  const fs::path dir = dir_name;
  std::error_code ec;
  BRISK_CHECK(fs::is_directory(dir, ec), "load_safetensors_folder: ", dir_name, " is not a folder");
  SafetensorsFolder out;
  const fs::path single = dir / kSafetensorsWeightsName;
  if (fs::exists(single, ec)) {
    SafetensorsFile file = load_safetensors(single.string());
    out.tensors = std::move(file.tensors);
    out.file_of.assign(out.tensors.size(), kSafetensorsWeightsName);
    out.files = {kSafetensorsWeightsName};
    return out;
  }
  const fs::path index = dir / kSafetensorsIndexName;
  if (!fs::exists(index, ec)) no_safetensors(dir);
  load_shards(dir, index, out);
  return out;
}

std::vector<std::string> save_safetensors_folder(const std::string& dir_name, const NamedTensors& tensors,
                                                 const SafetensorsFolderOptions& options) {
  const fs::path dir = dir_name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  BRISK_CHECK(!ec, "save_safetensors_folder: cannot create the folder ", dir_name, ": ", ec.message());
  std::set<std::string> names;
  for (const auto& [name, t] : tensors)
    BRISK_CHECK(names.insert(name).second, "save_safetensors_folder: the tensor name \"", name, "\" appears twice");
  // Shards filled in the given order, a new one when the next tensor would pass the limit.
  std::vector<NamedTensors> shards(1);
  int64_t bytes = 0, total = 0;
  for (const auto& [name, t] : tensors) {
    const auto n = static_cast<int64_t>(t.nbytes());
    if (options.max_shard_size > 0 && !shards.back().empty() && bytes + n > options.max_shard_size) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().emplace_back(name, t);
    bytes += n;
    total += n;
  }
  std::vector<std::string> written;
  if (shards.size() == 1) {
    save_safetensors((dir / kSafetensorsWeightsName).string(), shards.front(), options.metadata);
    written.emplace_back(kSafetensorsWeightsName);
  } else {
    std::vector<std::pair<std::string, std::string>> entries;  // (tensor, file)
    for (size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      save_safetensors((dir / name).string(), shards[i], options.metadata);
      written.emplace_back(name);
      for (const auto& [tensor, t] : shards[i]) entries.emplace_back(tensor, name);
    }
    std::sort(entries.begin(), entries.end());
    json::Value weight_map = json::Value::object();
    for (auto& [tensor, file] : entries) weight_map.set(tensor, file);
    json::Value metadata = json::Value::object();
    metadata.set("total_size", total);
    json::Value index = json::Value::object();
    index.set("metadata", metadata);
    index.set("weight_map", weight_map);
    io::write_file_atomic((dir / kSafetensorsIndexName).string(), index.dump(2) + "\n", "save_safetensors_folder");
    written.emplace_back(kSafetensorsIndexName);
  }
  // An earlier save's weights would be read instead of (model.safetensors wins over an index) or
  // beside these ones: remove them, now that the new files are complete.
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool weights = name == kSafetensorsWeightsName || name == kSafetensorsIndexName || is_shard_name(name);
    if (weights && std::find(written.begin(), written.end(), name) == written.end()) stale.push_back(entry.path());
  }
  for (const fs::path& p : stale) {
    std::error_code rm;
    fs::remove(p, rm);
    BRISK_CHECK(!rm, "save_safetensors_folder: cannot remove the earlier save's ", p.string(), ": ", rm.message());
  }
  io::fsync_dir(dir_name, "save_safetensors_folder");
  return written;
}

}  // namespace brisk::data
