// Run-time choice of the instruction set for the hot CPU kernels (internal header).
//
// A portable build (BRISK_NATIVE=OFF, kernels/CMakeLists.txt) compiles the hot kernel sources
// (elementwise, softmax, reduce, optim, pool, conv, nn) three times: for the build's baseline
// (namespace cpu::baseline), for AVX2 + FMA (cpu::avx2, -march=x86-64-v3) and for AVX-512
// (cpu::avx512, -march=x86-64-v4). The functions the rest of the library calls (cpu::unary,
// cpu::softmax, ...) are small objects that forward to the copy active_isa() names: the best one
// this CPU runs, or the one BRISK_CPU_ISA / kernels::set_cpu_isa() asks for. A native build
// (-march=native) compiles them once, in cpu::baseline, and forwards there without a choice.
// docs/cpu-isa.md has the user's view.
#pragma once
#include <utility>

// The namespace this translation unit's copy of a hot kernel source is compiled into (set by
// kernels/CMakeLists.txt for the extra copies).
#ifndef BRISK_CPU_ISA
#define BRISK_CPU_ISA baseline
#endif
// 1 in a portable build with the AVX2 / AVX-512 copies (kernels/CMakeLists.txt).
#ifndef BRISK_CPU_DISPATCH
#define BRISK_CPU_DISPATCH 0
#endif

namespace brisk::kernels::cpu {

enum class Isa { Baseline = 0, Avx2 = 1, Avx512 = 2 };

// The copy the dispatchers call (kernels/src/cpu_isa.cpp): chosen once per process from the CPU
// and BRISK_CPU_ISA, changed by kernels::set_cpu_isa().
Isa active_isa();

#if BRISK_CPU_DISPATCH

// Declares the functions given once in each ISA's namespace.
#define BRISK_CPU_KERNELS(...) \
  namespace baseline {         \
  __VA_ARGS__                  \
  }                            \
  namespace avx2 {             \
  __VA_ARGS__                  \
  }                            \
  namespace avx512 {           \
  __VA_ARGS__                  \
  }

// Calls the copy of a kernel that active_isa() names.
template <auto Baseline, auto Avx2, auto Avx512>
struct IsaDispatch {
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    switch (active_isa()) {
      case Isa::Avx512:
        return Avx512(std::forward<Args>(args)...);
      case Isa::Avx2:
        return Avx2(std::forward<Args>(args)...);
      case Isa::Baseline:
        break;
    }
    return Baseline(std::forward<Args>(args)...);
  }
};

// cpu::fn, forwarding to baseline::fn, avx2::fn or avx512::fn.
#define BRISK_CPU_DISPATCH_FN(fn) \
  inline constexpr IsaDispatch<&baseline::fn, &avx2::fn, &avx512::fn> fn {}

#else

#define BRISK_CPU_KERNELS(...) \
  namespace baseline {         \
  __VA_ARGS__                  \
  }
#define BRISK_CPU_DISPATCH_FN(fn) using baseline::fn

#endif

}  // namespace brisk::kernels::cpu
