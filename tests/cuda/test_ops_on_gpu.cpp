// The every-op test: each op's case runs on the GPU and on the CPU from the same inputs, in
// every dtype it covers, with contiguous and strided inputs, and the results must agree within
// the per-dtype tolerances (op_cases.cpp). Needs a GPU; skips with the reason otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "cuda/gpu_skip.h"
#include "cuda/op_cases.h"

using namespace brisk;
using namespace brisk::testing;

namespace {

// Largest violation of |a - b| <= atol + rtol * |b| (0 when within), NaN matching NaN and
// infinities matching exactly.
double worst_violation(const std::vector<double>& got, const std::vector<double>& want, Tolerance tol, size_t* where) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) {
        *where = i;
        return INFINITY;
      }
      continue;
    }
    const double excess = std::fabs(a - b) - (tol.atol + tol.rtol * std::fabs(b));
    if (!(excess <= worst)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      *where = i;
    }
  }
  return worst;
}

}  // namespace

TEST(CudaOps, EveryOpMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  int runs = 0;
  std::set<std::string> ops;
  for (const OpCase& c : all_cases()) {
    for (DType dt : c.dtypes) {
      for (bool strided : {false, true}) {
        const std::string what = c.op + " (" + c.variant + ", " + dtype_name(dt) + (strided ? ", strided)" : ")");
        std::vector<Tensor> want, got;
        try {
          want = c.run(CaseEnv{kCPU, dt, strided});
          got = c.run(CaseEnv{cuda_device(0), dt, strided});
          cuda::synchronize();
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << ": " << e.what();
          continue;
        }
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t k = 0; k < got.size(); ++k) {
          if (!want[k].defined()) {
            EXPECT_FALSE(got[k].defined()) << what << " output " << k;
            continue;
          }
          ASSERT_TRUE(got[k].device().is_cuda()) << what << " output " << k << " is not on the GPU";
          ASSERT_EQ(got[k].sizes(), want[k].sizes()) << what << " output " << k;
          ASSERT_EQ(got[k].dtype(), want[k].dtype()) << what << " output " << k;
          const std::vector<double> g = got[k].to_vector<double>(), w = want[k].to_vector<double>();
          Tolerance tol = c.exact || !is_floating(want[k].dtype()) ? Tolerance{0, 0} : tolerance_for(want[k].dtype());
          tol.rtol *= c.tolerance_scale;
          tol.atol *= c.tolerance_scale;
          size_t at = 0;
          const double v = worst_violation(g, w, tol, &at);
          EXPECT_EQ(v, 0.0) << what << " output " << k << " differs at element " << at << ": gpu " << g[at]
                            << " vs cpu " << w[at] << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
        }
        ++runs;
        ops.insert(c.op);
      }
    }
  }
  std::cout << "[ every op ] " << ops.size() << " ops, " << runs << " dtype/layout cases compared with the CPU\n";
}
