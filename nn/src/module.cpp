// nn::Module: registration, traversal, state dicts, modes, device/dtype moves, hooks.
#include "brisk/nn/module.h"

#include <cxxabi.h>
#include <algorithm>
#include <sstream>
#include <typeinfo>

#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"
#include "brisk/kernels/elementwise.h"

namespace brisk::nn {

NamedTensors remove_tied_duplicates(const NamedTensors& state) {
  NamedTensors out;
  for (const auto& entry : state) {  // no structured bindings: clang 14 cannot capture them
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    bool tied = std::any_of(out.begin(), out.end(), [&](const auto& kv) { return kv.second.is_same(t); });
    if (!tied) out.emplace_back(name, t);
  }
  return out;
}

Tensor Module::forward(const Tensor&) {
  BRISK_THROW(name(), ": forward(const Tensor&) is not implemented; override it or call the module's own forward");
}

Tensor Module::operator()(const Tensor& x) {
  if (pre_list_hooks_.empty() && fwd_list_hooks_.empty()) {
    for (auto& h : pre_hooks_) h(*this, x);
    Tensor out = forward(x);
    for (auto& h : fwd_hooks_) h(*this, x, out);
    if (!bwd_hooks_.empty() && out.requires_grad()) out = with_backward_hooks(out);
    return out;
  }
  TensorList inputs{x};
  run_pre_hooks(inputs);
  TensorList outs{forward(x)};
  run_post_hooks(inputs, outs);
  return outs[0];
}

Tensor Module::with_backward_hooks(const Tensor& out) {
  // An identity node on the output whose backward shows the gradient to the hooks.
  Tensor alias = out.as_strided(out.sizes(), out.strides(), out.offset());
  auto hooks = bwd_hooks_;
  Module* self = this;
  autograd::record("ModuleBackwardHook", {out}, alias, [hooks, self](const autograd::GradCtx& g) {
    for (auto& h : hooks) h(*self, g.grad());
    return std::vector<Tensor>{g.grad()};
  });
  return alias;
}

void Module::run_pre_hooks(const TensorList& inputs) {
  static const Tensor none;
  for (auto& h : pre_hooks_) h(*this, inputs.empty() ? none : inputs[0]);
  for (auto& h : pre_list_hooks_) h(*this, inputs);
}

void Module::run_post_hooks(const TensorList& inputs, TensorList& outputs) {
  static const Tensor none;
  for (auto& h : fwd_hooks_) h(*this, inputs.empty() ? none : inputs[0], outputs.empty() ? none : outputs[0]);
  for (auto& h : fwd_list_hooks_) h(*this, inputs, outputs);
  if (bwd_hooks_.empty()) return;
  for (Tensor& out : outputs)
    if (out.defined() && out.requires_grad()) out = with_backward_hooks(out);
}

std::string Module::name() const {
  int status = 0;
  const char* mangled = typeid(*this).name();
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string n = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  auto pos = n.rfind("::");
  return pos == std::string::npos ? n : n.substr(pos + 2);
}

void Module::check_name(const std::string& name, const char* what) {
  BRISK_CHECK(!name.empty(), "Module::", what, ": name must not be empty");
  BRISK_CHECK(name.find('.') == std::string::npos, "Module::", what, ": name '", name,
              "' must not contain '.' (dots separate the levels of a state_dict key)");
}

bool Module::has_name(const std::string& name) const {
  auto same = [&](const auto& s) { return s.name == name; };
  return std::any_of(params_.begin(), params_.end(), same) || std::any_of(buffers_.begin(), buffers_.end(), same) ||
         std::any_of(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
}

Tensor Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_name(name, "register_parameter");
  BRISK_CHECK(!has_name(name), "Module::register_parameter: '", name, "' is already registered in ", this->name());
  if (value.defined()) {
    BRISK_CHECK(value.is_floating_point(), "Module::register_parameter: '", name,
                "' must be a floating-point tensor, got ", dtype_name(value.dtype()));
    BRISK_CHECK(value.is_leaf(), "Module::register_parameter: '", name, "' must be a leaf tensor (use detach())");
    value.storage()->set_category(MemoryCategory::Parameters);
    value.requires_grad_(requires_grad);
  }
  params_.push_back({name, value, true});
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_name(name, "register_buffer");
  BRISK_CHECK(!has_name(name), "Module::register_buffer: '", name, "' is already registered in ", this->name());
  buffers_.push_back({name, value, persistent});
  return value;
}

Module& Module::register_module(const std::string& name, Module& child) {
  check_name(name, "register_module");
  BRISK_CHECK(!has_name(name), "Module::register_module: '", name, "' is already registered in ", this->name());
  BRISK_CHECK(&child != this, "Module::register_module: a module cannot be its own child ('", name, "')");
  children_.emplace_back(name, &child);
  return child;
}

void Module::register_modules(std::initializer_list<std::pair<std::string, std::reference_wrapper<Module>>> children) {
  for (const auto& [n, m] : children) register_module(n, m.get());
}

void Module::set_tensor(const std::string& name, const Tensor& value) {
  for (auto* slots : {&params_, &buffers_})
    for (Slot& s : *slots)
      if (s.name == name) {
        s.tensor = value;
        return;
      }
  BRISK_THROW("Module::set_tensor: ", this->name(), " has no parameter or buffer '", name, "'");
}

void Module::collect(const std::string& prefix, bool params, bool recurse, bool only_persistent, NamedTensors& out,
                     std::vector<const TensorImpl*>* seen) const {
  for (const Slot& s : params ? params_ : buffers_) {
    if (!s.tensor.defined() || (only_persistent && !s.persistent)) continue;
    if (seen) {
      if (std::find(seen->begin(), seen->end(), s.tensor.impl()) != seen->end()) continue;
      seen->push_back(s.tensor.impl());
    }
    out.emplace_back(prefix + s.name, s.tensor);
  }
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", params, true, only_persistent, out, seen);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", true, recurse, false, out, &seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", false, recurse, false, out, &seen);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (size_t i = 0; i < out.size(); ++i) {
    auto [prefix, m] = out[i];
    for (auto& [n, c] : m->children_)
      out.emplace_back(prefix.empty() ? n : std::string(prefix).append(".").append(n), c);
  }
  return out;
}

