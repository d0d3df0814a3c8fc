// The fault matrix's GPU column without a GPU (docs/data-parallel.md, "When a rank fails"): a
// fake world of 2 whose other rank misbehaves (dist::FakePeerFaults) in CUDA recording mode, with
// the recorded GPU work held in flight (Session::hold_events), so the NCCL path's failure handling
// runs for real: a peer that left, a collective that times out, debug mode's signature check, and
// the Reducer's buckets on the communication stream. Each ends with an error naming the rank or
// the collective, the communicator aborted (ncclCommAbort in the log), and the group unusable.
// The same cases with real processes on real GPUs need a GPU per rank (the `faults` label's nccl
// cases skip without them).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>

#include <chrono>
#include <string>
#include <thread>

#include "gpu_skip.h"

using namespace brisk;
using cuda::recording::Entry;
using cuda::recording::Kind;

namespace {

// Until `done` or 10 s: the watchdog looks every 20 ms.
bool eventually(const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

bool logged(const cuda::recording::Session& rec, const std::string& call) {
  for (const Entry& e : rec.entries(Kind::Library))
    if (e.name == call) return true;
  return false;
}

dist::InitOptions throwing(double timeout_s = 60, bool debug = false) {
  return {.timeout_seconds = timeout_s, .debug = debug, .on_error = dist::OnError::Throw};
}

}  // namespace

TEST(NcclFaults, APeerThatLeftFailsTheCollectiveItWillNeverJoinAndAbortsTheCommunicator) {
  SKIP_WITHOUT_NCCL_RECORDING();
  cuda::recording::Session rec;
  rec.hold_events(true);
  // Rank 1 took part in collective #0, then its program returned from main.
  auto pg = dist::fake_group(2, 0, throwing(), {.leaves = 1, .leaves_after = 1});
  Tensor t = zeros({100}, {.device = cuda_device(0)});
  dist::WorkPtr joined = pg->all_reduce_async(t);
  dist::WorkPtr never = pg->all_reduce_async(t);
  ASSERT_TRUE(eventually([&] { return never->is_completed(); })) << "the watchdog never noticed rank 1 leaving";
  const std::string msg = message_of([&] { never->synchronize(); });
  EXPECT_NE(msg.find("rank 1 left the job (its program exited after issuing 1 collectives) while this rank waits in "
                     "all_reduce #1 (f32, [100], sum)"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(logged(rec, "ncclCommAbort")) << "work stuck on the communication stream ends only with an abort";
  const std::string later = message_of([&] { pg->all_reduce(t); });
  EXPECT_NE(later.find("unusable after an earlier failure: rank 1 left the job"), std::string::npos) << later;
}

TEST(NcclFaults, ACollectiveOnTheCommStreamTimesOutWithItsNameAndAbortsTheCommunicator) {
  SKIP_WITHOUT_NCCL_RECORDING();
  cuda::recording::Session rec;
  rec.hold_events(true);  // the peer never joins: the all-reduce never completes
  auto pg = dist::fake_group(2, 0, throwing(0.3), dist::FakePeerFaults{});
  Tensor t = zeros({64}, {.device = cuda_device(0)});
  const auto start = std::chrono::steady_clock::now();
  dist::WorkPtr w = pg->all_reduce_async(t, {.op = dist::ReduceOp::Avg});
  ASSERT_TRUE(eventually([&] { return w->is_completed(); })) << "the watchdog never timed the collective out";
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.3);
  const std::string msg = message_of([&] { w->wait(); });
  EXPECT_NE(msg.find("all_reduce #0 (f32, [64], avg) on cuda:0 did not finish within the timeout of 0.3 s"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(logged(rec, "ncclCommAbort"));
}

TEST(NcclFaults, DebugModeNamesAPeerThatCallsABroadcastWhereThisRankAllReduces) {
  SKIP_WITHOUT_NCCL_RECORDING();
  cuda::recording::Session rec;
  auto pg = dist::fake_group(2, 0, throwing(60, /*debug=*/true), {.mismatches = 1, .mismatch_at = 1});
  Tensor t = zeros({8}, {.device = cuda_device(0)});
  pg->all_reduce(t);  // #0 matches
  rec.clear();
  const std::string msg = message_of([&] { pg->all_reduce(t); });
  EXPECT_NE(msg.find("collective mismatch (BRISK_DEBUG): rank 0 called all_reduce #1 (f32, [8], sum) but rank 1 "
                     "called broadcast #1 (f32, [1], root 0)"),
            std::string::npos)
      << msg;
  EXPECT_FALSE(logged(rec, "ncclAllReduce")) << "nothing is enqueued after a mismatch";
}

TEST(NcclFaults, TheReducersBucketsFailWhenAPeerLeftAndTheNextStepSaysWhy) {
  SKIP_WITHOUT_NCCL_RECORDING();
  cuda::recording::Session rec;
  rec.hold_events(true);
  auto pg = dist::fake_group(2, 0, throwing(), {.leaves = 1, .leaves_after = 0});
  Tensor w = zeros({16, 8}, {.device = cuda_device(0)});
  w.requires_grad_();
  dist::Reducer reducer({{"w", w}}, *pg);
  auto step = [&] {
    autograd::backward({w.to(DType::F64)}, {ones({16, 8}, {.dtype = DType::F64, .device = cuda_device(0)})});
  };
  // The bucket's all-reduce (#0) is enqueued during backward; rank 1 never issued it.
  try {
    step();
  } catch (const Error&) {
    // The watchdog may fail the bucket before finalize() looks at it.
  }
  ASSERT_TRUE(eventually([&] { return message_of([&] { pg->barrier(); }) != "(no error)"; }));
  EXPECT_TRUE(logged(rec, "ncclCommAbort"));
  const std::string msg = message_of(step);
  EXPECT_NE(msg.find("rank 1 left the job (its program exited after issuing 0 collectives)"), std::string::npos) << msg;
}
