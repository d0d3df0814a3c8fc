// Accelerator::prepare: models (device, Reducer or ZeRO engine), optimizers (the step gate),
// schedulers and data loaders (sharded across processes), and free_memory.
#include "brisk/accelerate/accelerator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "accelerator_impl.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/accelerate/host.h"
#include "brisk/amp/autocast.h"
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

namespace brisk {

// --- prepare -----------------------------------------------------------------------------------

void Accelerator::check_not_prepared(const void* object, const char* what) {
  bool seen = false;
  for (auto& m : models_) seen |= m->model == object;
  for (auto& o : optimizers_) seen |= o->opt == object;
  for (auto& l : loaders_) seen |= l->loader == object;
  for (auto* s : schedulers_) seen |= s == object;
  BRISK_CHECK(!seen, "Accelerator::prepare: this ", what,
              " was already prepared (prepare wraps in place: call it once per object)");
}

void Accelerator::prepare_one(nn::Module& model) {
  check_not_prepared(&model, "model");
  if (s_.device_placement) {
    model.to(device_);
    // Optimizers prepared before the model hold state for its parameters where they were.
    for (auto& o : optimizers_) move_state_to_params(*o->opt);
  }
  auto st = std::make_unique<ModelState>();
  st->model = &model;
  if (trace_enabled()) {  // BRISK_TRACE: a "forward" span per call of the model
    auto start = std::make_shared<double>(0.0);
    model.register_forward_pre_hook([start](nn::Module&, const Tensor&) { *start = trace_now_us(); });
    model.register_forward_hook([start](nn::Module&, const Tensor&, const Tensor&) {
      trace_complete("forward", "compute", *start, trace_now_us());
    });
  }
  if (world_size_ > 1) {
    // As DDP: every rank starts from rank 0's parameters and buffers.
    NoGradGuard no_grad;
    for (auto& [name, t] : model.state_dict()) {
      Tensor x = t.is_contiguous() ? t : kernels::contiguous(t);
      pg_->broadcast(x, {.root = 0});
      if (!x.is_same(t))
        kernels::copy_(t, x);
      else
        t.bump_version();  // written in place: copies made from the old values are stale
    }
    // Sharded: the optimizers' ZeRO engines reduce the gradients instead of a Reducer.
    if (s_.sharding != Sharding::None) {
      models_.push_back(std::move(st));
      return;
    }
    nn::NamedTensors params;
    for (auto& [name, p] : model.named_parameters())
      if (p.requires_grad()) params.emplace_back(name, p);
    st->reducer = std::make_unique<dist::Reducer>(
        std::move(params), *pg_,
        dist::ReducerOptions{.bucket_cap_mb = s_.bucket_cap_mb, .find_unused_parameters = s_.find_unused_parameters});
  }
  models_.push_back(std::move(st));
}

void Accelerator::prepare_one(optim::Optimizer& optimizer) {
  check_not_prepared(&optimizer, "optimizer");
  BRISK_CHECK(!(scaler_ && !optimizers_.empty()),
              "Accelerator::prepare: mixed_precision fp16 supports one optimizer (its GradScaler unscales one "
              "optimizer's gradients per step); this is the second");
  move_state_to_params(optimizer);
  auto st = std::make_shared<OptimizerState>();
  st->opt = &optimizer;
  // The first gated call after a synced backward is the step: skipped when the fp16 scaler found
  // inf/NaN. Later calls (zero_grad) go through, so a skipped step's gradients are still cleared.
  optimizer.set_step_gate([sh = sh_, st] {
    if (!sh->alive) return true;
    if (!sh->sync_gradients) return false;
    if (st->pending) {
      st->pending = false;
      if (sh->step_skipped) return false;
    }
    return true;
  });
  if (s_.sharding != Sharding::None) {
    // The optimizer now steps this rank's shard: its slice of the parameters is copied in before
    // the update and the updated shards are all-gathered into the parameters after it.
    // zero3 also shards the parameters of the prepared model they belong to (its units).
    nn::Module* model = nullptr;
    const std::vector<Tensor> all = optimizer.all_params();
    if (s_.sharding == Sharding::Zero3 && !all.empty())
      for (auto& m : models_)
        for (const Tensor& p : m->model->parameters())
          if (p.is_same(all.front())) model = m->model;
    st->zero = std::make_shared<accelerate::detail::ZeroEngine>(s_.sharding, optimizer, *pg_, s_.bucket_cap_mb, model,
                                                                s_.zero3_wrap);
    std::shared_ptr<accelerate::detail::ZeroEngine> zero = st->zero;
    const bool trace = trace_enabled();
    optimizer.set_step_wrapper([zero, trace](const std::function<void()>& update) {
      zero->before_step();
      {
        std::optional<TraceSpan> span;
        if (trace) span.emplace("optimizer step", "compute");
        update();
      }
      zero->after_step();
    });
  } else if (trace_enabled()) {
    optimizer.set_step_wrapper([](const std::function<void()>& update) {
      TraceSpan span("optimizer step", "compute");
      update();
    });
  }
  // Under bf16/fp16 each step also writes the parameters' 16-bit copies that autocast then uses
  // instead of casting every weight in every forward (docs/tour/04-mixed-precision.md). Not with
  // sharding, where the optimizer steps shards rather than the parameters autocast sees.
  bool autocast_on = false;
  const DType autocast_dtype = amp::mixed_precision_dtype(s_.mixed_precision, &autocast_on);
  if (autocast_on && s_.sharding == Sharding::None && optimizer.autocast_copies() == DType::F32) {
    optimizer.keep_autocast_copies(autocast_dtype);
    st->autocast_copies = true;
  }
  optimizers_.push_back(std::move(st));
}

Accelerator::FullParameters Accelerator::full_parameters(const nn::Module& model) {
  std::vector<std::shared_ptr<accelerate::detail::ZeroEngine>> engines;
  const std::vector<Tensor> params = model.parameters();
  for (auto& o : optimizers_) {
    if (!o->zero || !o->zero->shards_parameters()) continue;
    bool mine = false;
    for (const Tensor& p : params) mine = mine || o->zero->owns(p);
    if (mine) engines.push_back(o->zero);
  }
  for (auto& e : engines) e->gather_all();
  return FullParameters([engines] {
    for (auto& e : engines) e->scatter_and_release_all();
  });
}

void Accelerator::prepare_one(optim::LRScheduler& scheduler) {
  check_not_prepared(&scheduler, "scheduler");
  // Once per optimizer step that really happened (a deliberate difference from Accelerate,
  // which steps it once per process: docs/accelerator-options.md).
  scheduler.set_step_gate([sh = sh_] { return !sh->alive || (sh->sync_gradients && !sh->step_skipped); });
  schedulers_.push_back(&scheduler);
}

void Accelerator::prepare_one(data::DataLoader& loader) {
  check_not_prepared(&loader, "data loader");
  auto st = std::make_shared<LoaderState>();
  std::shared_ptr<LoaderState> ls = st;
  ls->loader = &loader;
  if (trace_enabled())
    loader.set_fetch_wrapper([](const std::function<void()>& fetch) {
      TraceSpan span("data loading", "data");
      fetch();
    });
  // Batches go to the GPU as the model did (copied ahead of use on a side stream).
  if (s_.device_placement && device_.is_cuda()) loader.set_device(device_);
  const data::DataLoaderOptions& o = loader.options();
  const int64_t N = world_size_, r = rank_;
  if (loader.iterable_dataset()) {
    // A stream: replace the loader (in place, same object) by one over a sharded stream.
    ls->iterable = true;
    ls->sharded = true;
    int64_t per_rank = o.batch_size, round = o.batch_size * N;
    if (s_.split_batches) {
      BRISK_CHECK(o.batch_size % N == 0, "Accelerator: with split_batches the data loader's batch_size (", o.batch_size,
                  ") must be a multiple of the number of processes (", N, ")");
      per_rank = o.batch_size / N;
      round = o.batch_size;
    }
    ls->shard =
        std::make_shared<accelerate::detail::IterableShard>(loader.iterable_dataset(), round, per_rank, r, o.drop_last);
    ls->shard->on_reset = [sh = sh_, l = ls.get()] { l->begin_tick = ++sh->loader_tick; };
    data::DataLoaderOptions no = o;
    no.batch_size = per_rank;
    loader = data::DataLoader(std::static_pointer_cast<data::IterableDataset>(ls->shard), no);
    loaders_.push_back(std::move(st));
    return;
  }
  // A DistributedSampler already gives each rank its own samples: leave its batches alone.
  ls->sharded = !std::dynamic_pointer_cast<data::DistributedSampler>(o.sampler);
  ls->own_shuffle = o.shuffle && !o.sampler;
  if (s_.split_batches && ls->sharded)
    BRISK_CHECK(o.batch_size % N == 0, "Accelerator: with split_batches the data loader's batch_size (", o.batch_size,
                ") must be a multiple of the number of processes (", N, ")");
  const bool split = s_.split_batches, even = s_.even_batches;
  loader.set_batch_source([sh = sh_, ls, N, r, split, even](uint64_t epoch) {
    auto span = trace_span("plan batches", "data");
    const data::DataLoader& l = *ls->loader;
    const data::DataLoaderOptions& lo = l.options();
    data::BatchPlan global;
    if (ls->own_shuffle && sh->seed) {
      // set_seed decides the shuffling: the same permutation on every rank, reseeded each epoch.
      data::RandomSampler sampler(l.dataset()->size(), *sh->seed);
      global = data::make_batches(sampler.indices(epoch), lo.batch_size, lo.drop_last);
    } else {
      global = l.default_batch_indices(epoch);
    }
    accelerate::ShardedPlan plan;
    if (ls->sharded)
      plan = accelerate::shard_batch_plan(global, lo.batch_size, N, r, split, even, lo.drop_last);
    else
      plan.batches = std::move(global);
    ls->plan_size = static_cast<int64_t>(plan.batches.size());
    ls->last_round_real = plan.last_round_real;
    ls->last_round_size = plan.last_round_size;
    ls->begin_tick = ++sh->loader_tick;
    return std::move(plan.batches);
  });
  loaders_.push_back(std::move(st));
}

void Accelerator::free_memory() {
  for (auto& o : optimizers_) {
    o->opt->set_step_gate(nullptr);
    if (o->autocast_copies) o->opt->keep_autocast_copies(DType::F32);
  }
  for (auto* s : schedulers_) s->set_step_gate(nullptr);
  for (auto& l : loaders_)
    if (!l->iterable) l->loader->set_batch_source(nullptr);
  models_.clear();
  optimizers_.clear();
  loaders_.clear();
  schedulers_.clear();
  active_ = nullptr;
  sh_->sync_gradients = true;
  sh_->step_skipped = false;
  // As torch.cuda.empty_cache(): blocks the caching allocator holds go back to the driver.
  if (device_.is_cuda()) cuda::empty_cache();
}

}  // namespace brisk
