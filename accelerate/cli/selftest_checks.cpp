// brisk-selftest's per-rank checks. The cross-rank facts (distinct ranks, forwarded variables,
// exit-status propagation) are compared by `brisk test` from every rank's report.
#include "selftest_checks.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "brisk/accelerate/accelerator.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/autograd/autograd.h"
#include "brisk/dist/process_group.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/reduce.h"
#include "brisk/nn/layers.h"
#include "brisk/optim/sgd.h"

namespace brisk::selftest {

namespace {

const char* get(const char* name) { return std::getenv(name); }

bool read_int(const char* name, int& out) {
  const char* v = get(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 24) return false;
  out = static_cast<int>(x);
  return true;
}

CheckResult launcher_variables(const RankInfo& r) {
  if (!r.problem.empty()) return {Status::Fail, r.problem};
  if (!r.launcher_vars) return {Status::Pass, "one process, started directly (no mpirun)"};
  return {Status::Pass, "rank " + std::to_string(r.rank) + " of " + std::to_string(r.size) + ", local " +
                            std::to_string(r.local_rank) + " of " + std::to_string(r.local_size)};
}

CheckResult brisk_settings(const RankInfo&) {
  const char* launched = get(accelerate::env::kLaunched);
  if (!launched || std::string(launched) != "1")
    return {Status::Fail, std::string(accelerate::env::kLaunched) + " is not 1: not started by `brisk launch`?"};
  if (const char* mp = get(accelerate::env::kMixedPrecision); mp && !accelerate::is_valid_mixed_precision(mp))
    return {Status::Fail, std::string(accelerate::env::kMixedPrecision) + "='" + mp + "' is not no, fp16 or bf16"};
  int threads = 0;
  if (!read_int("OMP_NUM_THREADS", threads) || threads < 1)
    return {Status::Fail, "OMP_NUM_THREADS is not a positive number"};
  const char* mp = get(accelerate::env::kMixedPrecision);
  return {Status::Pass,
          std::string("mixed_precision ") + (mp ? mp : "(unset)") + ", OMP_NUM_THREADS " + std::to_string(threads)};
}

// The library loads and computes in every process: sum(1..100) in f32, and the same on a
// strided view (every other element: 1 + 3 + ... + 99 = 2500).
CheckResult tensor_math(const RankInfo&) {
  Tensor x = arange(1, 101, 1, {.dtype = DType::F32});
  float total = kernels::sum(x, {0}).item<float>();
  Tensor odd = x.as_strided({50}, {2}, 0);
  float odd_total = kernels::sum(odd, {0}).item<float>();
  if (total != 5050.0f || odd_total != 2500.0f)
    return {Status::Fail, "sum(1..100) = " + std::to_string(total) +
                              " (expected 5050), odd = " + std::to_string(odd_total) + " (expected 2500)"};
  return {Status::Pass, "sum(1..100) = 5050, strided sum = 2500"};
}

std::vector<float> flat(const nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Every rank trains a small linear model a few SGD steps with the Accelerator (batch 8 per
// process); then every rank must hold the same parameters, bit for bit, and they must equal one
// process trained on the same data with the global batch (8 x processes).
CheckResult data_parallel_step_on_world() {
  Accelerator acc({.cpu = true, .seed = 0});
  const int64_t N = acc.num_processes(), b = 8, steps = 3;
  Generator g(7);
  Tensor x = randn({N * b * steps, 6}, {}, &g);
  Tensor y = randn({N * b * steps, 2}, {}, &g);
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  nn::Linear net(6, 2);
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  data::DataLoader loader(ds, {.batch_size = b});
  acc.prepare(net, opt, loader);
  for (auto& [xb, yb] : loader) {
    acc.backward(mse_loss(net(xb), yb));
    opt.step();
    opt.zero_grad();
  }
  const std::vector<float> mine = flat(net);
  Tensor all = acc.gather(from_vector<float>(mine, {1, static_cast<int64_t>(mine.size())}));
  std::vector<float> every = all.to_vector<float>();
  for (int64_t r = 1; r < N; ++r)
    if (std::memcmp(every.data(), every.data() + r * mine.size(), mine.size() * sizeof(float)) != 0)
      return {Status::Fail, "rank " + std::to_string(r) + "'s parameters differ from rank 0's after " +
                                std::to_string(steps) + " steps"};
  manual_seed(0);
  nn::Linear ref(6, 2);
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.1});
  data::DataLoader ref_loader(ds, {.batch_size = N * b});
  for (auto& [xb, yb] : ref_loader) {
    mse_loss(ref(xb), yb).backward();
    ref_opt.step();
    ref_opt.zero_grad();
  }
  const std::vector<float> want = flat(ref);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(mine[i]) - want[i]) / (1e-5 + std::fabs(want[i])));
  if (worst > 1e-5)
    return {Status::Fail, "parameters differ from one process with batch " + std::to_string(N * b) +
                              " (worst relative difference " + std::to_string(worst) + ")"};
  return {Status::Pass, std::to_string(steps) + " SGD steps on " + std::to_string(N) +
                            " process(es): parameters identical on every rank and equal to 1 process with batch " +
                            std::to_string(N * b)};
}

CheckResult data_parallel_step(const RankInfo&) {
  CheckResult r = data_parallel_step_on_world();
  // Leave the job together now: a rank that later exits on purpose (--fail_rank) must not wait
  // for the others in the exit protocol, or the launcher could not see it fail and stop them.
  dist::finalize();
  return r;
}

}  // namespace

RankInfo read_rank_info() {
  RankInfo r;
  bool any = get("OMPI_COMM_WORLD_RANK") || get("OMPI_COMM_WORLD_SIZE");
  if (!any) return r;
  r.launcher_vars = true;
  if (!read_int("OMPI_COMM_WORLD_RANK", r.rank) || !read_int("OMPI_COMM_WORLD_SIZE", r.size) ||
      !read_int("OMPI_COMM_WORLD_LOCAL_RANK", r.local_rank) || !read_int("OMPI_COMM_WORLD_LOCAL_SIZE", r.local_size)) {
    r.problem = "OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE} missing or not numbers";
  } else if (r.size < 1 || r.rank >= r.size || r.local_size < 1 || r.local_rank >= r.local_size ||
             r.local_size > r.size) {
    r.problem = "inconsistent: rank " + std::to_string(r.rank) + " of " + std::to_string(r.size) + ", local " +
                std::to_string(r.local_rank) + " of " + std::to_string(r.local_size);
  }
  return r;
}

std::vector<SelfCheck> self_checks() {
  return {
      {"launcher variables", launcher_variables},
      {"BRISK_* settings", brisk_settings},
      {"tensor math", tensor_math},
      // Extension point: the dist library's checks go here, one entry per collective (each op and
      // dtype against expected values, Accelerate's 2-rank table), then a data-parallel training step.
      // Until they exist they are listed as SKIP, never as PASS.
      {"collectives",
       [](const RankInfo&) -> CheckResult {
         return {Status::Skip, "not checked: this build has no dist library yet"};
       }},
      {"data-parallel training step", data_parallel_step},
  };
}

}  // namespace brisk::selftest
