// matmul, linear and gemm against naive triple loops written here: every shape rule of
// matmul (1-D promotion, batch broadcasting), transposed and strided inputs, all float dtypes.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/linalg.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;

namespace {

struct Ref {
  Shape shape;
  std::vector<double> values;
};

// PyTorch's matmul rules, spelled out: promote 1-D operands, broadcast batch dims, multiply
// in double, drop the promoted dims.
Ref naive_matmul(const Tensor& a, const Tensor& b) {
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  Shape as = a.dim() == 1 ? Shape{1, a.size(0)} : a.sizes();
  Shape bs = b.dim() == 1 ? Shape{b.size(0), 1} : b.sizes();
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(ab.size(), bb.size());
  while (ab.size() < nb) ab.insert(ab.begin(), 1);
  while (bb.size() < nb) bb.insert(bb.begin(), 1);
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) batch[i] = std::max(ab[i], bb[i]);
  int64_t count = 1;
  for (int64_t s : batch) count *= s;
  Ref r;
  r.values.assign(static_cast<size_t>(count * M * N), 0.0);
  for (int64_t bi = 0; bi < count; ++bi) {
    // Flat matrix index of a and b for batch index bi (size-1 dims broadcast).
    int64_t rem = bi, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int64_t d = static_cast<int64_t>(nb) - 1; d >= 0; --d) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      ia += (ab[d] == 1 ? 0 : idx) * sa;
      ib += (bb[d] == 1 ? 0 : idx) * sb;
      sa *= ab[d];
      sb *= bb[d];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += av[ia * M * K + i * K + k] * bv[ib * K * N + k * N + j];
        r.values[bi * M * N + i * N + j] = acc;
      }
  }
  r.shape = batch;
  if (a.dim() > 1) r.shape.push_back(M);
  if (b.dim() > 1) r.shape.push_back(N);
  return r;
}

void expect_matches(const Tensor& got, const Ref& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), ref.shape) << what;
  std::vector<double> g = got.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], ref.values[i], tol * (1.0 + std::abs(ref.values[i]))) << what << " element " << i;
}

double tolerance(DType dt) {
  switch (dt) {
    case DType::F64:
      return 1e-12;
    case DType::F32:
      return 1e-5;
    case DType::F16:
      return 2e-3;
    default:
      return 1e-2;
  }
}

struct ShapeCase {
  Shape a, b;
};
const std::vector<ShapeCase> kShapeCases = {
    {{3}, {3}},                    // dot
    {{3}, {3, 4}},                 // vector-matrix
    {{2, 3}, {3}},                 // matrix-vector
    {{2, 3}, {3, 4}},              // matrix-matrix
    {{5, 2, 3}, {3, 4}},           // batch @ matrix
    {{2, 3}, {5, 3, 4}},           // matrix @ batch
    {{5, 2, 3}, {5, 3, 4}},        // batch @ batch
    {{2, 1, 2, 3}, {4, 3, 2}},     // broadcast batch dims
    {{3, 1, 2, 3}, {1, 2, 3, 5}},  // broadcast on both sides
    {{3}, {2, 3, 4}},              // vector @ batch
    {{2, 2, 3}, {3}},              // batch @ vector
    {{4, 1, 3}, {3, 1}},           // M == 1, N == 1
    {{2, 0}, {0, 3}},              // K == 0 gives zeros
};

}  // namespace

TEST(Matmul, DotOfVectorsIsAScalar) {
  Tensor a = tensor<double>({1, 2, 3}), b = tensor<double>({4, 5, 6});
  Tensor c = kernels::matmul(a, b);
  EXPECT_EQ(c.dim(), 0);
  EXPECT_DOUBLE_EQ(c.item<double>(), 32.0);
}

TEST(Matmul, TwoByTwoByHand) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2}), b = from_vector<float>({5, 6, 7, 8}, {2, 2});
  EXPECT_EQ(kernels::matmul(a, b).to_vector<float>(), (std::vector<float>{19, 22, 43, 50}));
}

TEST(Matmul, EveryShapeCaseMatchesNaiveLoopInEveryDtype) {
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    for (const ShapeCase& c : kShapeCases) {
      Generator gen(7);
      Tensor a = randn(c.a, {.dtype = dt}, &gen), b = randn(c.b, {.dtype = dt}, &gen);
      Tensor out = kernels::matmul(a, b);
      EXPECT_EQ(out.dtype(), dt);
      expect_matches(out, naive_matmul(a, b), tolerance(dt),
                     std::string(dtype_name(dt)) + " " + shape_str(c.a) + " @ " + shape_str(c.b));
    }
  }
}

