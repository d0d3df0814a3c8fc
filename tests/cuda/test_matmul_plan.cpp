// The GPU matmul's layout planning, checked on the host: which operands are read in place,
// transposed or copied, with which leading dimensions and batch strides, and (by running the
// plan through a host emulation of a column-major strided-batched GEMM) that every plan computes
// the right product. In recording mode: which library calls and copies matmul and linear issue.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/linalg.h>
#include <brisk/kernels/matmul_plan.h>

#include <random>
#include <string>
#include <vector>

using namespace brisk;
using kernels::MatmulPlan;
using kernels::OperandAction;
using kernels::plan_matmul;

namespace {

MatmulPlan plan_of(const Tensor& a, const Tensor& b) {
  return plan_matmul(a.sizes(), a.strides(), b.sizes(), b.strides());
}

Tensor arange_f64(const Shape& s, double scale = 0.01) {
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<double>((i * 37) % 101) - 0.5;
  return from_vector<double>(v, s);
}

// What the GPU does before planning again: a contiguous copy, or one expanded to the batch.
Tensor apply(const Tensor& t, OperandAction action, const Shape& batch) {
  if (action == OperandAction::InPlace) return t;
  if (action == OperandAction::Contiguous) return kernels::contiguous(t);
  const int64_t nd = t.dim(), nb = static_cast<int64_t>(batch.size());
  Shape sizes = batch;
  sizes.push_back(t.size(-2));
  sizes.push_back(t.size(-1));
  Strides st(static_cast<size_t>(nb), 0);
  for (int64_t d = 0; d < nd - 2; ++d)
    if (t.size(d) != 1) st[static_cast<size_t>(nb - (nd - 2) + d)] = t.stride(d);
  st.push_back(t.stride(-2));
  st.push_back(t.stride(-1));
  return kernels::contiguous(t.as_strided(sizes, st, t.offset()));
}

// A column-major strided-batched GEMM as cuBLAS defines it, run on the host from the plan:
// C_i (m, n) = op(A_i) (m, k) op(B_i) (k, n), stored element (r, c) of a matrix at r + c * ld.
std::vector<double> emulate_blas(const MatmulPlan& p, const Tensor& a, const Tensor& b) {
  const double* pa = a.data<double>();  // the BLAS's B
  const double* pb = b.data<double>();  // the BLAS's A
  auto at = [](const double* base, const kernels::BlasOperand& o, int64_t batch, int64_t r, int64_t c) {
    // op(X)(r, c): the stored matrix's (r, c), or its (c, r) when transposed.
    const int64_t sr = o.trans ? c : r, sc = o.trans ? r : c;
    EXPECT_LT(sr, o.rows);
    EXPECT_LT(sc, o.cols);
    return base[batch * o.batch_stride + sr + sc * o.ld];
  };
  std::vector<double> c(static_cast<size_t>(p.batch_count * p.stride_c), 0.0);
  for (int64_t i = 0; i < p.batch_count; ++i)
    for (int64_t col = 0; col < p.n; ++col)
      for (int64_t row = 0; row < p.m; ++row) {
        double s = 0;
        for (int64_t kk = 0; kk < p.k; ++kk) s += at(pb, p.b, i, row, kk) * at(pa, p.a, i, kk, col);
        c[static_cast<size_t>(i * p.stride_c + row + col * p.ldc)] = s;
      }
  return c;
}

// Plans a @ b as the GPU does (copies, then a final in-place plan) and checks the emulated BLAS
// result against the CPU's matmul.
void expect_plan_computes_product(Tensor a, Tensor b, const std::string& what) {
  SCOPED_TRACE(what);
  MatmulPlan p = plan_of(a, b);
  if (!p.in_place()) {
    a = apply(a, p.a.action, p.batch);
    b = apply(b, p.b.action, p.batch);
    p = plan_of(a, b);
    ASSERT_TRUE(p.in_place()) << "a plan for copied operands must read them in place";
  }
  EXPECT_EQ(p.ldc, p.m);
  EXPECT_GE(p.a.ld, std::max<int64_t>(1, p.a.rows)) << "cuBLAS needs ld >= rows";
  EXPECT_GE(p.b.ld, std::max<int64_t>(1, p.b.rows));
  const std::vector<double> got = emulate_blas(p, a, b);
  const std::vector<double> want = kernels::matmul(a, b).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

}  // namespace

TEST(MatmulPlan, RowMajorOperandsGoInUntransposed) {
  Tensor a = arange_f64({4, 6}), b = arange_f64({6, 5});
  MatmulPlan p = plan_of(a, b);
  ASSERT_TRUE(p.in_place());
  EXPECT_EQ(p.m, 5);  // C^T = B^T A^T: the BLAS's rows are the output's columns
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.k, 6);
  EXPECT_FALSE(p.a.trans);
  EXPECT_FALSE(p.b.trans);
  EXPECT_EQ(p.a.ld, 6);
  EXPECT_EQ(p.b.ld, 5);
  EXPECT_EQ(p.batch_count, 1);
  EXPECT_TRUE(p.fits_int32);
}

