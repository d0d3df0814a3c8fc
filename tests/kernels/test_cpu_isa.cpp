// The copies of the hot CPU kernels (baseline, AVX2, AVX-512 in a portable build; one "native"
// copy in a -march=native build): the chosen one is reported, an unknown or unavailable one is an
// error naming the valid values, and every copy this CPU runs computes what the baseline copy
// computes within rounding (the copies may contract a * b + c into one FMA, so bits may differ;
// each copy on its own is independent of the thread count: tests/CMakeLists.txt runs the whole
// of test_kernels, thread-independence tests included, once per copy with BRISK_CPU_ISA set).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/conv.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/nn.h>
#include <brisk/kernels/optim.h>
#include <brisk/kernels/reduce.h>
#include <brisk/kernels/settings.h>
#include <brisk/util/error.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/random.h"

using namespace brisk;

namespace {

// Run under BRISK_CPU_ISA=<copy> (tests/CMakeLists.txt) on a CPU without that copy: skip the
// whole binary (exit 77, CTest's SKIP_RETURN_CODE) rather than fail every kernel call.
const bool kSkipUnavailable = [] {
  const char* env = std::getenv("BRISK_CPU_ISA");
  if (!env || !*env || std::string(env) == "auto") return false;
  const std::vector<std::string> have = kernels::cpu_isas_available();
  if (std::find(have.begin(), have.end(), env) != have.end()) return false;
  std::printf("BRISK_CPU_ISA=%s: this CPU or build lacks that copy of the kernels; skipping\n", env);
  std::exit(77);
}();

// Seeded standard-normal values, f32 unless asked.
Tensor isa_rnd(const Shape& s, uint64_t seed, DType dt = DType::F32) {
  return brisk::testing::seeded_randn(s, seed, dt);
}

// Restores the copy in use when the test started.
class IsaGuard {
 public:
  IsaGuard() : saved_(kernels::cpu_isa()) {}
  ~IsaGuard() { kernels::set_cpu_isa(saved_); }

 private:
  std::string saved_;
};

// The outputs of f on every available copy, compared with the first (baseline) copy's:
// |got - want| <= atol + rtol * |want| elementwise, NaN where NaN.
void expect_copies_agree(const std::string& what, const std::function<std::vector<Tensor>()>& f, double rtol = 2e-5,
                         double atol = 2e-6) {
  IsaGuard guard;
  const std::vector<std::string> isas = kernels::cpu_isas_available();
  kernels::set_cpu_isa(isas.front());
  std::vector<std::vector<double>> want;
  for (const Tensor& t : f()) want.push_back(t.contiguous().to(DType::F64).to_vector<double>());
  for (size_t k = 1; k < isas.size(); ++k) {
    kernels::set_cpu_isa(isas[k]);
    const std::vector<Tensor> got = f();
    int64_t inexact = 0, total = 0;  // elements whose bits differ from the baseline copy's: shown, not judged
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      const std::vector<double> g = got[i].contiguous().to(DType::F64).to_vector<double>();
      ASSERT_EQ(g.size(), want[i].size()) << what << ", output " << i;
      int64_t bad = 0;
      double worst = 0;
      for (size_t j = 0; j < g.size(); ++j) {
        const double w = want[i][j], d = std::abs(g[j] - w);
        inexact += !(g[j] == w || (std::isnan(w) && std::isnan(g[j])));
        ++total;
        const bool ok = std::isnan(w) ? std::isnan(g[j]) : d <= atol + rtol * std::abs(w);
        if (!ok) {
          ++bad;
          worst = std::max(worst, d);
        }
      }
      EXPECT_EQ(bad, 0) << what << ", output " << i << ": " << bad << " of " << g.size() << " elements of the "
                        << isas[k] << " copy differ from the " << isas.front() << " copy (largest difference " << worst
                        << ")";
    }
    std::printf("%s: the %s copy differs from the %s copy in the last bits of %lld of %lld elements\n", what.c_str(),
                isas[k].c_str(), isas.front().c_str(), static_cast<long long>(inexact), static_cast<long long>(total));
  }
}

}  // namespace

TEST(CpuIsa, TheChosenCopyIsAvailableAndTheBestOneByDefault) {
  (void)kSkipUnavailable;
  const std::vector<std::string> isas = kernels::cpu_isas_available();
  ASSERT_FALSE(isas.empty());
  EXPECT_TRUE(isas.front() == "baseline" || isas.front() == "native") << isas.front();
  const char* env = std::getenv("BRISK_CPU_ISA");
  if (env && *env && std::string(env) != "auto")
    EXPECT_EQ(kernels::cpu_isa(), env);
  else
    EXPECT_EQ(kernels::cpu_isa(), isas.back());
  std::string all;
  for (const std::string& s : isas) all += s + " ";
  std::printf("copies of the CPU kernels this CPU runs: %s(in use: %s)\n", all.c_str(), kernels::cpu_isa().c_str());
}