TEST(Matmul, TransposedOperandsAreReadInPlace) {
  Generator gen(1);
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor at = randn({4, 3}, {.dtype = dt}, &gen).t();  // (3, 4), column-major
    Tensor bt = randn({5, 4}, {.dtype = dt}, &gen).t();  // (4, 5), column-major
    Tensor b = randn({4, 5}, {.dtype = dt}, &gen);
    expect_matches(kernels::matmul(at, bt), naive_matmul(at, bt), tolerance(dt), "t @ t");
    expect_matches(kernels::matmul(at, b), naive_matmul(at, b), tolerance(dt), "t @ n");
    Tensor batched = randn({2, 4, 3}, {.dtype = dt}, &gen).transpose(1, 2);  // (2, 3, 4)
    expect_matches(kernels::matmul(batched, bt), naive_matmul(batched, bt), tolerance(dt), "batched t @ t");
    expect_matches(kernels::matmul(bt.t(), batched.transpose(1, 2)), naive_matmul(bt.t(), batched.transpose(1, 2)),
                   tolerance(dt), "n @ batched t");
  }
}

TEST(Matmul, StridedAndExpandedOperandsMatchNaiveLoop) {
  Generator gen(2);
  Tensor big = randn({6, 8}, {.dtype = DType::F64}, &gen);
  Tensor every_other = slice(big, 1, 0, 8, 2);  // (6, 4), column stride 2
  Tensor b = randn({4, 3}, {.dtype = DType::F64}, &gen);
  expect_matches(kernels::matmul(every_other, b), naive_matmul(every_other, b), 1e-12, "column stride 2");
  Tensor rows = slice(big, 0, 0, 6, 2);  // (3, 8), row stride 16
  Tensor c = randn({8, 2}, {.dtype = DType::F64}, &gen);
  expect_matches(kernels::matmul(rows, c), naive_matmul(rows, c), 1e-12, "row stride 16");
  Tensor expanded = randn({1, 2, 4}, {.dtype = DType::F64}, &gen).expand({3, 2, 4});
  Tensor bb = randn({3, 4, 5}, {.dtype = DType::F64}, &gen);
  expect_matches(kernels::matmul(expanded, bb), naive_matmul(expanded, bb), 1e-12, "expanded batch");
  Tensor vec = slice(randn({8}, {.dtype = DType::F64}, &gen), 0, 0, 8, 2);  // 1-D, stride 2
  expect_matches(kernels::matmul(vec, b), naive_matmul(vec, b), 1e-12, "strided vector");
  expect_matches(kernels::matmul(every_other, vec), naive_matmul(every_other, vec), 1e-12, "matrix @ strided vector");
  Tensor permuted = randn({3, 4, 2}, {.dtype = DType::F64}, &gen).permute({2, 0, 1});  // (2, 3, 4)
  expect_matches(kernels::matmul(permuted, b), naive_matmul(permuted, b), 1e-12, "permuted batch");
}

TEST(Matmul, LargeProductIsDeterministic) {
  Generator gen(3);
  Tensor a = randn({4, 128, 96}, {}, &gen), b = randn({96, 160}, {}, &gen);
  Tensor c1 = kernels::matmul(a, b), c2 = kernels::matmul(a, b);
  EXPECT_EQ(c1.to_vector<float>(), c2.to_vector<float>());
  expect_matches(c1, naive_matmul(a, b), 1e-4, "large");
}

