// Test helpers shared by the GPU tests: an environment variable set for a scope (the switches the
// ops read at each call, such as BRISK_CUDA_ATTENTION), and the error of a result relative
// to its reference's scale.
#pragma once
#include <brisk/core/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace brisk::testing {

// Sets the variable `name` to `value` until the end of the scope, then restores it (or unsets it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* p = std::getenv(name)) old_ = p;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// max |got - want| / max |want| (the error relative to the tensor's scale); infinity when a value
// of got is NaN or infinite, got is undefined, or the shapes differ.
inline double relative_error(const Tensor& got, const Tensor& want) {
  if (!got.defined() || got.sizes() != want.sizes()) return INFINITY;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i])) return INFINITY;
    err = std::max(err, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  return err / scale;
}

}  // namespace brisk::testing
