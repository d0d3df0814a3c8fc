// Custom differentiable functions: a user-supplied forward and backward with saved tensors.
//
//   struct Cube : autograd::Function<Cube> {
//     static Tensor forward(autograd::FunctionCtx& ctx, const Tensor& x) {
//       ctx.save_for_backward({x});
//       return x * x * x;
//     }
//     static std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) {
//       const Tensor& x = ctx.saved()[0];
//       return {g[0] * 3.0 * x * x};
//     }
//   };
//   Tensor y = Cube::apply(x);
#pragma once
#include <map>
#include <string>
#include <typeinfo>
#include <vector>

#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"

namespace brisk::autograd {

class FunctionCtx {
 public:
  // Tensors saved here are detached copies of the handles (same storage, no history).
  void save_for_backward(const std::vector<Tensor>& tensors);
  const std::vector<Tensor>& saved() const;
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  // Non-tensor values the backward needs.
  std::map<std::string, double> values;

 private:
  template <class>
  friend struct Function;
  std::vector<Tensor> saved_;
  std::vector<bool> needs_;
};

template <class Derived>
struct Function {
  template <class... Args>
  static Tensor apply(const Args&... args) {
    std::vector<Tensor> inputs;
    (collect(inputs, args), ...);
    auto ctx = std::make_shared<FunctionCtx>();
    for (const Tensor& t : inputs) ctx->needs_.push_back(is_grad_enabled() && requires_grad(t));
    Tensor out;
    {
      NoGradGuard no_grad;
      out = Derived::forward(*ctx, args...);
    }
    record(
        typeid(Derived).name(), inputs, out,
        [ctx](const GradCtx& g) {
          std::vector<Tensor> grads(g.num_grads());
          for (size_t i = 0; i < grads.size(); ++i) grads[i] = g.grad(i);
          std::vector<Tensor> result = Derived::backward(*ctx, grads);
          BRISK_CHECK(result.size() == ctx->needs_.size(), "custom Function backward returned ", result.size(),
                      " gradients for ", ctx->needs_.size(), " tensor inputs");
          return result;
        },
        ctx->saved_);
    return out;
  }

 private:
  static void collect(std::vector<Tensor>& v, const Tensor& t) { v.push_back(t); }
  template <class T>
  static void collect(std::vector<Tensor>&, const T&) {}
};

}  // namespace brisk::autograd