Tensor Module::get(const std::string& path) const {
  auto dot = path.find('.');
  if (dot == std::string::npos) {
    for (const auto* slots : {&params_, &buffers_})
      for (const Slot& s : *slots)
        if (s.name == path) return s.tensor;
  } else {
    std::string head = path.substr(0, dot);
    for (const auto& [n, c] : children_)
      if (n == head) return c->get(path.substr(dot + 1));
  }
  BRISK_THROW("Module::get: ", name(), " has no parameter or buffer '", path, "'");
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, false, out, nullptr);  // tied weights appear under every name, as PyTorch
  collect("", false, true, true, out, nullptr);
  return out;
}

LoadResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  LoadResult r;
  NamedTensors mine = state_dict();
  std::vector<bool> used(state.size(), false);
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
  for (auto& entry : mine) {                      // no structured bindings: clang 14 cannot capture them
    const std::string& name = entry.first;
    Tensor& dst = entry.second;
    auto it = std::find_if(state.begin(), state.end(), [&](const auto& kv) { return kv.first == name; });
    if (it == state.end()) {
      // A tied duplicate is filled through the name it shares its tensor with.
      bool tied_to_loaded = std::any_of(mine.begin(), mine.end(), [&](const auto& kv) {
        return kv.first != name && kv.second.is_same(dst) &&
               std::any_of(state.begin(), state.end(), [&](const auto& s) { return s.first == kv.first; });
      });
      if (!tied_to_loaded) r.missing_keys.push_back(name);
      continue;
    }
    used[static_cast<size_t>(it - state.begin())] = true;
    if (it->second.sizes() != dst.sizes()) {
      r.shape_mismatches.push_back(name + ": expected " + shape_str(dst.sizes()) + ", got " +
                                   shape_str(it->second.sizes()));
      continue;
    }
    // Only floating types convert into one another (a NaN cast to an integer is undefined; an
    // integer or bool in a float slot, or the reverse, is a different tensor): refuse, strict or not.
    const DType want = dst.dtype(), have = it->second.dtype();
    BRISK_CHECK(want == have || (is_floating(want) && is_floating(have)), "load_state_dict: \"", name, "\" is ",
                traits(want).safetensors_name, " but the state dict holds ", traits(have).safetensors_name,
                "; only floating-point dtypes (F64, F32, F16, BF16) are converted into one another");
    copies.emplace_back(dst, it->second);
  }
  for (size_t i = 0; i < state.size(); ++i)
    if (!used[i]) r.unexpected_keys.push_back(state[i].first);
  // Shape mismatches are never loaded, strict or not.
  if (strict && (!r.missing_keys.empty() || !r.unexpected_keys.empty() || !r.shape_mismatches.empty())) {
    std::ostringstream os;
    os << "load_state_dict: error(s) loading the state dict into " << name() << ":";
    if (!r.missing_keys.empty()) os << "\n  missing keys: " << detail::str_cat(r.missing_keys);
    if (!r.unexpected_keys.empty()) os << "\n  unexpected keys: " << detail::str_cat(r.unexpected_keys);
    for (const auto& m : r.shape_mismatches) os << "\n  size mismatch for " << m;
    os << "\n(pass strict=false to load the matching entries only)";
    BRISK_THROW(os.str());
  }
  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) {
    kernels::copy_(dst, src);
    dst.bump_version();
  }
  return r;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

Module& Module::to(Device device, bool non_blocking) {
  NoGradGuard no_grad;
  // A tensor reached twice (tied weights, a shared child) has moved at its first visit, so the
  // device test below skips it: set_data swaps the bytes under the one shared handle.
  for (auto* t : {&params_, &buffers_})
    for (Slot& s : *t)
      if (s.tensor.defined() && s.tensor.device() != device) {
        s.tensor.set_data(kernels::to_device(s.tensor, device, non_blocking));
        Tensor g = s.tensor.grad();
        if (g.defined() && g.device() != device) g.set_data(kernels::to_device(g, device, non_blocking));
      }
  for (auto& [n, c] : children_) c->to(device, non_blocking);
  return *this;
}

Module& Module::to(DType dtype) {
  BRISK_CHECK(is_floating(dtype), "Module::to: can only cast to a floating-point dtype, got ", dtype_name(dtype));
  NoGradGuard no_grad;
  for (auto* t : {&params_, &buffers_})
    for (Slot& s : *t)
      if (s.tensor.defined() && s.tensor.is_floating_point() && s.tensor.dtype() != dtype) {
        s.tensor.set_data(kernels::cast(s.tensor, dtype));
        Tensor g = s.tensor.grad();
        if (g.defined()) g.set_data(kernels::cast(g, dtype));
      }
  for (auto& [n, c] : children_) c->to(dtype);
  return *this;
}

Module& Module::to(Device device, DType dtype, bool non_blocking) {
  to(dtype);
  return to(device, non_blocking);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      kernels::fill_(g, 0.0);
    }
  }
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
  return *this;
}

}  // namespace brisk::nn
