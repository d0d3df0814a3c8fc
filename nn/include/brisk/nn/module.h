// nn::Module: named parameters, buffers and child modules (registration order kept, names
// without dots), recursive traversal with tied weights listed once, state_dict, train/eval,
// to(device/dtype) in place, zero_grad, apply, and forward hooks.
//
// A module's forward is usually `Tensor forward(const Tensor&)` (override it; `m(x)` runs the
// hooks around it). A forward with several inputs or outputs (`forward(x, mask)`, returning
// `std::tuple<Tensor, Tensor>`) is declared on a module deriving from CallableModule<Self>, whose
// `m(args...)` calls it with the same hooks (see CallableModule below).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::nn {

// Ordered name -> tensor map (a state dict keeps the registration order, like PyTorch's).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// The tensors of a call's arguments or of its result, in order (for hooks).
using TensorList = std::vector<Tensor>;

// What load_state_dict found; with strict=true any problem throws instead.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  std::vector<std::string> shape_mismatches;  // "name: expected [a, b], got [c]"
};

// A state dict with one name per shared tensor (tied weights keep their first name), as Hugging
// Face does before writing safetensors; load_state_dict re-ties them (a missing key whose tensor
// is the same as a loaded one is not missing).
NamedTensors remove_tied_duplicates(const NamedTensors& state);

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Modules hold handles registered by address: copying would leave the copy's children dangling.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The single-input forward most layers implement; call the module (`m(x)`) to run hooks.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x);

  // --- registration ---------------------------------------------------------------
  // Registers a parameter (requires_grad unless told otherwise) and returns its handle.
  Tensor register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  // Buffers are state that is saved but not trained (BatchNorm's running stats).
  // Non-persistent buffers are left out of state_dict.
  Tensor register_buffer(const std::string& name, Tensor value, bool persistent = true);
  // A child held by the parent as a member; the parent must outlive no longer than the child.
  Module& register_module(const std::string& name, Module& child);
  // A child owned by this module.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    register_module(name, static_cast<Module&>(*child));
    owned_.push_back(child);
    return child;
  }
  void register_modules(std::initializer_list<std::pair<std::string, std::reference_wrapper<Module>>> children);
  // Replaces the tensor registered under `name` (a parameter or buffer of this module).
  void set_tensor(const std::string& name, const Tensor& value);

  // --- traversal ------------------------------------------------------------------
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Module*>> named_children() const;
  std::vector<std::pair<std::string, Module*>> named_modules();  // this module first, as ""
  // Parameter or buffer by dotted path ("block.0.weight"); throws naming the path if absent.
  Tensor get(const std::string& path) const;
  int64_t num_parameters() const;

  // --- state ----------------------------------------------------------------------
  // Parameters then persistent buffers, dotted names, tied tensors listed under each name.
  NamedTensors state_dict() const;
  // Copies values in place (floating dtypes converted; any other dtype mismatch throws). strict:
  // missing/unexpected keys and shape mismatches throw one error listing all of them.
  LoadResult load_state_dict(const NamedTensors& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves/casts every parameter and buffer in place (floating tensors only for dtype): each
  // tensor handle keeps its identity and autograd state (requires_grad, hooks; a gradient moves
  // along), so optimizers and tied weights (one tensor under several names) stay as they were.
  // non_blocking: copies from pinned host memory are only enqueued (see Tensor::to).
  Module& to(Device device, bool non_blocking = false);
  Module& to(DType dtype);
  Module& to(Device device, DType dtype, bool non_blocking = false);
  // Drops gradients (set_to_none) or zeroes them.
  void zero_grad(bool set_to_none = true);
  // fn(module) on every submodule, children first, then this one (as PyTorch's apply).
  Module& apply(const std::function<void(Module&)>& fn);

  // --- hooks ------------------------------------------------------------------------
  // Single-tensor hooks see the call's first tensor argument and first tensor result (the only
  // ones for `m(x)`); the list forms see every tensor argument and every tensor of the result
  // (CallableModule calls with several). Both run on every call through operator().
  using ForwardPreHook = std::function<void(Module&, const Tensor& input)>;
  using ForwardHook = std::function<void(Module&, const Tensor& input, const Tensor& output)>;
  using ForwardPreHookList = std::function<void(Module&, const TensorList& inputs)>;
  using ForwardHookList = std::function<void(Module&, const TensorList& inputs, const TensorList& outputs)>;
  // fn(module, grad_output) once the gradient w.r.t. the module's output is known (for each tensor
  // of a result with several that requires grad).
  using BackwardHook = std::function<void(Module&, const Tensor& grad_output)>;
  void register_forward_pre_hook(ForwardPreHook fn) { pre_hooks_.push_back(std::move(fn)); }
  void register_forward_hook(ForwardHook fn) { fwd_hooks_.push_back(std::move(fn)); }
  void register_forward_pre_hook(ForwardPreHookList fn) { pre_list_hooks_.push_back(std::move(fn)); }
  void register_forward_hook(ForwardHookList fn) { fwd_list_hooks_.push_back(std::move(fn)); }
  void register_backward_hook(BackwardHook fn) { bwd_hooks_.push_back(std::move(fn)); }
  // Whether any hook is registered: code that fuses work across modules (GPT-2's residual adds
  // with the next block's LayerNorm) does so only where no call it skips would run one.
  bool has_hooks() const {
    return !pre_hooks_.empty() || !fwd_hooks_.empty() || !pre_list_hooks_.empty() || !fwd_list_hooks_.empty() ||
           !bwd_hooks_.empty();
  }

  // A short name for printing (the class name by default).
  virtual std::string name() const;

 protected:
  // The hooks around a call with several tensors (CallableModule::operator()): before forward,
  // with its tensor arguments; after, with its result's tensors, which backward hooks may replace
  // by identity aliases (the caller writes them back into the result).
  void run_pre_hooks(const TensorList& inputs);
  void run_post_hooks(const TensorList& inputs, TensorList& outputs);
  Tensor with_backward_hooks(const Tensor& out);

 private:
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  static void check_name(const std::string& name, const char* what);
  bool has_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool recurse, bool only_persistent, NamedTensors& out,
               std::vector<const TensorImpl*>* seen) const;

  std::vector<Slot> params_;
  std::vector<Slot> buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::shared_ptr<void>> owned_;
  std::vector<ForwardPreHook> pre_hooks_;
  std::vector<ForwardHook> fwd_hooks_;
  std::vector<ForwardPreHookList> pre_list_hooks_;
  std::vector<ForwardHookList> fwd_list_hooks_;
  std::vector<BackwardHook> bwd_hooks_;
  bool training_ = true;
};

