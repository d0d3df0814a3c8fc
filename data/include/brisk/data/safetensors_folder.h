// The weights of a Hugging Face model folder: `model.safetensors`, or shards
// `model-00001-of-0000n.safetensors` with `model.safetensors.index.json` naming each tensor's file;
// read with every shard checked against the index, written deterministically (sharded above a size).
// Pickled weights (`pytorch_model.bin`, `*.pt`, ...) are refused, never opened: unpickling runs code.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "brisk/data/safetensors.h"

namespace brisk::data {

// The names transformers gives a model folder's weight files.
inline constexpr const char* kSafetensorsWeightsName = "model.safetensors";
inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

// What load_safetensors_folder read.
struct SafetensorsFolder {
  NamedTensors tensors;              // every tensor of every file: files in index order, each in file order
  std::vector<std::string> file_of;  // the file (a name in the folder) each tensor came from, index for index
  std::vector<std::string> files;    // the files read: {"model.safetensors"} or the shards in order
  bool sharded = false;
};

// Reads the weights of the folder `dir`:
//  - `model.safetensors` when present (it wins over an index beside it, as in transformers);
//  - else `model.safetensors.index.json` = {"metadata": {"total_size": n}, "weight_map": {tensor: file}}
//    and the shards it names. Each file name must be a plain name in `dir` (no '/', no "..", not
//    absolute); a shard that is a symbolic link must resolve inside `dir`, or, in the Hugging Face
//    cache's layout (`.../snapshots/<revision>/<name>` -> `../../blobs/<hash>`), inside that cache
//    entry's `blobs` folder. Every named shard must exist, and the index and the shards must agree
//    (each tensor in the file the index says, no tensor in two files, none the index leaves out);
//  - else an error: naming pickled weight files found there (`pytorch_model.bin`, `*.bin`, `*.pt`,
//    `*.pth`, `*.ckpt`, `*.pkl`), which are never opened, and saying how to convert them.
// Each file goes through load_safetensors (its checks and limits; tensors memory-mapped).
// Every problem throws brisk::Error naming the folder and the file.
SafetensorsFolder load_safetensors_folder(const std::string& dir);

struct SafetensorsFolderOptions {
  // Shards hold at most this many bytes of tensor data (a tensor larger than that gets a shard of
  // its own); transformers' save_pretrained default. <= 0: one file whatever the size.
  int64_t max_shard_size = 5'000'000'000;
  std::map<std::string, std::string> metadata = {{"format", "pt"}};  // each file's __metadata__
};

// Writes `tensors` (unique names, any device; tied duplicates already removed) into `dir`
// (created if missing) as transformers does: one `model.safetensors` when they fit in one shard,
// else shards filled in the given order with the index (weight_map sorted by name, total_size the
// sum of the tensors' bytes). Every file is written atomically (safetensors_bytes, so the same
// tensors give the same bytes); weight files of an earlier save in `dir` that this one does not
// write (an old model.safetensors, index or shard) are removed after the new ones are in place.
// Returns the file names written (shards in order, the index last).
std::vector<std::string> save_safetensors_folder(const std::string& dir, const NamedTensors& tensors,
                                                 const SafetensorsFolderOptions& options = {});

}  // namespace brisk::data
