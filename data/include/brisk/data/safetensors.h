// safetensors files (Hugging Face's format): an 8-byte little-endian header length N, N bytes
// of UTF-8 JSON {name: {dtype, shape, data_offsets}} plus an optional "__metadata__" string
// map, padded with spaces to a multiple of 8, then the raw C-order little-endian data.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/nn/module.h"

namespace brisk::data {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A loaded file: its tensors in file (data offset) order and its metadata. Look-ups by name take
// constant time (a hash index built when the file is read); iteration goes in file order:
//   for (const auto& [name, t] : file) ...
//   if (const Tensor* w = file.find("lm_head.weight")) ...
struct SafetensorsFile {
  NamedTensors tensors;  // in file (data offset) order
  std::map<std::string, std::string> metadata;

  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
  // The tensor called `name` (throws naming it when absent).
  const Tensor& at(const std::string& name) const;
  size_t size() const { return tensors.size(); }
  bool empty() const { return tensors.empty(); }
  NamedTensors::const_iterator begin() const { return tensors.begin(); }
  NamedTensors::const_iterator end() const { return tensors.end(); }
  // Rebuilds the name index after `tensors` was edited by hand. Until then look-ups that the
  // index cannot answer search linearly when it no longer matches the first and last entries
  // and the count (appending, removing, reordering at the ends); an edit in the middle that
  // keeps those may not be seen: call reindex().
  void reindex();

 private:
  std::unordered_map<std::string, size_t> index_;
};

// The complete file contents for these tensors, byte for byte what the reference (Rust)
// implementation writes: tensors ordered by dtype, descending in the crate's enum order
// (I64, F64, F32, I32, BF16, F16, U8, BOOL: alignment first), then by name; compact JSON
// with "__metadata__" first (omitted when empty; keys sorted); header padded with spaces.
// Any device and layout; data is copied to the host in C order. Names must be unique.
std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

// Writes safetensors_bytes(...) atomically (io::write_file_atomic): a temp file beside it, fsync, rename,
// fsync the folder, so a crash leaves either the old file or the complete new one.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Parses and validates a whole file held in memory (`what` names it in errors).
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what = "<memory>");
// Reads and validates `path`; every malformation throws brisk::Error naming the file and
// what is wrong (size, header length, UTF-8, JSON, dtype, shape, offsets, trailing data).
// The file is memory-mapped, not read: each tensor's storage is the mapped pages of its data
// (copy-on-write: writing to a loaded tensor changes this process's copy, never the file), so a
// multi-GB checkpoint costs no copy before use and only the pages that are touched are read.
// The mapping lives as long as any of its tensors. A tensor whose data is not aligned to its
// element size (possible in files from other writers) is copied instead. The file must not be
// truncated while its tensors are in use (reading a page past the new end is a SIGBUS).
SafetensorsFile load_safetensors(const std::string& path);

// The module's state dict (parameters and persistent buffers, one name per tied tensor) as a
// safetensors file, the way Hugging Face saves a model.
void save_safetensors(const std::string& path, const nn::Module& module,
                      const std::map<std::string, std::string>& metadata = {});

// Loads a safetensors file into a module's parameters and buffers in place (through
// Module::load_state_dict: floating dtypes are converted, tied weights re-tied). strict: any
// missing key, unexpected key or shape mismatch throws one brisk::Error naming all of them (and
// the file), before anything is copied; non-strict: the matching tensors are loaded and the
// rest is reported in the result.
nn::LoadResult load_safetensors_into(nn::Module& module, const std::string& path, bool strict = true);

}  // namespace brisk::data
