// bf16 products with the CPU's bf16 dot-product instructions (kernels/cpu/gemm_bf16.cpp): the raw
// kernel against a double-precision reference on every layout and awkward size, matmul and linear
// against the f32 conversion path, bits independent of the thread count, and the switch. The
// kernel tests skip on CPUs without AVX512_BF16 (the switch's refusal is tested there instead).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/linalg.h>
#include <brisk/kernels/threads.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace brisk;

namespace {

#define SKIP_WITHOUT_BF16_DOT()                                                                         \
  if (!kernels::cpu_bf16_dot_available())                                                               \
  GTEST_SKIP() << "this CPU has no bf16 dot-product instructions (AVX512_BF16): bf16 products convert " \
                  "to f32 here"

// Restores the switch when a test ends.
struct Bf16DotGuard {
  bool saved = kernels::cpu_bf16_dot();
  ~Bf16DotGuard() { kernels::set_cpu_bf16_dot(saved); }
};

std::vector<BFloat16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<BFloat16> v(static_cast<size_t>(n));
  for (auto& x : v) x = BFloat16(dist(gen));
  return v;
}

}  // namespace

// C = op(A) op(B) + beta C against sums in double of the same bf16 values, for every layout, sizes
// off every tile and block multiple (odd K, K across several k blocks, one row, one column), row
// strides larger than the rows, and beta 0 (C's NaNs must not leak) and 1.
TEST(Bf16Dot, KernelMatchesADoubleReferenceOnEveryLayoutAndSize) {
  SKIP_WITHOUT_BF16_DOT();
  Bf16DotGuard guard;
  kernels::set_cpu_bf16_dot(true);
  struct Size {
    int64_t M, N, K;
  };
  const Size sizes[] = {{1, 1, 1},     {5, 3, 2},    {13, 33, 7},  {12, 32, 384},
                        {97, 65, 385}, {1, 700, 50}, {300, 1, 45}, {130, 545, 1031}};
  for (const Size& s : sizes) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      const int64_t lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 5, ldc = s.N + 2;
      const auto A = random_bf16((ta ? s.K : s.M) * lda, 1 + layout), B = random_bf16((tb ? s.N : s.K) * ldb, 7);
      for (float beta : {0.0f, 1.0f}) {
        std::vector<float> C(static_cast<size_t>(s.M * ldc), beta == 0.0f ? NAN : 0.5f);
        kernels::gemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
        int64_t bad = 0;
        for (int64_t i = 0; i < s.M; ++i) {
          for (int64_t j = 0; j < s.N; ++j) {
            double ref = beta * 0.5, mag = std::abs(ref);
            for (int64_t k = 0; k < s.K; ++k) {
              const double p = static_cast<double>(static_cast<float>(ta ? A[k * lda + i] : A[i * lda + k])) *
                               static_cast<float>(tb ? B[j * ldb + k] : B[k * ldb + j]);
              ref += p;
              mag += std::abs(p);
            }
            // f32 sums of K exact products: within K ulps of the magnitude, far less in practice.
            const double tol = 1e-6 * mag + 1e-30;
            if (!(std::abs(C[i * ldc + j] - ref) <= tol) && bad++ < 3)
              ADD_FAILURE() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " ta=" << ta << " tb=" << tb
                            << " beta=" << beta << ": C(" << i << ", " << j << ") = " << C[i * ldc + j]
                            << ", reference " << ref;
          }
          for (int64_t j = s.N; j < ldc; ++j)
            EXPECT_TRUE(beta == 0.0f ? std::isnan(C[i * ldc + j]) : C[i * ldc + j] == 0.5f)
                << "wrote past the row's end at (" << i << ", " << j << ")";
        }
      }
    }
  }
}

