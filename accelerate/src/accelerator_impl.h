// Internal: what the Accelerator keeps per prepared object (shared by its source files:
// accelerator.cpp, prepare.cpp, step.cpp, collectives.cpp, checkpoint_*.cpp, tracking.cpp).
#pragma once
#include <functional>
#include <memory>

#include "brisk/accelerate/accelerator.h"
#include "brisk/dist/reducer.h"
#include "sharding.h"
#include "zero.h"

namespace brisk {

namespace accelerate::detail {
// Runs `body`, catching its error; then every rank learns whether any rank failed. The failing
// ranks throw their own error, the others one that says another rank failed: no rank is left
// waiting in a collective that the others never reach. `on_failure` runs first on every rank when
// any failed (collectives.cpp).
void on_every_rank(dist::ProcessGroup* pg, int world_size, const char* op, const std::function<void()>& body,
                   const std::function<void()>& on_failure = {});
// BRISK_TRACE under --max-restarts: a trace file per attempt (restart.cpp).
void trace_this_attempt();
}  // namespace accelerate::detail

struct Accelerator::ModelState {
  nn::Module* model = nullptr;
  std::unique_ptr<dist::Reducer> reducer;
  int no_sync_depth = 0;
  bool sharding_checked = false;  // every trainable parameter belongs to a sharded optimizer
};

struct Accelerator::OptimizerState {
  optim::Optimizer* opt = nullptr;
  // Set by a synced backward: the next gated call is the optimizer step (skipped when the
  // fp16 scaler found inf/NaN); later calls (zero_grad) go through.
  bool pending = false;
  // With sharding zero1 / zero2: the optimizer steps this rank's shard (docs/sharding.md).
  // Shared with the optimizer's step wrapper, which may outlive the Accelerator.
  std::shared_ptr<accelerate::detail::ZeroEngine> zero;
  // prepare turned the optimizer's autocast copies on (mixed precision without sharding);
  // free_memory turns them off again.
  bool autocast_copies = false;
};

struct Accelerator::LoaderState {
  data::DataLoader* loader = nullptr;
  bool iterable = false;
  bool sharded = false;      // the batches are split across ranks (not for a DistributedSampler)
  bool own_shuffle = false;  // the plan's permutation is seeded by the Accelerator's seed
  std::shared_ptr<accelerate::detail::IterableShard> shard;
  // The last plan handed out (epoch's batch count and how much of its last round is real).
  int64_t plan_size = -1;
  int64_t last_round_real = 0, last_round_size = 0;
  uint64_t begin_tick = 0;  // when this loader last started an epoch (a global counter)
  // What active_loader() saw last time.
  bool seen_valid = false;
  uint64_t seen_epoch = 0, seen_tick = 0;
  int64_t seen_position = 0;

  bool at_end() const {
    if (iterable) return shard && shard->at_end();
    return plan_size >= 0 && loader->position() >= plan_size;
  }
  // Examples per step over all processes (what a checkpoint's loader position counts in).
  int64_t global_batch(bool split_batches, int world_size) const {
    const int64_t bs = loader->options().batch_size;
    return !iterable && sharded && split_batches ? bs : bs * world_size;
  }
};

}  // namespace brisk