namespace hooks_detail {

// Calls f(Tensor&) on every tensor of a value: a Tensor, or a std::optional, std::vector,
// std::pair or std::tuple of such values (nested); anything else holds no tensor.
template <class T, class F>
void for_each_tensor(T& value, F& f) {
  using V = std::remove_const_t<T>;
  if constexpr (std::is_same_v<V, Tensor>) {
    f(value);
  } else if constexpr (requires {
                         value.has_value();
                         *value;
                         typename V::value_type;
                       }) {
    if (value.has_value()) for_each_tensor(*value, f);
  } else if constexpr (requires {
                         value.begin();
                         value.end();
                         typename V::value_type;
                       }) {
    for (auto& v : value) for_each_tensor(v, f);
  } else if constexpr (requires { std::tuple_size<V>::value; }) {
    std::apply([&](auto&... parts) { (for_each_tensor(parts, f), ...); }, value);
  }
}

}  // namespace hooks_detail

// A module with forward overloads of its own: several inputs (`forward(x, mask)`), several outputs
// (`std::tuple<Tensor, Tensor> forward(x, targets)`), or both, as libtorch's templated forward:
//
//   struct Net : nn::CallableModule<Net> {
//     nn::Linear fc{4, 3};
//     Net() { register_modules({{"fc", fc}}); }
//     std::tuple<Tensor, Tensor> forward(const Tensor& x, const Tensor& y) {
//       Tensor logits = fc(x);
//       return {logits, cross_entropy(logits, y)};
//     }
//   };
//   auto [logits, loss] = net(x, y);  // hooks run around it
//
// `m(args...)` calls Self::forward(args...) with the hooks: the list hooks see every tensor among
// the arguments and the result (Tensor, optional, vector, pair, tuple), the single-tensor hooks
// the first of each, and backward hooks each result tensor that requires grad. `m(x)` with one
// tensor is Module's call of the virtual forward(const Tensor&), which keeps returning a Tensor:
// a forward of one tensor argument that returns several must take it another way (for example
// with a second, defaulted argument, called as `m(x, Tensor())`). to(), state dicts, train/eval
// and the Accelerator see a CallableModule as any other module.
template <class Self>
class CallableModule : public Module {
 public:
  using Module::operator();
  template <class... Args>
  requires(!(sizeof...(Args) == 1 && (std::is_convertible_v<Args&&, const Tensor&> && ...))) auto operator()(
      Args&&... args) {
    Self& self = static_cast<Self&>(*this);
    if (!has_hooks()) return self.forward(std::forward<Args>(args)...);
    TensorList inputs;
    auto collect_in = [&](const Tensor& t) { inputs.push_back(t); };
    (hooks_detail::for_each_tensor(args, collect_in), ...);
    run_pre_hooks(inputs);
    auto out = self.forward(std::forward<Args>(args)...);
    TensorList outputs;
    auto collect_out = [&](Tensor& t) { outputs.push_back(t); };
    hooks_detail::for_each_tensor(out, collect_out);
    run_post_hooks(inputs, outputs);
    size_t k = 0;
    auto write_back = [&](Tensor& t) { t = outputs[k++]; };
    hooks_detail::for_each_tensor(out, write_back);
    return out;
  }
};

}  // namespace brisk::nn
