// Process-wide kernel settings: whether ops must be deterministic (PyTorch's
// torch.use_deterministic_algorithms).
#pragma once
#include <string>

namespace brisk::kernels {

// Deterministic algorithms: when on (the default; PyTorch's default is off), every op gives
// bitwise identical results run after run on the same device for the same inputs. When off, these
// CUDA ops may accumulate with atomicAdd, which is faster on inputs with many repeated indices but
// adds in whatever order the threads arrive, so the last bits may change from run to run:
//   embedding_backward, index_add_, scatter_add.
// CPU kernels are deterministic either way (and independent of the thread count). Thread-safe;
// read by each op when it starts.
void set_deterministic(bool on);
bool deterministic();

// Every non-deterministic CUDA path has a deterministic variant that this switch selects
// (embedding_backward, index_add_, scatter_add; cuDNN convolutions keep to cuDNN's deterministic
// algorithms). Where a call has none that can run (a convolution for which cuDNN offers no
// deterministic algorithm), the op calls this: with the switch on it throws brisk::Error naming
// the op, why, and how to allow non-deterministic algorithms; with it off it does nothing.
void check_nondeterministic_allowed(const std::string& op, const std::string& why);

// Sets the switch for a scope and restores the previous value.
class DeterministicGuard {
 public:
  explicit DeterministicGuard(bool on) : prev_(deterministic()) { set_deterministic(on); }
  ~DeterministicGuard() { set_deterministic(prev_); }
  DeterministicGuard(const DeterministicGuard&) = delete;
  DeterministicGuard& operator=(const DeterministicGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace brisk::kernels
