// Internal: checked reading of a checkpoint's JSON documents and tensor files (docs/checkpoints.md):
// every value's type and range, every tensor's name, shape and dtype against what it is loaded
// into, with errors naming the file and the key ("optimizers[0].scalars.steps_taken").
#pragma once
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "brisk/core/tensor.h"
#include "brisk/data/safetensors.h"
#include "brisk/optim/optimizer.h"
#include "brisk/util/error.h"
#include "brisk/util/json.h"
#include "checkpoint_folder.h"

namespace brisk::accelerate::detail {

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
    const std::function<double(const std::string&, const json::Value&, const std::string&)>& check);

// An optimizer's scalars: counts are integers in [0, 2^53], num_params equals the prepared
// group's, learning rates and the like are finite and non-negative, betas in [0, 1), flags 0 or 1.
std::map<std::string, double> optimizer_scalars(const Fields& f, const json::Value& v, const std::string& key,
                                                const optim::Optimizer& opt);
// One scalar of an optimizer's state dict other than num_params, checked by its kind.
double optimizer_scalar(const Fields& f, const std::string& k, const json::Value& x, const std::string& at);

// A file name read from a state file: a plain name that the manifest lists (else an error naming
// the state file and the key).
const std::string& listed_name(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                               const std::string& key);
// Listed safetensors file `name`, read (checked against the manifest) and parsed; a parse error
// names `key`.
data::SafetensorsFile read_safetensors(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                                       const std::string& key);
// The tensors of a safetensors file from the checkpoint, checked against what they are loaded
// into: every name known, the same shape and dtype.
data::NamedTensors checked_tensors(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                                   const std::string& key, const std::map<std::string, Tensor>& targets,
                                   const char* what);

}  // namespace brisk::accelerate::detail