TEST(Gemm, AllTransposeCombinationsWithAlphaBetaAndPaddedRows) {
  Generator gen(4);
  const int64_t M = 3, N = 4, K = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Stored A is (M, K) or (K, M), each row padded by 2; same for B; C padded by 1.
      const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
      const int64_t lda = ac + 2, ldb = bc + 2, ldc = N + 1;
      std::vector<double> A = randn({ar * lda}, {.dtype = DType::F64}, &gen).to_vector<double>();
      std::vector<double> B = randn({br * ldb}, {.dtype = DType::F64}, &gen).to_vector<double>();
      std::vector<double> C = randn({M * ldc}, {.dtype = DType::F64}, &gen).to_vector<double>();
      auto opa = [&](int64_t i, int64_t k) { return ta ? A[k * lda + i] : A[i * lda + k]; };
      auto opb = [&](int64_t k, int64_t j) { return tb ? B[j * ldb + k] : B[k * ldb + j]; };
      std::vector<double> expect = C;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += opa(i, k) * opb(k, j);
          expect[i * ldc + j] = 0.5 * acc + 2.0 * C[i * ldc + j];
        }
      std::vector<double> C64 = C;
      kernels::gemm(ta, tb, M, N, K, 0.5, A.data(), lda, B.data(), ldb, 2.0, C64.data(), ldc);
      std::vector<float> Af(A.begin(), A.end()), Bf(B.begin(), B.end()), C32(C.begin(), C.end());
      kernels::gemm(ta, tb, M, N, K, 0.5f, Af.data(), lda, Bf.data(), ldb, 2.0f, C32.data(), ldc);
      for (size_t i = 0; i < expect.size(); ++i) {
        EXPECT_NEAR(C64[i], expect[i], 1e-12) << ta << tb << " element " << i;
        EXPECT_NEAR(C32[i], expect[i], 1e-5) << ta << tb << " element " << i;
      }
    }
  }
}

TEST(Gemm, BetaZeroOverwritesNaNsInC) {
  std::vector<float> A = {1, 2}, B = {3, 4}, C = {std::numeric_limits<float>::quiet_NaN()};
  kernels::gemm(false, false, 1, 1, 2, 1.0f, A.data(), 2, B.data(), 1, 0.0f, C.data(), 1);
  EXPECT_EQ(C[0], 11.0f);
}

// OpenBLAS computes the CPU GEMMs whenever this build has it and the environment does not ask
// for Eigen, except where Eigen is compiled for AVX-512 and OpenBLAS runs AVX2 kernels on this
// CPU (then the report says why Eigen); asking for one that cannot be used says why.
TEST(Gemm, CpuGemmLibraryIsOpenBLASWhenUsableAndReportsItself) {
  const char* env = std::getenv("BRISK_BLAS");
  if (env && *env) GTEST_SKIP() << "BRISK_BLAS=" << env << " chooses the library";
  const std::string line = kernels::cpu_gemm_description();
  EXPECT_TRUE(kernels::cpu_gemm_available(kernels::CpuGemm::Eigen));
  if (kernels::cpu_gemm_available(kernels::CpuGemm::OpenBLAS) && kernels::cpu_gemm() == kernels::CpuGemm::Eigen) {
    EXPECT_NE(line.find("preferred: OpenBLAS runs its"), std::string::npos) << line;
    EXPECT_NE(line.find("on this AVX-512 CPU"), std::string::npos) << line;
  } else if (kernels::cpu_gemm_available(kernels::CpuGemm::OpenBLAS)) {
    EXPECT_EQ(kernels::cpu_gemm(), kernels::CpuGemm::OpenBLAS);
    EXPECT_EQ(line.rfind("OpenBLAS", 0), 0u) << line;
    EXPECT_NE(line.find("1 thread per call"), std::string::npos) << line;
  } else {
    EXPECT_EQ(kernels::cpu_gemm(), kernels::CpuGemm::Eigen);
    EXPECT_EQ(line.rfind("Eigen", 0), 0u) << line;
    const std::string err = brisk::testing::error_of([] { kernels::set_cpu_gemm(kernels::CpuGemm::OpenBLAS); });
    EXPECT_NE(err.find("OpenBLAS cannot be used"), std::string::npos) << err;
  }
}

TEST(Gemm, RejectsLeadingDimensionSmallerThanRow) {
  std::vector<double> A(6), B(6), C(4);
  EXPECT_THROW(kernels::gemm(false, false, 2, 2, 3, 1.0, A.data(), 2, B.data(), 2, 0.0, C.data(), 2), Error);
}

namespace {
// y[r, o] = sum_i x[r, i] * w[o, i] + b[o], written out.
std::vector<double> naive_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>();
  const int64_t in = w.size(1), out = w.size(0), rows = x.numel() / in;
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bv.empty() ? 0.0 : bv[o];
      for (int64_t i = 0; i < in; ++i) acc += xv[r * in + i] * wv[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}
}  // namespace

