// Internal: the on-disk format of a checkpoint folder (docs/checkpoints.md): the names of its
// files, the versions and limits a reader holds them to, and the manifest that lists every file
// with its size and SHA-256 and makes the folder complete.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "brisk/util/json.h"

namespace brisk::accelerate::detail {

inline constexpr const char* kManifest = "manifest.json";
inline constexpr const char* kState = "state.json";
inline constexpr const char* kFormat = "brisk-checkpoint";
inline constexpr const char* kManifestFormat = "brisk-checkpoint-manifest";
// A zero3 parameter shard file's metadata "format" (checkpoint_param_shards.cpp).
inline constexpr const char* kParamShardFormat = "brisk-zero3-parameter-shard";
// state.json's version. 2: what differs between ranks (random state, data loader positions,
// unsynchronised gradients) is in per-rank files; version 1 kept the main process's gradients only.
// 3: under zero3 each rank writes its shard of the parameters (the model file holds the rest);
// version 2's zero3 model file held the full parameters, and is still read.
inline constexpr int kVersion = 3;
inline constexpr int kOldestVersion = 2;
inline constexpr int kManifestVersion = 1;
// The JSON files of a checkpoint are small (kilobytes; a manifest ~150 bytes per file): anything
// bigger than 16 MiB is refused before it is read (a parsed JSON value takes many times its text).
inline constexpr int64_t kMaxJsonBytes = int64_t{16} << 20;
// The largest file size a manifest may list (1 PiB).
inline constexpr int64_t kMaxFileBytes = int64_t{1} << 50;
// Step counts, epochs, positions: integers that a double holds exactly.
inline constexpr int64_t kMaxCount = int64_t{1} << 53;

// The files of a checkpoint; `i` counts the prepared models or optimizers from 0.
std::string model_file(size_t i);                      // model.safetensors, model_<i>.safetensors
std::string gradients_file(size_t i, int rank);        // gradients[_<i>]_rank<r>.safetensors
std::string optimizer_file(size_t i);                  // optimizer[_<i>].safetensors
std::string optimizer_shard_file(size_t i, int rank);  // optimizer[_<i>]_shard<r>.safetensors (sharded optimizers)
std::string param_shard_file(size_t i, int rank);      // model[_<i>]_shard<r>.safetensors (zero3)
std::string rank_file(int rank);                       // rank_<r>.json

// One file as the manifest lists it.
struct ManifestEntry {
  int64_t size = 0;
  std::string sha256;  // 64 lowercase hex digits
};
// The files as the manifest's "files" list names them: [{path, size, sha256}, ...] by name.
json::Value manifest_file_list(const std::map<std::string, ManifestEntry>& files);
// The manifest's bytes for these files (by name): format, version, files and the manifest's own
// checksum, indented as a reader demands.
std::string manifest_bytes(const std::map<std::string, ManifestEntry>& files);
// The manifest's own checksum: SHA-256 of its compact JSON without the checksum field.
std::string manifest_checksum(const json::Value& manifest);

// checkpoint_<n> folders under root, by n.
std::vector<std::pair<int64_t, std::filesystem::path>> numbered_checkpoints(const std::filesystem::path& root);

bool is_lower_hex64(const std::string& s);
// Why `name` is not a plain file name inside the checkpoint folder ("" when it is one): letters,
// digits, '_', '-' and '.', not starting with '.', so no '/', no "..", no absolute path.
std::string bad_name(const std::string& name);
// `s` as a JSON string, for error messages that quote names read from a file.
std::string quoted(const std::string& s);
bool ends_with(const std::string& s, const std::string& tail);

}  // namespace brisk::accelerate::detail
