// The on-disk format of a checkpoint folder: file names, the manifest and its checksum, the
// numbered folders of automatic naming, and what a plain file name is (docs/checkpoints.md).
#include "checkpoint_format.h"

#include <algorithm>

#include "brisk/accelerate/accelerator.h"

namespace brisk::accelerate::detail {

namespace fs = std::filesystem;

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
std::string param_shard_file(size_t i, int rank) {
  return (i == 0 ? std::string("model") : "model_" + std::to_string(i)) + "_shard" + std::to_string(rank) +
         ".safetensors";
}

json::Value manifest_file_list(const std::map<std::string, ManifestEntry>& files) {
  json::Value list = json::Value::array();
  for (const auto& [name, e] : files) {
    json::Value f = json::Value::object();
    f.set("path", name);
    f.set("size", e.size);
    f.set("sha256", e.sha256);
    list.push_back(f);
  }
  return list;
}

std::string manifest_bytes(const std::map<std::string, ManifestEntry>& files) {
  json::Value list = manifest_file_list(files);
  json::Value m = json::Value::object();
  m.set("format", kManifestFormat);
  m.set("version", kManifestVersion);
  m.set("files", list);
  m.set("manifest_sha256", manifest_checksum(m));
  return m.dump(2) + "\n";
}

std::string manifest_checksum(const json::Value& manifest) {
  json::Value body = json::Value::object();
  for (const auto& [k, v] : manifest.items())
    if (k != "manifest_sha256") body.set(k, v);
  return sha256_hex(body.dump());
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

bool is_lower_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

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

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace brisk::accelerate::detail
