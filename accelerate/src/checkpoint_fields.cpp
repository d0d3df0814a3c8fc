// Checked reading of a checkpoint's values: state dict scalars by kind, listed file names, tensor
// files against the tensors they are loaded into (checkpoint_fields.h).
#include "checkpoint_fields.h"

#include <cmath>

namespace brisk::accelerate::detail {

std::map<std::string, double> checked_scalars(
    const Fields& f, const json::Value& v, const std::string& key, const std::map<std::string, double>& current,
    const std::function<double(const std::string&, const json::Value&, const std::string&)>& check) {
  f.object(v, key);
  std::map<std::string, double> out;
  for (const auto& [k, value] : v.items()) {
    if (!current.count(k)) f.fail(Fields::join(key, k), "not a key of the prepared object's state");
    out[k] = check(k, value, Fields::join(key, k));
  }
  for (const auto& [k, value] : current)
    if (!out.count(k)) f.fail(Fields::join(key, k), "missing");
  return out;
}

std::map<std::string, double> optimizer_scalars(const Fields& f, const json::Value& v, const std::string& key,
                                                const optim::Optimizer& opt) {
  const std::map<std::string, double> current = opt.state_dict().scalars;
  return checked_scalars(f, v, key, current, [&](const std::string& k, const json::Value& x, const std::string& at) {
    if (ends_with(k, ".num_params")) {
      const auto want = static_cast<int64_t>(current.at(k));
      const int64_t got = f.integer(x, at, 0, kMaxCount);
      if (got != want) f.fail(at, "the checkpoint's group has ", got, " parameters, the prepared one ", want);
      return static_cast<double>(got);
    }
    return optimizer_scalar(f, k, x, at);
  });
}

double optimizer_scalar(const Fields& f, const std::string& k, const json::Value& x, const std::string& at) {
  if (k == "steps_taken" || (k.rfind("state.", 0) == 0 && ends_with(k, ".step")))
    return static_cast<double>(f.integer(x, at, 0, kMaxCount));
  const std::string hyper = k.substr(k.rfind('.') + 1);
  if (hyper == "beta1" || hyper == "beta2") {
    const double b = f.number(x, at, 0, 1);
    if (b >= 1) f.fail(at, "expected a number in [0, 1), got ", x.dump());
    return b;
  }
  if (hyper == "amsgrad" || hyper == "maximize" || hyper == "nesterov") {
    const double b = f.number(x, at, 0, 1);
    if (b != 0 && b != 1) f.fail(at, "expected 0 or 1, got ", x.dump());
    return b;
  }
  if (hyper == "lr" || hyper == "eps" || hyper == "weight_decay" || hyper == "momentum" || hyper == "dampening")
    return f.number(x, at, 0, HUGE_VAL);
  return f.number(x, at, -HUGE_VAL, HUGE_VAL);
}

const std::string& listed_name(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                               const std::string& key) {
  if (std::string why = bad_name(name); !why.empty())
    f.fail(key, quoted(name), " ", why, " (a checkpoint reads only plain files of its own folder)");
  if (!folder.lists(name)) f.fail(key, quoted(name), " is not listed in ", kManifest, " (only listed files are read)");
  return name;
}

data::SafetensorsFile read_safetensors(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                                       const std::string& key) {
  const std::string bytes = folder.read(name);
  try {
    return data::parse_safetensors(bytes, (folder.dir() / name).string());
  } catch (const Error& e) {
    f.fail(key, e.message());
  }
}

data::NamedTensors checked_tensors(const Fields& f, const CheckpointFolder& folder, const std::string& name,
                                   const std::string& key, const std::map<std::string, Tensor>& targets,
                                   const char* what) {
  listed_name(f, folder, name, key);
  data::SafetensorsFile sf = read_safetensors(f, folder, name, key);
  for (const auto& [tname, t] : sf.tensors) {
    auto it = targets.find(tname);
    if (it == targets.end()) f.fail(key, name, " has a tensor ", quoted(tname), " that is not a ", what);
    if (t.sizes() != it->second.sizes() || t.dtype() != it->second.dtype())
      f.fail(key, name, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but the ", what, " is ",
             dtype_name(it->second.dtype()), " ", it->second.sizes());
  }
  return std::move(sf.tensors);
}

}  // namespace brisk::accelerate::detail