TEST(MatmulPlan, TransposedViewsAreReadInPlaceWithOpT) {
  Tensor a = arange_f64({6, 4}).t(), b = arange_f64({5, 6}).t();  // (4, 6) and (6, 5), column-major
  MatmulPlan p = plan_of(a, b);
  ASSERT_TRUE(p.in_place());
  EXPECT_TRUE(p.a.trans);
  EXPECT_TRUE(p.b.trans);
  EXPECT_EQ(p.a.ld, 4);
  EXPECT_EQ(p.b.ld, 6);
}

TEST(MatmulPlan, RowPaddingBecomesTheLeadingDimension) {
  Tensor a = arange_f64({4, 16}).narrow(1, 2, 6);  // (4, 6) rows 16 apart
  MatmulPlan p = plan_of(a, arange_f64({6, 3}));
  ASSERT_TRUE(p.in_place());
  EXPECT_EQ(p.a.ld, 16);
}

TEST(MatmulPlan, LayoutsNoBlasCanReadAreCopiedContiguous) {
  Tensor every_other = arange_f64({4, 12}).as_strided({4, 6}, {12, 2}, 0);
  MatmulPlan p = plan_of(every_other, arange_f64({6, 3}));
  EXPECT_EQ(p.a.action, OperandAction::Contiguous);
  EXPECT_EQ(p.b.action, OperandAction::InPlace);
  Tensor expanded_rows = arange_f64({1, 6}).expand({4, 6});  // row stride 0
  EXPECT_EQ(plan_of(expanded_rows, arange_f64({6, 3})).a.action, OperandAction::Contiguous);
}

TEST(MatmulPlan, BatchesGetOneStridePerOperand) {
  MatmulPlan p = plan_of(arange_f64({3, 4, 6}), arange_f64({3, 6, 5}));
  ASSERT_TRUE(p.in_place());
  EXPECT_FALSE(p.folded);
  EXPECT_EQ(p.batch_count, 3);
  EXPECT_EQ(p.a.batch_stride, 24);
  EXPECT_EQ(p.b.batch_stride, 30);
  EXPECT_EQ(p.stride_c, 20);
}

TEST(MatmulPlan, ASharedRightOperandFoldsTheBatchIntoRows) {
  MatmulPlan p = plan_of(arange_f64({2, 3, 4, 6}), arange_f64({6, 5}));
  ASSERT_TRUE(p.in_place());
  EXPECT_TRUE(p.folded);
  EXPECT_EQ(p.batch_count, 1);
  EXPECT_EQ(p.n, 24);
  EXPECT_EQ(p.a.ld, 6);
  // Transposed left matrices cannot fold: a batch with the right operand's stride 0.
  MatmulPlan q = plan_of(arange_f64({3, 6, 4}).transpose(1, 2), arange_f64({6, 5}));
  ASSERT_TRUE(q.in_place());
  EXPECT_FALSE(q.folded);
  EXPECT_EQ(q.batch_count, 3);
  EXPECT_EQ(q.b.batch_stride, 0);
}

