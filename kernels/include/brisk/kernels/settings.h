// Process-wide kernel settings: whether ops must be deterministic (PyTorch's
// torch.use_deterministic_algorithms).
#pragma once
#include <string>
#include <vector>

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

// The instruction set the hot CPU kernels (elementwise, activations, softmax, reductions,
// optimizer updates, im2col, pooling, normalisation) run with. A portable build (BRISK_NATIVE=OFF)
// carries a copy for the x86-64 baseline, one for AVX2 + FMA and one for AVX-512, and picks the
// best this CPU runs when the process starts; BRISK_CPU_ISA=baseline|avx2|avx512 forces one
// (an error when this CPU or build lacks it). A native build (-march=native) has one copy: "native".
// GEMMs go to OpenBLAS or Eigen, which choose their own. docs/cpu-isa.md says more.
std::string cpu_isa();
// The instruction sets this build carries and this CPU runs, baseline first ({"native"} in a
// native build).
std::vector<std::string> cpu_isas_available();
// Switches the hot CPU kernels to `isa` (one of cpu_isas_available()) for the whole process;
// throws brisk::Error naming the valid values otherwise. Not meant to change while kernels run:
// for tests and benchmarks that compare the copies.
void set_cpu_isa(const std::string& isa);

}  // namespace brisk::kernels
