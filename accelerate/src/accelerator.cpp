// The Accelerator: construction, the process facts, the device and seeds. The rest of the class
// lives by seam: options.cpp (settings from the program, environment and defaults), prepare.cpp,
// step.cpp (backward, accumulation, the step gates, mixed precision, clipping), collectives.cpp
// (gather, reduce, broadcast for metrics) and checkpoint_*.cpp (save_state, load_state, save_model;
// docs/checkpoints.md, "Where the code is").
#include "brisk/accelerate/accelerator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>

#include "accelerator_impl.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/accelerate/host.h"
#include "brisk/autograd/autograd.h"
#include "brisk/core/profiler.h"
#include "brisk/core/rng.h"
#include "brisk/data/sampler.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/index.h"
#include "brisk/kernels/optim.h"
#include "brisk/kernels/settings.h"
#include "brisk/optim/clip.h"
#include "brisk/util/env.h"
#include "brisk/util/trace.h"
#include "checkpoint_save_job.h"

namespace brisk {

// --- construction and process facts ----------------------------------------------------------

Accelerator::Accelerator(const AcceleratorOptions& options) : s_(resolve_accelerator_options(options)) {
  if (s_.deterministic) kernels::set_deterministic(*s_.deterministic);
  if (s_.profile && *s_.profile) {
    // BRISK_PROFILE=1 or =<file> already chose where the table goes; else stderr at exit.
    if (!profiler::enabled()) profiler::report_at_exit("");
    profiler::enable();
  } else if (s_.profile) {
    profiler::disable();
  }
  pg_ = &dist::init();
  rank_ = pg_->rank();
  world_size_ = pg_->size();
  local_rank_ = pg_->local_rank();
  accelerate::detail::trace_this_attempt();
  // With GPUs present (and not `cpu`) each process on a host uses the GPU of its local rank, made
  // current here so that everything this thread launches (and NCCL) uses it.
  device_ =
      accelerate::select_device(s_.cpu, s_.cpu ? 0 : accelerate::usable_gpu_count(), local_rank_, pg_->local_size());
  if (device_.is_cuda()) cuda::set_device(device_.index);
  if (s_.mixed_precision == MixedPrecision::FP16) {
    amp::GradScalerOptions so = s_.scaler;
    so.enabled = true;
    scaler_ = std::make_unique<amp::GradScaler>(so);
    if (world_size_ > 1)
      scaler_->set_found_inf_reducer([this](bool found) {
        Tensor flag = full({1}, found ? 1.0 : 0.0, {.dtype = DType::F32});
        pg_->all_reduce(flag, {.op = dist::ReduceOp::Max});
        return flag.item<float>() > 0;
      });
  }
  if (s_.seed) set_seed(*s_.seed);
}

namespace accelerate {

Device select_device(bool cpu, int gpu_count, int local_rank, int local_world_size) {
  if (cpu || gpu_count <= 0) return kCPU;
  BRISK_CHECK(local_rank >= 0 && local_rank < gpu_count, "Accelerator: the process of local rank ", local_rank, " (",
              local_world_size, " processes on this host) has no GPU of its own: ", gpu_count,
              " visible. Start at most ", gpu_count,
              " process(es) per host (`brisk launch` starts one per GPU "
              "by default), or train on the CPU with cpu=true (`brisk launch --cpu`)");
  return cuda_device(local_rank);
}

}  // namespace accelerate

// Re-homes an optimizer's existing state (exp_avg ...) on its parameters' devices: loading its
// own state dict copies every state tensor to its parameter's device. Lazily created state is
// made on the parameter's device anyway.
void Accelerator::move_state_to_params(optim::Optimizer& optimizer) {
  optim::StateDict sd = optimizer.state_dict();
  const std::vector<Tensor> params = optimizer.all_params();
  bool misplaced = false;
  for (const auto& [key, t] : sd.tensors) {
    // "state.<i>.<name>": a state tensor of parameter i.
    const std::string prefix = "state.";
    if (key.rfind(prefix, 0) != 0) continue;
    const size_t i = static_cast<size_t>(std::strtoull(key.c_str() + prefix.size(), nullptr, 10));
    misplaced |= i < params.size() && t.device() != params[i].device();
  }
  if (misplaced) optimizer.load_state_dict(sd);
}

// The user's objects may already be gone (declared after the Accelerator): leave them alone; gates
// they still hold let everything through from now on. A save still being written is finished first
// (async_save): the end of the program never loses a checkpoint, nor its error, which ends the
// process with status 1. Unwinding from an error, the save is only waited for (no collective: the
// other ranks may not come).
Accelerator::~Accelerator() {
  sh_->alive = false;
  if (pending_save_ && std::uncaught_exceptions() > 0) {
    pending_save_->cancel();
    pending_save_.reset();
  } else if (pending_save_) {
    try {
      finish_save();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "brisk: error: the last checkpoint was not saved: %s\n", e.what());
      std::fflush(stderr);
      std::exit(EXIT_FAILURE);
    }
  }
  forget_preemption();
}

void Accelerator::wait_for_everyone() {
  finish_save();  // a barrier that also means "the last checkpoint is on disk" (async_save)
  if (world_size_ > 1) pg_->barrier();
}

Accelerator::MainProcessFirst::MainProcessFirst(Accelerator& acc, bool local)
    : acc_(acc), is_first_(local ? acc.is_local_main_process() : acc.is_main_process()) {
  if (!is_first_) acc_.wait_for_everyone();  // the others wait until the first one is done
}

Accelerator::MainProcessFirst::~MainProcessFirst() {
  if (is_first_) acc_.wait_for_everyone();  // ... which it says by joining the barrier
}

void Accelerator::set_seed(uint64_t seed) {
  s_.seed = seed;
  sh_->seed = seed;
  s_.source["seed"] = "program";
  manual_seed(seed);
}

}  // namespace brisk