TEST(MatmulPlan, ASharedLeftOperandHasBatchStrideZero) {
  MatmulPlan p = plan_of(arange_f64({4, 6}), arange_f64({3, 6, 5}));
  ASSERT_TRUE(p.in_place());
  EXPECT_EQ(p.batch_count, 3);
  EXPECT_EQ(p.a.batch_stride, 0);
  EXPECT_EQ(p.b.batch_stride, 30);
  MatmulPlan q = plan_of(arange_f64({1, 4, 6}).expand({3, 4, 6}), arange_f64({3, 6, 5}));
  ASSERT_TRUE(q.in_place());
  EXPECT_EQ(q.a.batch_stride, 0);
}

TEST(MatmulPlan, BroadcastPatternsWithoutOneStrideAreExpanded) {
  MatmulPlan p = plan_of(arange_f64({2, 1, 4, 6}), arange_f64({1, 3, 6, 5}));
  EXPECT_EQ(p.batch, (Shape{2, 3}));
  EXPECT_EQ(p.a.action, OperandAction::Expand);
  EXPECT_EQ(p.b.action, OperandAction::Expand);
  // Batch dims that are one run after a contiguous copy only need that copy.
  Tensor swapped = arange_f64({3, 2, 4, 6}).permute({1, 0, 2, 3});  // (2, 3, 4, 6), batch strides (24, 48)
  EXPECT_EQ(plan_of(swapped, arange_f64({2, 3, 6, 5})).a.action, OperandAction::Contiguous);
  // Permuted batch dims that still step evenly through memory are read in place.
  Tensor even = arange_f64({4, 2, 3, 6}).permute({1, 2, 0, 3});  // batch strides (18, 6), rows 36 apart
  MatmulPlan q = plan_of(even, arange_f64({2, 3, 6, 5}));
  ASSERT_TRUE(q.in_place());
  EXPECT_EQ(q.a.batch_stride, 6);
  EXPECT_EQ(q.a.ld, 36);
}

TEST(MatmulPlan, PromotedVectorsAreReadInPlace) {
  Tensor v = arange_f64({12}).as_strided({6}, {2}, 0);  // a strided vector
  Tensor row = v.as_strided({1, 6}, {0, 2}, 0);         // as matmul promotes a left 1-D operand
  Tensor col = v.as_strided({6, 1}, {2, 0}, 0);         // and a right one
  MatmulPlan p = plan_of(row, arange_f64({6, 3}));
  ASSERT_TRUE(p.in_place());
  EXPECT_TRUE(p.a.trans);
  EXPECT_EQ(p.a.ld, 2);
  MatmulPlan q = plan_of(arange_f64({4, 6}), col);
  ASSERT_TRUE(q.in_place());
  EXPECT_EQ(q.m, 1);
}

TEST(MatmulPlan, RejectsEmptyProductsAndMismatchedShapes) {
  EXPECT_THROW(plan_of(arange_f64({4, 0}), arange_f64({0, 3})), Error);
  EXPECT_THROW(plan_of(arange_f64({4, 5}), arange_f64({6, 3})), Error);
  EXPECT_THROW(plan_of(arange_f64({2, 4, 5}), arange_f64({3, 5, 3})), Error);
}

TEST(MatmulPlan, LargeSizesAreFlaggedForThe64BitPath) {
  const int64_t big = int64_t{1} << 31;
  MatmulPlan p = plan_matmul({big, 2}, {2, 1}, {2, 3}, {3, 1});
  EXPECT_FALSE(p.fits_int32);
}