// A portable build reads CPUID itself (kernels/src/cpu_isa.cpp): the copies it offers are those
// the CPU flags Linux reports allow (Linux lists a feature only where the OS saves its registers).
TEST(CpuIsa, APortableBuildOffersTheCopiesTheCpuFlagsAllow) {
  const std::vector<std::string> isas = kernels::cpu_isas_available();
  if (isas.front() != "baseline") GTEST_SKIP() << "a native build: one copy, no run-time choice";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;) flags.insert(w);
      break;
    }
  if (flags.empty()) GTEST_SKIP() << "no CPU flags in /proc/cpuinfo";
  auto all = [&](std::initializer_list<const char*> names) {
    return std::all_of(names.begin(), names.end(), [&](const char* n) { return flags.count(n) > 0; });
  };
  const bool avx2 = all({"avx2", "fma", "bmi1", "bmi2", "f16c"});
  const bool avx512 = avx2 && all({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"});
  std::vector<std::string> want = {"baseline"};
  if (avx2) want.emplace_back("avx2");
  if (avx512) want.emplace_back("avx512");
  EXPECT_EQ(isas, want);
}

TEST(CpuIsa, AnUnknownOrUnavailableCopyIsAnErrorNamingTheValidValues) {
  IsaGuard guard;
  try {
    kernels::set_cpu_isa("sse9");
    FAIL() << "set_cpu_isa(\"sse9\") did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid values: baseline, avx2, avx512"), std::string::npos) << e.what();
  }
  const std::vector<std::string> isas = kernels::cpu_isas_available();
  for (const char* name : {"baseline", "avx2", "avx512"}) {
    if (std::find(isas.begin(), isas.end(), name) != isas.end()) continue;
    try {
      kernels::set_cpu_isa(name);
      FAIL() << "set_cpu_isa(\"" << name << "\") did not throw although this CPU or build lacks it";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("available here"), std::string::npos) << e.what();
    }
  }
  for (const std::string& name : isas) {
    kernels::set_cpu_isa(name);
    EXPECT_EQ(kernels::cpu_isa(), name);
  }
}

TEST(CpuIsa, ElementwiseAndActivationsAgree) {
  // Odd sizes: vector bodies and scalar tails; wide ranges: exp/tanh's range guards.
  Tensor x = mul(isa_rnd({4099}, 1), full({}, 6.0));
  Tensor y = isa_rnd({4099}, 2), g = isa_rnd({4099}, 3);
  Tensor xh = x.to(DType::BF16);
  expect_copies_agree("unary / binary", [&] {
    std::vector<Tensor> out;
    for (auto op : {kernels::UnaryOp::Exp, kernels::UnaryOp::Tanh, kernels::UnaryOp::Sigmoid, kernels::UnaryOp::Silu,
                    kernels::UnaryOp::GeluTanh, kernels::UnaryOp::GeluErf, kernels::UnaryOp::Relu,
                    kernels::UnaryOp::Square, kernels::UnaryOp::Neg}) {
      Tensor yv = kernels::unary(op, x);
      out.push_back(yv);
      out.push_back(kernels::unary_backward(op, g, x, yv));
    }
    out.push_back(kernels::unary(kernels::UnaryOp::Tanh, xh));
    for (auto op : {kernels::BinaryOp::Add, kernels::BinaryOp::Mul, kernels::BinaryOp::Div, kernels::BinaryOp::Maximum})
      out.push_back(kernels::binary(op, x, y));
    out.push_back(kernels::binary_scalar(kernels::BinaryOp::Mul, x, 0.37));
    out.push_back(kernels::clamp(x, -1.0, 2.0));
    out.push_back(kernels::cast(x, DType::F16));
    return out;
  });
}

TEST(CpuIsa, SoftmaxReductionsAndLossesAgree) {
  Tensor x = isa_rnd({97, 1003}, 11), gy = isa_rnd({97, 1003}, 12), xc = isa_rnd({16, 70, 37}, 13);
  Generator gen(14);
  Tensor targets = randint(0, 1003, {97}, {.dtype = DType::I64}, &gen);
  expect_copies_agree("softmax / reductions / cross_entropy", [&] {
    Tensor y = kernels::softmax(x, 1), ly = kernels::log_softmax(x, 1);
    kernels::ClassLossResult ce = kernels::cross_entropy(x, targets, -100, 0.1, kernels::Reduction::Mean);
    Tensor gce = kernels::cross_entropy_backward(ones({}, {}), x, targets, ce, -100, 0.1, kernels::Reduction::Mean);
    return std::vector<Tensor>{y,
                               ly,
                               kernels::softmax_backward(gy, y, 1),
                               kernels::softmax(xc, 1),
                               ce.loss,
                               gce,
                               kernels::sum(x, {1}),
                               kernels::sum(xc, {0, 2}),
                               kernels::mean(x, {0}),
                               kernels::var(x, {1}),
                               kernels::logsumexp(x, {1}),
                               kernels::amax(x, {1}),
                               kernels::total_norm({x, xc}, 2.0)};
  });
}

