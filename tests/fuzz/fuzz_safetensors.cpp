// Fuzzes brisk's safetensors reader on whole files held in memory (header length, JSON header,
// entries, offsets, data). Any input must either load or throw brisk::Error. A file that loads
// must write back out and load again to the same tensors and metadata, find every tensor by
// name, and loading it into a module (through load_state_dict) must either work or throw
// brisk::Error.
#include <brisk/brisk.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

namespace {

using namespace brisk;

struct Target : nn::Module {
  Target() {
    register_parameter("w", zeros({2}));
    register_buffer("n", zeros({1}, {.dtype = DType::I64}));
    register_buffer("m", zeros({2}, {.dtype = DType::Bool}));
  }
};

bool same(const data::SafetensorsFile& a, const data::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : b.tensors) by_name[name] = &t;
  for (const auto& [name, t] : a.tensors) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) return false;
    const Tensor& u = *it->second;
    if (t.dtype() != u.dtype() || t.sizes() != u.sizes()) return false;
    if (t.nbytes() > 0 && std::memcmp(t.data_ptr(), u.data_ptr(), t.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  data::SafetensorsFile f;
  try {
    f = data::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const Error&) {
    return 0;
  }
  // Every name is found by the index, as the tensor at its place in file order.
  for (const auto& [name, t] : f.tensors)
    if (!f.contains(name) || f.find(name) != &t) __builtin_trap();
  try {
    const data::SafetensorsFile again = data::parse_safetensors(data::safetensors_bytes(f.tensors, f.metadata));
    if (!same(f, again)) __builtin_trap();
  } catch (const Error&) {
    __builtin_trap();  // whatever loads must save and load again
  }
  try {
    Target m;
    m.load_state_dict(f.tensors, /*strict=*/false);
  } catch (const Error&) {
  }
  return 0;
}
