// The one way tests/cuda skips a test that needs a real GPU: SKIP_WITHOUT_GPU() says why (this
// build has no CUDA, or this machine has no device or driver); SKIP_WITHOUT_RECORDING() for
// recording-mode tests, SKIP_WITHOUT_NCCL_RECORDING() for those of dist's NCCL path.
#pragma once
#include <gtest/gtest.h>

#include <brisk/dist/process_group.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/version.h>

#include <string>

namespace brisk::testing {

// Why a GPU-only test cannot run here; empty when it can.
inline std::string gpu_unavailable_reason() {
  if (cuda::is_available()) return "";
  return BRISK_BUILD_WITH_CUDA ? "no CUDA device (or driver) on this machine"
                               : "this build of brisk has no CUDA support";
}

// Why NCCL calls cannot be recorded here; empty when they can.
inline std::string nccl_recording_unavailable_reason() {
  if (!cuda::recording::supported()) return "this build of brisk has no CUDA support";
  if (dist::nccl_version() == 0) return "this build of brisk has no NCCL";
  return "";
}

}  // namespace brisk::testing

#define SKIP_WITHOUT_GPU()                                                                                      \
  do {                                                                                                          \
    if (const std::string brisk_skip_why = ::brisk::testing::gpu_unavailable_reason(); !brisk_skip_why.empty()) \
      GTEST_SKIP() << brisk_skip_why;                                                                           \
  } while (0)

// For tests of the CUDA layer's host logic in recording mode: skips in a CPU-only build.
#define SKIP_WITHOUT_RECORDING()                                                                           \
  do {                                                                                                     \
    if (!::brisk::cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support"; \
  } while (0)

#define SKIP_WITHOUT_NCCL_RECORDING()                                                             \
  do {                                                                                            \
    if (const std::string brisk_skip_why = ::brisk::testing::nccl_recording_unavailable_reason(); \
        !brisk_skip_why.empty())                                                                  \
      GTEST_SKIP() << brisk_skip_why;                                                             \
  } while (0)