TEST(Linear, MatchesNaiveWithAndWithoutBiasForAnyLeadingDims) {
  Generator gen(5);
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    for (const Shape& xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
      Tensor x = randn(xs, {.dtype = dt}, &gen), w = randn({5, 4}, {.dtype = dt}, &gen);
      Tensor b = randn({5}, {.dtype = dt}, &gen);
      for (bool with_bias : {true, false}) {
        Tensor y = kernels::linear(x, w, with_bias ? b : Tensor());
        Shape expect_shape = xs;
        expect_shape.back() = 5;
        ASSERT_EQ(y.sizes(), expect_shape);
        std::vector<double> ref = naive_linear(x, w, with_bias ? b : Tensor()), got = y.to_vector<double>();
        for (size_t i = 0; i < ref.size(); ++i)
          EXPECT_NEAR(got[i], ref[i], tolerance(dt) * 4 * (1 + std::abs(ref[i]))) << dtype_name(dt) << " " << i;
      }
    }
  }
}

TEST(Linear, GeluEpilogueIsGeluTanhOfTheAffineResult) {
  Generator gen(8);
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    Tensor x = randn({3, 4, 6}, {.dtype = dt}, &gen), w = randn({5, 6}, {.dtype = dt}, &gen);
    Tensor b = randn({5}, {.dtype = dt}, &gen);
    for (bool with_bias : {true, false}) {
      const Tensor bias = with_bias ? b : Tensor();
      Tensor got = kernels::linear(x, w, bias, kernels::LinearEpilogue::GeluTanh);
      // In f32 (f64) before the one rounding to the storage dtype, as the fused GPU epilogue.
      const DType ct = dt == DType::F64 ? DType::F64 : DType::F32;
      Tensor affine = kernels::linear(x.to(ct), w.to(ct), with_bias ? b.to(ct) : Tensor());
      Tensor want = kernels::unary(kernels::UnaryOp::GeluTanh, affine).to(dt);
      ASSERT_EQ(got.sizes(), (Shape{3, 4, 5}));
      EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << dtype_name(dt);
    }
  }
  // No input features: gelu(bias).
  Tensor empty_in = zeros({2, 0}), w0 = zeros({3, 0}), b3 = tensor<float>({-1.0f, 0.0f, 2.0f});
  Tensor y = kernels::linear(empty_in, w0, b3, kernels::LinearEpilogue::GeluTanh);
  Tensor want = kernels::unary(kernels::UnaryOp::GeluTanh, b3);
  EXPECT_EQ(y.to_vector<float>(),
            (std::vector<float>{want.to_vector<float>()[0], want.to_vector<float>()[1], want.to_vector<float>()[2],
                                want.to_vector<float>()[0], want.to_vector<float>()[1], want.to_vector<float>()[2]}));
  EXPECT_EQ(kernels::linear(empty_in, w0, Tensor()).to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(Linear, StridedInputAndTransposedWeight) {
  Generator gen(6);
  Tensor x = randn({4, 3, 2}, {.dtype = DType::F64}, &gen).permute({2, 1, 0});  // (2, 3, 4), strided
  Tensor w = randn({4, 5}, {.dtype = DType::F64}, &gen).t();                    // (5, 4), column-major
  Tensor b = randn({5}, {.dtype = DType::F64}, &gen);
  std::vector<double> ref = naive_linear(x, w, b), got = kernels::linear(x, w, b).to_vector<double>();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-12);
}

TEST(LinalgErrors, MismatchedInnerSizesNameBothShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  try {
    kernels::matmul(a, b);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("matmul"), std::string::npos);
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  }
}

TEST(LinalgErrors, BadArgumentsThrowNamingTheOp) {
  expect_error([] { kernels::matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, "matmul");  // batch 2 vs 3
  expect_error([] { kernels::matmul(zeros({}), zeros({3})); }, "matmul");               // scalar
  expect_error([] { kernels::matmul(zeros({3}), zeros({3}, {.dtype = DType::F64})); }, "matmul");
  expect_error([] { kernels::matmul(zeros({3}, {.dtype = DType::I64}), zeros({3}, {.dtype = DType::I64})); }, "matmul");
  expect_error([] { kernels::linear(zeros({2, 4}), zeros({5, 4, 1}), Tensor()); }, "linear");  // 3-D weight
  expect_error([] { kernels::linear(zeros({2, 4}), zeros({5, 3}), Tensor()); }, "linear");     // in features
  expect_error([] { kernels::linear(zeros({2, 4}), zeros({5, 4}), zeros({4})); }, "linear");   // bias size
}