TEST(MatmulPlan, EveryPlanComputesTheProduct) {
  const Tensor a2 = arange_f64({5, 7}), b2 = arange_f64({7, 4});
  expect_plan_computes_product(a2, b2, "row-major");
  expect_plan_computes_product(arange_f64({7, 5}).t(), arange_f64({4, 7}).t(), "both transposed");
  expect_plan_computes_product(arange_f64({5, 20}).narrow(1, 3, 7), b2, "padded rows");
  expect_plan_computes_product(arange_f64({5, 14}).as_strided({5, 7}, {14, 2}, 0), b2, "column stride 2");
  expect_plan_computes_product(arange_f64({3, 5, 7}), arange_f64({3, 7, 4}), "batched");
  expect_plan_computes_product(arange_f64({2, 3, 5, 7}), b2, "folded");
  expect_plan_computes_product(arange_f64({3, 7, 5}).transpose(1, 2), b2, "transposed batch, shared right");
  expect_plan_computes_product(a2, arange_f64({3, 7, 4}), "shared left");
  expect_plan_computes_product(arange_f64({2, 1, 5, 7}), arange_f64({1, 3, 7, 4}), "(2, 1) x (1, 3)");
  expect_plan_computes_product(arange_f64({5, 2, 3, 7}).permute({1, 2, 0, 3}), arange_f64({3, 7, 4}), "permuted batch");
  expect_plan_computes_product(arange_f64({1, 7}).expand({5, 7}), b2, "expanded rows");
  expect_plan_computes_product(arange_f64({7}).as_strided({1, 7}, {0, 1}, 0), b2, "promoted row");
  expect_plan_computes_product(a2, arange_f64({14}).as_strided({7, 1}, {2, 0}, 0), "promoted strided column");
  expect_plan_computes_product(arange_f64({1, 1, 7}).expand({3, 1, 7}), arange_f64({3, 7, 4}), "M = 1 batch");
}

TEST(MatmulPlan, RandomLayoutsComputeTheProduct) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t M = pick(1, 5), K = pick(1, 5), N = pick(1, 5);
    auto make = [&](int64_t r, int64_t c, const Shape& batch) {
      // A random member of: contiguous, transposed, padded rows, a column step, expanded batch.
      Shape s = batch;
      s.push_back(r);
      s.push_back(c);
      switch (pick(0, 4)) {
        case 0:
          return arange_f64(s);
        case 1: {
          Shape st = batch;
          st.push_back(c);
          st.push_back(r);
          return arange_f64(st).transpose(static_cast<int64_t>(st.size()) - 2, static_cast<int64_t>(st.size()) - 1);
        }
        case 2: {
          Shape wide = s;
          wide.back() += 3;
          return arange_f64(wide).narrow(static_cast<int64_t>(wide.size()) - 1, 1, c);
        }
        case 3: {
          Shape wide = s;
          wide.back() *= 2;
          Strides st = contiguous_strides(wide);
          st.back() = 2;
          return arange_f64(wide).as_strided(s, st, 0);
        }
        default: {
          Shape one = s;
          for (size_t d = 0; d < batch.size(); ++d) one[d] = 1;
          return arange_f64(one).expand(s);
        }
      }
    };
    const int nb = pick(0, 2);
    Shape ba, bb;
    for (int d = 0; d < nb; ++d) {
      const int64_t size = pick(1, 3);
      const int which = pick(0, 2);  // both, only a (b broadcasts), only b
      ba.push_back(which == 2 ? 1 : size);
      bb.push_back(which == 1 ? 1 : size);
    }
    if (pick(0, 1)) bb.erase(bb.begin(), bb.begin() + pick(0, static_cast<int>(bb.size())));
    expect_plan_computes_product(make(M, K, ba), make(K, N, bb), "trial " + std::to_string(trial));
  }
}

// --- recording mode: what the GPU path issues -------------------------------------------------------

