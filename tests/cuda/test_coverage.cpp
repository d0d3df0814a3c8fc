// Every op declared in the kernels library's public headers has a CUDA path for f32, f16 and
// bf16. Checked without a GPU: in recording mode each op's case runs through its CUDA entry point
// for every dtype (contiguous and strided inputs), which fails with "not implemented for bf16 on
// cuda" where a dtype is missing, and must issue device work (a launch, a library call, a copy).
#include <gtest/gtest.h>

#include <brisk/kernels/cuda_recording.h>

#include <set>

#include "cuda/op_cases.h"

using namespace brisk;
using namespace brisk::testing;

TEST(CudaCoverage, EveryDeclaredOpHasACaseAndEveryCaseADeclaredOp) {
  std::set<std::string> declared;
  for (const std::string& n : declared_kernel_ops()) declared.insert(n);
  ASSERT_GT(declared.size(), 50u) << "the header scan found too few ops: is BRISK_SOURCE_DIR right?";
  std::set<std::string> covered;
  for (const OpCase& c : all_cases()) covered.insert(c.op);
  for (const std::string& n : declared) EXPECT_TRUE(covered.count(n)) << "no CUDA case for kernels op '" << n << "'";
  for (const std::string& n : covered)
    EXPECT_TRUE(declared.count(n)) << "case for an op no header declares: '" << n << "'";
}

TEST(CudaCoverage, EveryCaseCoversF32F16AndBF16) {
  for (const OpCase& c : all_cases()) {
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      EXPECT_NE(std::find(c.dtypes.begin(), c.dtypes.end(), dt), c.dtypes.end())
          << c.op << " (" << c.variant << ") does not run in " << dtype_name(dt);
  }
}

TEST(CudaCoverage, EveryOpDispatchesToCudaForEveryDtype) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  int runs = 0;
  std::set<std::string> ops;
  for (const OpCase& c : all_cases()) {
    for (DType dt : c.dtypes) {
      for (bool strided : {false, true}) {
        rec.clear();
        CaseEnv env{cuda_device(0), dt, strided};
        try {
          std::vector<Tensor> out = c.run(env);
          for (const Tensor& t : out) {
            if (t.defined()) {
              EXPECT_TRUE(t.device().is_cuda()) << c.op << " (" << c.variant << ") returned a CPU tensor";
            }
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << c.op << " (" << c.variant << ", " << dtype_name(dt) << (strided ? ", strided" : "")
                        << ") failed on cuda: " << e.what();
          continue;
        }
        using cuda::recording::Kind;
        const size_t work =
            rec.count(Kind::Launch) + rec.count(Kind::Library) + rec.count(Kind::Memset) + rec.count(Kind::Copy);
        EXPECT_GT(work, 0u) << c.op << " (" << c.variant << ", " << dtype_name(dt)
                            << ") issued no kernel or library call on cuda";
        ++runs;
        ops.insert(c.op);
      }
    }
  }
  std::cout << "[ coverage ] " << ops.size() << " ops, " << all_cases().size() << " cases, " << runs
            << " dtype/layout runs dispatched on cuda (recording mode)\n";
}