// matmul and linear (bias, GELU epilogue, batches, transposed views) on bf16 tensors give what the
// f32 conversion path gives, within a bf16 rounding: the two differ only in f32 summation order.
TEST(Bf16Dot, MatmulAndLinearAgreeWithTheConversionPath) {
  SKIP_WITHOUT_BF16_DOT();
  Bf16DotGuard guard;
  Generator gen(3);
  auto r = [&](const Shape& s) { return randn(s, {.dtype = DType::BF16}, &gen); };
  const Tensor a = r({4, 37, 96}), b = r({4, 96, 53}), w = r({70, 96}), bias = r({70}), x = r({3, 29, 96});
  const Tensor shared = r({96, 41}), at = r({96, 37}).transpose(0, 1);
  auto run = [&] {
    return std::vector<Tensor>{kernels::matmul(a, b),
                               kernels::matmul(a, shared),
                               kernels::matmul(at, shared),
                               kernels::linear(x, w, bias),
                               kernels::linear(x, w, Tensor(), kernels::LinearEpilogue::GeluTanh),
                               kernels::linear(x, w, bias, kernels::LinearEpilogue::GeluTanh)};
  };
  kernels::set_cpu_bf16_dot(true);
  const auto dot = run();
  kernels::set_cpu_bf16_dot(false);
  const auto conv = run();
  for (size_t i = 0; i < dot.size(); ++i) {
    ASSERT_EQ(dot[i].dtype(), DType::BF16) << "result " << i;
    ASSERT_EQ(dot[i].sizes(), conv[i].sizes()) << "result " << i;
    const Tensor d = dot[i].to(DType::F32), c = conv[i].to(DType::F32);
    // One bf16 rounding step apart at most (2^-8 relative), where the f32 sums straddle a rounding boundary.
    const double worst = (d - c).abs().max().item<double>(), scale = c.abs().max().item<double>();
    EXPECT_LE(worst, scale * std::ldexp(1.0, -8)) << "result " << i;
    EXPECT_GT(d.eq(c).to(DType::F32).mean().item<double>(), 0.9)
        << "result " << i << ": most elements should round to the same bf16";
  }
}

// The panels of a product are planned from its sizes alone: 1, 2 and 3 threads give the same bits.
TEST(Bf16Dot, ResultsDoNotDependOnTheThreadCount) {
  SKIP_WITHOUT_BF16_DOT();
  Bf16DotGuard guard;
  kernels::set_cpu_bf16_dot(true);
  Generator gen(5);
  const Tensor a = randn({1030, 385}, {.dtype = DType::BF16}, &gen),
               b = randn({385, 2100}, {.dtype = DType::BF16}, &gen);
  const Tensor ba = randn({5, 200, 64}, {.dtype = DType::BF16}, &gen),
               bb = randn({5, 64, 300}, {.dtype = DType::BF16}, &gen);
  const int saved = get_num_threads();
  std::vector<std::vector<unsigned char>> ref;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<std::vector<unsigned char>> got;
    for (const Tensor& t : {kernels::matmul(a, b), kernels::matmul(ba, bb)}) {
      const Tensor c = t.contiguous();
      got.emplace_back(static_cast<const unsigned char*>(c.data_ptr()),
                       static_cast<const unsigned char*>(c.data_ptr()) + c.nbytes());
    }
    if (ref.empty())
      ref = got;
    else
      EXPECT_TRUE(got == ref) << threads << " threads changed the bits";
  }
  set_num_threads(saved);
}

// Where the CPU lacks the instructions, asking for them is an error that says so; switching them
// off always works.
TEST(Bf16Dot, TheSwitchRefusesACpuWithoutTheInstructions) {
  Bf16DotGuard guard;
  kernels::set_cpu_bf16_dot(false);
  EXPECT_FALSE(kernels::cpu_bf16_dot());
  if (kernels::cpu_bf16_dot_available()) {
    kernels::set_cpu_bf16_dot(true);
    EXPECT_TRUE(kernels::cpu_bf16_dot());
  } else {
    try {
      kernels::set_cpu_bf16_dot(true);
      FAIL() << "set_cpu_bf16_dot(true) should throw on this CPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("AVX512_BF16"), std::string::npos) << e.what();
    }
  }
}
