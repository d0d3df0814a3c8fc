// The run-time choice among the copies of the hot CPU kernels (cpu/isa.h).
#if BRISK_CPU_DISPATCH
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "brisk/kernels/settings.h"
#include "brisk/util/error.h"
#include "cpu/isa.h"

namespace brisk::kernels {

namespace {

using cpu::Isa;

constexpr const char* kNames[] = {"baseline", "avx2", "avx512"};

#if BRISK_CPU_DISPATCH
// The x86 features the copies are compiled for, read with CPUID, and whether the OS saves the
// wider registers (XCR0, read with XGETBV): AVX state for avx2, also the AVX-512 state for avx512.
// CPUID directly rather than __builtin_cpu_supports: clang 14 does not know "f16c" there.
struct CpuFeatures {
  bool avx2 = false, fma = false, bmi1 = false, bmi2 = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512cd = false, avx512dq = false, avx512vl = false;
};

CpuFeatures detect_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_saved = (xcr0_lo & 0x6) == 0x6;    // SSE and AVX state
  const bool zmm_saved = (xcr0_lo & 0xe6) == 0xe6;  // and opmask, ZMM0-15 upper halves, ZMM16-31
  if (!ymm_saved) return f;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.bmi1 = (b >> 3) & 1;
  f.avx2 = (b >> 5) & 1;
  f.bmi2 = (b >> 8) & 1;
  if (!zmm_saved) return f;
  f.avx512f = (b >> 16) & 1;
  f.avx512dq = (b >> 17) & 1;
  f.avx512cd = (b >> 28) & 1;
  f.avx512bw = (b >> 30) & 1;
  f.avx512vl = (b >> 31) & 1;
  return f;
}
#endif

// Whether this CPU (and the OS) runs a copy: AVX2, FMA, BMI1/2 and F16C for avx2 (x86-64-v3: every
// such CPU also has its LZCNT and MOVBE), AVX-512 F/BW/CD/DQ/VL for avx512 (x86-64-v4), as the
// copies are compiled (-march=x86-64-v3 / -v4).
bool cpu_runs(Isa isa) {
#if BRISK_CPU_DISPATCH
  static const CpuFeatures f = detect_features();
  switch (isa) {
    case Isa::Baseline:
      return true;
    case Isa::Avx2:
      return f.avx2 && f.fma && f.bmi1 && f.bmi2 && f.f16c;
    case Isa::Avx512:
      return cpu_runs(Isa::Avx2) && f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl;
  }
  return false;
#else
  return isa == Isa::Baseline;
#endif
}

std::vector<Isa> available() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Baseline, Isa::Avx2, Isa::Avx512})
    if (cpu_runs(isa)) v.push_back(isa);
  return v;
}

std::string name_of(Isa isa) {
#if !BRISK_CPU_DISPATCH && BRISK_CPU_NATIVE
  (void)isa;
  return "native";
#else
  return kNames[static_cast<int>(isa)];
#endif
}

std::string available_list() {
  std::string s;
  for (Isa isa : available()) s += (s.empty() ? "" : ", ") + name_of(isa);
  return s;
}

// `name` as a copy this build carries and this CPU runs; throws naming the valid values.
Isa parse(const std::string& name, const char* where) {
  for (Isa isa : available())
    if (name == name_of(isa)) return isa;
  for (int i = 0; i < 3; ++i)
    BRISK_CHECK(name != kNames[i], where, "=", name, ": ",
                BRISK_CPU_DISPATCH ? "this CPU does not run the " : "this build of brisk has no ", name,
                " copy of the CPU kernels", BRISK_CPU_DISPATCH ? "" : " (a portable build, BRISK_NATIVE=OFF, has them)",
                "; available here: ", available_list());
  BRISK_THROW(where, "=", name,
              ": unknown instruction set; valid values: baseline, avx2, avx512 (available here: ", available_list(),
              ")");
}

// -1 until chosen: the best copy this CPU runs, or BRISK_CPU_ISA's.
std::atomic<int> g_isa{-1};

}  // namespace

Isa cpu::active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<Isa>(v);
  Isa isa = available().back();
  if (const char* env = std::getenv("BRISK_CPU_ISA"); env && *env && std::string(env) != "auto")
    isa = parse(env, "BRISK_CPU_ISA");
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return isa;
}

std::string cpu_isa() {
  return name_of(cpu::active_isa());
}

std::vector<std::string> cpu_isas_available() {
  std::vector<std::string> v;
  for (Isa isa : available()) v.push_back(name_of(isa));
  return v;
}

void set_cpu_isa(const std::string& isa) {
  g_isa.store(static_cast<int>(parse(isa, "set_cpu_isa")), std::memory_order_relaxed);
}

}  // namespace brisk::kernels
