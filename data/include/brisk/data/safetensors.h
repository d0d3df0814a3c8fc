// safetensors files (Hugging Face's format): an 8-byte little-endian header length N, N bytes
// of UTF-8 JSON {name: {dtype, shape, data_offsets}} plus an optional "__metadata__" string
// map, padded with spaces to a multiple of 8, then the raw C-order little-endian data.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::data {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;  // in file (data offset) order
  std::map<std::string, std::string> metadata;
  // The tensor called `name` (throws naming it when absent).
  const Tensor& at(const std::string& name) const;
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
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace brisk::data
