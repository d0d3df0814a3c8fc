// The run-time choice among the copies of the hot CPU kernels (cpu/isa.h).
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

// Whether this CPU (and the OS, which must save the wider registers: libgcc checks XCR0) runs a
// copy: AVX2, FMA, BMI1/2 and F16C for avx2 (x86-64-v3: every such CPU also has its LZCNT and
// MOVBE), AVX-512 F/BW/CD/DQ/VL for avx512 (x86-64-v4), as the copies are compiled
// (-march=x86-64-v3 / -v4). Feature by feature, which GCC and Clang both know.
bool cpu_runs(Isa isa) {
#if BRISK_CPU_DISPATCH
  switch (isa) {
    case Isa::Baseline:
      return true;
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c");
    case Isa::Avx512:
      return cpu_runs(Isa::Avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
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