TEST(CpuIsa, ConvPoolingAndNormsAgree) {
  Tensor x = isa_rnd({6, 16, 14, 14}, 21), w = isa_rnd({32, 16, 3, 3}, 22), b = isa_rnd({32}, 23);
  Tensor xb = isa_rnd({9, 24, 13, 13}, 24), wb = isa_rnd({24}, 25), bb = isa_rnd({24}, 26),
         gb = isa_rnd({9, 24, 13, 13}, 27);
  Tensor xl = isa_rnd({33, 300}, 28), wl = isa_rnd({300}, 29), bl = isa_rnd({300}, 30), gl = isa_rnd({33, 300}, 31);
  expect_copies_agree(
      "conv / pool / batch_norm / layer_norm",
      [&] {
        const Conv2dOptions o{.padding = 1};
        Tensor y = kernels::conv2d(x, w, b, o);
        kernels::Conv2dGrads cg = kernels::conv2d_backward(isa_rnd(y.sizes(), 32), x, w, o, true, true, true);
        kernels::MaxPool2dResult mp = kernels::max_pool2d(y, {2, 2});
        Tensor gmax = kernels::max_pool2d_backward(isa_rnd(mp.values.sizes(), 33), mp.indices, y.sizes());
        kernels::MaxPool2dTaps mt = kernels::max_pool2d_taps(y, {2, 2}, {}, true);
        Tensor gtap = kernels::max_pool2d_taps_backward(isa_rnd(mt.values.sizes(), 34), mt.taps, y.sizes(), {2, 2});
        Tensor ya = kernels::avg_pool2d(y, {3, 3}, {.stride = 2, .padding = 1});
        Tensor rm = zeros({24}), rv = ones({24});
        kernels::BatchNormResult bn = kernels::batch_norm(xb, wb, bb, rm, rv, true, 0.1, 1e-5);
        kernels::BatchNormGrads bg =
            kernels::batch_norm_backward(gb, xb, wb, bn.save_mean, bn.save_invstd, true, {true, true, true});
        kernels::LayerNormResult ln = kernels::layer_norm(xl, {300}, wl, bl, 1e-5);
        kernels::LayerNormGrads lg = kernels::layer_norm_backward(gl, xl, ln.mean, ln.rstd, wl, {true, true, true});
        return std::vector<Tensor>{y,         cg.input,   cg.weight, cg.bias, mp.values, mp.indices, gmax,
                                   mt.values, mt.taps,    gtap,      ya,      bn.y,      rm,         rv,
                                   bg.dx,     bg.dweight, bg.dbias,  ln.y,    lg.dx,     lg.dweight};
      },
      1e-4, 1e-4);
}

TEST(CpuIsa, OptimizerUpdatesAgree) {
  expect_copies_agree("adam / sgd", [&] {
    std::vector<Tensor> p = {isa_rnd({1031}, 41), isa_rnd({17, 33}, 42)},
                        g = {isa_rnd({1031}, 43), isa_rnd({17, 33}, 44)};
    std::vector<Tensor> m = {zeros({1031}), zeros({17, 33})}, v = {zeros({1031}), zeros({17, 33})};
    for (int64_t step = 1; step <= 3; ++step)
      kernels::adam_step(p, g, m, v, {},
                         {.lr = 1e-3,
                          .beta1 = 0.9,
                          .beta2 = 0.999,
                          .eps = 1e-8,
                          .weight_decay = 0.01,
                          .decoupled = true,
                          .amsgrad = false,
                          .maximize = false,
                          .step = step});
    std::vector<Tensor> q = {isa_rnd({1031}, 45)}, buf = {zeros({1031})};
    kernels::sgd_step(q, {isa_rnd({1031}, 46)}, buf,
                      {.lr = 0.1,
                       .momentum = 0.9,
                       .dampening = 0,
                       .weight_decay = 1e-4,
                       .nesterov = true,
                       .maximize = false,
                       .first_step = true});
    return std::vector<Tensor>{p[0], p[1], m[0], v[1], q[0], buf[0]};
  });
}