namespace {

size_t library_calls(const cuda::recording::Session& rec, const std::string& name) {
  size_t n = 0;
  for (const auto& e : rec.entries(cuda::recording::Kind::Library)) n += e.name == name;
  return n;
}

Tensor on_gpu(const Tensor& t, DType dt = DType::F32) {
  return kernels::to_device(t.to(dt), cuda_device(0));
}

}  // namespace

TEST(MatmulRecording, EachDtypeGoesToItsLibrary) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Tensor a = on_gpu(arange_f64({3, 4, 6}), dt), b = on_gpu(arange_f64({3, 6, 5}), dt);
    rec.clear();
    kernels::matmul(a, b);
    EXPECT_EQ(library_calls(rec, "cublasLtMatmul"), 1u) << dtype_name(dt);
    EXPECT_EQ(rec.count(cuda::recording::Kind::Launch), 0u) << "no copies for in-place operands";
  }
  Tensor a64 = on_gpu(arange_f64({3, 4, 6}), DType::F64), b64 = on_gpu(arange_f64({6, 5}), DType::F64);
  rec.clear();
  kernels::matmul(a64, b64);
  EXPECT_EQ(library_calls(rec, "cublasGemmStridedBatchedEx"), 1u);
  EXPECT_EQ(library_calls(rec, "cublasLtMatmul"), 0u);
}

TEST(MatmulRecording, CopiesHappenOnceAndOnlyWhereThePlanSaysSo) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  Tensor a = on_gpu(arange_f64({2, 1, 4, 6})), b = on_gpu(arange_f64({1, 3, 6, 5}));
  rec.clear();
  Tensor c = kernels::matmul(a, b);
  EXPECT_EQ(c.sizes(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(rec.count(cuda::recording::Kind::Launch), 2u) << "one expanding copy per operand";
  EXPECT_EQ(library_calls(rec, "cublasLtMatmul"), 1u);
  Tensor e1 = on_gpu(arange_f64({4, 0})), e2 = on_gpu(arange_f64({0, 3}));
  rec.clear();
  kernels::matmul(e1, e2);
  EXPECT_EQ(rec.count(cuda::recording::Kind::Library), 0u) << "K = 0 is a fill, not a GEMM";
}

TEST(MatmulRecording, LinearFusesBiasAndGeluWhereCublasLtCan) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  Tensor x = on_gpu(arange_f64({6, 8})), w = on_gpu(arange_f64({5, 8})), b = on_gpu(arange_f64({5}));
  rec.clear();
  kernels::linear(x, w, b, kernels::LinearEpilogue::GeluTanh);
  EXPECT_EQ(library_calls(rec, "cublasLtMatmul"), 1u);
  EXPECT_EQ(rec.count(cuda::recording::Kind::Launch), 0u) << "bias and GELU run inside the GEMM";
  // One row: no epilogue (cuBLASLt's heuristics reject it); bias preloaded, GELU after.
  Tensor row = on_gpu(arange_f64({1, 8}));
  rec.clear();
  kernels::linear(row, w, b, kernels::LinearEpilogue::GeluTanh);
  EXPECT_EQ(library_calls(rec, "cublasLtMatmul"), 1u);
  EXPECT_EQ(rec.count(cuda::recording::Kind::Launch) + rec.count(cuda::recording::Kind::Copy), 2u)
      << "bias copy and GELU";
  // f64: cuBLAS, bias preloaded, GELU as its own pass.
  Tensor x64 = on_gpu(arange_f64({6, 8}), DType::F64), w64 = on_gpu(arange_f64({5, 8}), DType::F64);
  Tensor b64 = on_gpu(arange_f64({5}), DType::F64);
  rec.clear();
  kernels::linear(x64, w64, b64, kernels::LinearEpilogue::GeluTanh);
  EXPECT_EQ(library_calls(rec, "cublasGemmStridedBatchedEx"), 1u);
  EXPECT_EQ(rec.count(cuda::recording::Kind::Launch), 2u);
}
