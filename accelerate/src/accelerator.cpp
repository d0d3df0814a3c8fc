// The Accelerator: options, process facts, prepare, the training step (backward, accumulation,
// gates, mixed precision, clipping) and the collectives users call for metrics.
#include "brisk/accelerate/accelerator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

namespace brisk {

namespace {

namespace env = accelerate::env;

// One option resolved: the program's value, else the environment's (parsed), else the default.
template <class T, class Parse>
T pick(const std::optional<T>& program, const char* var, Parse parse, T fallback, const char* field,
       const std::function<const char*(const char*)>& getenv, std::map<std::string, std::string>& source) {
  if (program) {
    source[field] = "program";
    return *program;
  }
  if (var) {
    if (const char* v = getenv(var); v && *v) {
      source[field] = std::string("env ") + var;
      return parse(std::string(v), std::string(var));
    }
  }
  source[field] = "default";
  return fallback;
}

bool parse_bool(const std::string& v, const std::string& what) {
  const std::optional<bool> b = parse_bool_word(v);
  BRISK_CHECK(b.has_value(), "Accelerator: ", what, " must be a boolean (", kBoolWords, "), got '", v, "'");
  return *b;
}

int64_t parse_int(const std::string& v, const std::string& what) {
  const std::optional<int64_t> x = parse_integer<int64_t>(v);
  BRISK_CHECK(x.has_value(), "Accelerator: ", what, " must be an integer in [", std::numeric_limits<int64_t>::min(),
              ", ", std::numeric_limits<int64_t>::max(), "], got '", v, "'");
  return *x;
}

double parse_double(const std::string& v, const std::string& what) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  BRISK_CHECK(end && *end == '\0' && !v.empty(), "Accelerator: ", what, " must be a number, got '", v, "'");
  return x;
}

std::string parse_string(const std::string& v, const std::string&) {
  return v;
}

MixedPrecision parse_mixed_precision(const std::string& v, const std::string& var) {
  return parse_enum<MixedPrecision>(v, "Accelerator: mixed_precision (from " + var + ")");
}

Sharding parse_sharding(const std::string& v, const std::string& var) {
  return parse_enum<Sharding>(v, "Accelerator: sharding (from " + var + ")");
}

// "program" or "env BRISK_X" -> " (from BRISK_X)" for error messages.
std::string from(const AcceleratorSettings& s, const char* field) {
  auto it = s.source.find(field);
  if (it == s.source.end() || it->second == "default") return "";
  return it->second == "program" ? " (set by the program)" : " (from " + it->second.substr(4) + ")";
}

Tensor contiguous_detached(const Tensor& t) {
  Tensor x = t.detach();
  return x.is_contiguous() ? x : kernels::contiguous(x);
}

}  // namespace

AcceleratorSettings resolve_accelerator_options(const AcceleratorOptions& o,
                                                const std::function<const char*(const char*)>& getenv_fn) {
  std::function<const char*(const char*)> getenv = getenv_fn ? getenv_fn : [](const char* n) { return std::getenv(n); };
  AcceleratorSettings s;
  auto& src = s.source;
  s.mixed_precision = pick<MixedPrecision>(o.mixed_precision, env::kMixedPrecision, parse_mixed_precision,
                                           MixedPrecision::No, "mixed_precision", getenv, src);
  s.gradient_accumulation_steps = pick<int64_t>(o.gradient_accumulation_steps, env::kGradientAccumulationSteps,
                                                parse_int, 1, "gradient_accumulation_steps", getenv, src);
  s.sharding = pick<Sharding>(o.sharding, env::kSharding, parse_sharding, Sharding::None, "sharding", getenv, src);
  s.zero3_wrap = o.zero3_wrap;
  s.cpu = pick<bool>(o.cpu, env::kCpu, parse_bool, false, "cpu", getenv, src);
  s.device_placement = pick<bool>(o.device_placement, nullptr, parse_bool, true, "device_placement", getenv, src);
  s.split_batches = pick<bool>(o.split_batches, nullptr, parse_bool, false, "split_batches", getenv, src);
  s.even_batches = pick<bool>(o.even_batches, nullptr, parse_bool, true, "even_batches", getenv, src);
  if (o.seed) {
    s.seed = *o.seed;
    src["seed"] = "program";
  } else if (const char* v = getenv(env::kSeed); v && *v) {
    const std::optional<uint64_t> x = parse_integer<uint64_t>(v);
    BRISK_CHECK(x.has_value(), "Accelerator: seed (from ", env::kSeed, ") must be an integer in [0, ",
                std::numeric_limits<uint64_t>::max(), "], got '", v, "'");
    s.seed = *x;
    src["seed"] = std::string("env ") + env::kSeed;
  } else {
    src["seed"] = "default";
  }
  s.project_dir = pick<std::string>(o.project_dir, env::kProjectDir, parse_string, ".", "project_dir", getenv, src);
  s.automatic_checkpoint_naming =
      pick<bool>(o.automatic_checkpoint_naming, nullptr, parse_bool, false, "automatic_checkpoint_naming", getenv, src);
  if (o.total_limit) {
    s.total_limit = *o.total_limit;
    src["total_limit"] = "program";
  } else {
    src["total_limit"] = "default";
  }
  s.bucket_cap_mb = pick<double>(o.bucket_cap_mb, env::kBucketCapMb, parse_double, 25.0, "bucket_cap_mb", getenv, src);
  s.find_unused_parameters = pick<bool>(o.find_unused_parameters, env::kFindUnusedParameters, parse_bool, false,
                                        "find_unused_parameters", getenv, src);
  s.nan_watch = pick<bool>(o.nan_watch, env::kNanWatch, parse_bool, false, "nan_watch", getenv, src);
  if (o.deterministic) {
    s.deterministic = o.deterministic;
    src["deterministic"] = "program";
  } else if (const char* v = getenv(env::kDeterministic); v && *v) {
    s.deterministic = parse_bool(v, env::kDeterministic);
    src["deterministic"] = std::string("env ") + env::kDeterministic;
  } else {
    src["deterministic"] = "default";
  }
  if (o.profile) {
    s.profile = o.profile;
    src["profile"] = "program";
  } else if (const char* v = getenv(env::kProfile); v && *v) {
    // A boolean word, or a file for the table (which means on).
    s.profile = parse_bool_word(v).value_or(true);
    src["profile"] = std::string("env ") + env::kProfile;
  } else {
    src["profile"] = "default";
  }
  s.scaler.init_scale =
      pick<double>(o.scaler_init_scale, nullptr, parse_double, 65536.0, "scaler_init_scale", getenv, src);
  s.scaler.growth_factor =
      pick<double>(o.scaler_growth_factor, nullptr, parse_double, 2.0, "scaler_growth_factor", getenv, src);
  s.scaler.backoff_factor =
      pick<double>(o.scaler_backoff_factor, nullptr, parse_double, 0.5, "scaler_backoff_factor", getenv, src);
  s.scaler.growth_interval =
      pick<int64_t>(o.scaler_growth_interval, nullptr, parse_int, 2000, "scaler_growth_interval", getenv, src);

  // Validation: each error names the option, where its value came from and the value.
  BRISK_CHECK(s.gradient_accumulation_steps >= 1, "Accelerator: gradient_accumulation_steps",
              from(s, "gradient_accumulation_steps"), " must be at least 1, got ", s.gradient_accumulation_steps);
  BRISK_CHECK(!s.total_limit || *s.total_limit >= 1, "Accelerator: total_limit must be at least 1, got ",
              s.total_limit.value_or(0));
  BRISK_CHECK(s.bucket_cap_mb > 0, "Accelerator: bucket_cap_mb", from(s, "bucket_cap_mb"), " must be positive, got ",
              s.bucket_cap_mb);
  BRISK_CHECK(!s.project_dir.empty(), "Accelerator: project_dir", from(s, "project_dir"), " is empty");
  BRISK_CHECK(s.scaler.init_scale > 0, "Accelerator: scaler_init_scale must be positive, got ", s.scaler.init_scale);
  BRISK_CHECK(s.scaler.growth_factor > 1, "Accelerator: scaler_growth_factor must be > 1, got ",
              s.scaler.growth_factor);
  BRISK_CHECK(s.scaler.backoff_factor > 0 && s.scaler.backoff_factor < 1,
              "Accelerator: scaler_backoff_factor must be in (0, 1), got ", s.scaler.backoff_factor);
  BRISK_CHECK(s.scaler.growth_interval >= 1, "Accelerator: scaler_growth_interval must be at least 1, got ",
              s.scaler.growth_interval);
  return s;
}

// --- construction and process facts ----------------------------------------------------------

Accelerator::Accelerator(AcceleratorOptions options) : s_(resolve_accelerator_options(options)) {
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
// they still hold let everything through from now on.
Accelerator::~Accelerator() {
  sh_->alive = false;
}

void Accelerator::wait_for_everyone() {
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
      if (!x.is_same(t)) kernels::copy_(t, x);
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
  for (auto& o : optimizers_) o->opt->set_step_gate(nullptr);
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

// --- the training step ---------------------------------------------------------------------------

// Which prepared loader the current batch came from: the one whose (epoch, position) moved
// since the last look, preferring the one that started its epoch last.
Accelerator::LoaderState* Accelerator::active_loader() {
  LoaderState* best = nullptr;
  for (auto& l : loaders_) {
    const uint64_t e = l->loader->epoch();
    const int64_t p = l->loader->position();
    const bool changed = !l->seen_valid || e != l->seen_epoch || p != l->seen_position || l->begin_tick != l->seen_tick;
    l->seen_valid = true;
    l->seen_epoch = e;
    l->seen_position = p;
    l->seen_tick = l->begin_tick;
    if (changed && l->begin_tick > 0 && (!best || l->begin_tick > best->begin_tick)) best = l.get();
  }
  if (best) active_ = best;
  return active_;
}

Accelerator::Accumulate::Accumulate(Accelerator& acc, nn::Module* model) {
  if (model) {
    bool known = false;
    for (auto& m : acc.models_) known |= m->model == model;
    BRISK_CHECK(known, "Accelerator::accumulate: the model was not prepared (call acc.prepare(model, ...) first)");
  }
  // As Accelerate's _do_sync: the last batch of the data loader always syncs (and restarts
  // the count); otherwise every gradient_accumulation_steps-th micro-step does.
  LoaderState* l = acc.active_loader();
  if (l && l->at_end()) {
    acc.step_ = 0;
    sync_ = true;
  } else {
    ++acc.step_;
    sync_ = acc.step_ % acc.s_.gradient_accumulation_steps == 0;
  }
  acc.sh_->sync_gradients = sync_;
}

Accelerator::NoSync::NoSync(Accelerator& acc, nn::Module& model) : acc_(acc), model_(&model) {
  for (auto& m : acc_.models_)
    if (m->model == model_) ++m->no_sync_depth;
}

Accelerator::NoSync::~NoSync() {
  for (auto& m : acc_.models_)
    if (m->model == model_) --m->no_sync_depth;
}

Accelerator::Autocast::Autocast(MixedPrecision mixed_precision) {
  bool enabled = false;
  DType dtype = amp::mixed_precision_dtype(mixed_precision, &enabled);
  if (enabled) guard_.emplace(dtype, true);
}

void Accelerator::backward(const Tensor& loss) {
  auto span = trace_span("backward", "compute");
  BRISK_CHECK(loss.defined(), "Accelerator::backward: the loss is undefined");
  Tensor l = loss;
  if (s_.gradient_accumulation_steps > 1) l = l / static_cast<double>(s_.gradient_accumulation_steps);
  if (scaler_) l = scaler_->scale(l);
  bool any_sync = false;
  for (auto& m : models_)
    if (m->reducer) {
      const bool sync = sh_->sync_gradients && m->no_sync_depth == 0;
      m->reducer->set_sync(sync);
      any_sync |= sync;
    }
  if (s_.sharding != Sharding::None) check_sharded_params();
  bool zero_sync = sh_->sync_gradients;
  for (auto& m : models_) zero_sync &= m->no_sync_depth == 0;
  for (auto& o : optimizers_)
    if (o->zero) o->zero->begin_backward(zero_sync);
  l.backward();
  for (auto& o : optimizers_)
    if (o->zero) o->zero->end_backward();
  if (any_sync) {
    auto wait = trace_span("wait for gradients", "comm");
    for (auto& m : models_)
      if (m->reducer && m->reducer->sync()) m->reducer->finalize();
  }
  if (s_.nan_watch) check_finite(loss);
  if (sh_->sync_gradients) on_synced_backward();
}

// Under sharding no Reducer averages the models' gradients: the optimizers' engines do, so every
// parameter that trains must belong to a prepared optimizer (else its gradient would stay local and
// the ranks would drift apart). Checked once per prepared model.
void Accelerator::check_sharded_params() {
  for (size_t i = 0; i < models_.size(); ++i) {
    ModelState& m = *models_[i];
    if (m.sharding_checked) continue;
    for (const auto& [name, p] : m.model->named_parameters()) {
      if (!p.requires_grad()) continue;
      bool owned = false;
      for (auto& o : optimizers_) owned = owned || (o->zero && o->zero->owns(p));
      BRISK_CHECK(owned, "Accelerator::backward: with sharding ", enum_name(s_.sharding), " the parameter '", name, "'",
                  models_.size() > 1 ? " of model " + std::to_string(i) : std::string(),
                  " belongs to no prepared optimizer, so nothing would average its gradient across processes; "
                  "prepare an optimizer over it, or set requires_grad(false) (docs/sharding.md)");
    }
    m.sharding_checked = true;
  }
}

// nan_watch: one reduction over the loss and every gradient (max |x|, NaN winning) per device, read
// once; only when it is not finite are the tensors looked at one by one to name the culprit. Under
// fp16 the gradients are still scaled here and an overflow is the GradScaler's business (it skips
// the step), so only the loss is checked there. After the reducers finished, every rank holds the
// same gradients and so stops at the same step.
void Accelerator::check_finite(const Tensor& loss) {
  auto span = trace_span("nan_watch", "compute");
  ++backward_calls_;
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  auto add = [&](const Tensor& t) {
    for (auto& [d, list] : by_device)
      if (d == t.device()) return list.push_back(t);
    by_device.push_back({t.device(), {t}});
  };
  const Tensor l = loss.detach();
  if (is_floating(l.dtype())) add(l);
  if (!scaler_)
    for (auto& m : models_)
      for (const Tensor& p : m->model->parameters())
        if (Tensor g = p.grad(); g.defined() && is_floating(g.dtype())) add(g);
  bool finite = true;
  for (const auto& [device, tensors] : by_device) finite &= std::isfinite(kernels::max_abs(tensors));
  if (finite) return;
  const std::string when = " (nan_watch, backward call " + std::to_string(backward_calls_) + ")";
  const double lv = is_floating(l.dtype()) ? kernels::max_abs({l}) : 0.0;
  BRISK_CHECK(std::isfinite(lv), "Accelerator::backward: the loss is ", std::isnan(lv) ? "NaN" : "inf", when);
  for (size_t i = 0; i < models_.size(); ++i)
    for (const auto& [name, p] : models_[i]->model->named_parameters()) {
      const Tensor g = p.grad();
      if (!g.defined() || !is_floating(g.dtype())) continue;
      const double v = kernels::max_abs({g});
      BRISK_CHECK(std::isfinite(v), "Accelerator::backward: the gradient of parameter '", name, "'",
                  models_.size() > 1 ? " of model " + std::to_string(i) : std::string(), " contains ",
                  std::isnan(v) ? "NaN" : "inf", " (shape ", p.sizes(), ")", when);
    }
}

// After the backward of a micro-step that syncs: under fp16 the gradients are unscaled now (one
// fused pass that also finds inf/NaN, agreed across ranks) and the scale is updated; the next
// optimizer step is skipped when inf/NaN was found.
void Accelerator::on_synced_backward() {
  sh_->step_skipped = false;
  unscaled_ = false;
  if (scaler_ && !optimizers_.empty()) {
    scaler_->unscale_(*optimizers_.front()->opt);
    sh_->step_skipped = scaler_->found_inf();
    scaler_->update();
    unscaled_ = true;
  }
  for (auto& o : optimizers_) o->pending = true;
}

void Accelerator::unscale_gradients() {
  // backward() already unscaled the synced gradients; on a micro-step that does not sync there
  // is nothing to step, so nothing to unscale either.
  if (!scaler_ || unscaled_ || !sh_->sync_gradients || optimizers_.empty()) return;
  scaler_->unscale_(*optimizers_.front()->opt);
  sh_->step_skipped = scaler_->found_inf();
  scaler_->update();
  unscaled_ = true;
}

double Accelerator::clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  unscale_gradients();
  // Sharded: each rank holds a slice of the averaged gradients (in its optimizers' shards), so the
  // norm is combined across ranks; the slices of every optimizer holding one of `params` are clipped.
  std::vector<Tensor> shard_grads;
  for (auto& o : optimizers_) {
    if (!o->zero) continue;
    bool mine = false;
    for (const Tensor& p : params) mine = mine || o->zero->owns(p);
    if (!mine) continue;
    for (const Tensor& g : o->zero->shard_grads()) shard_grads.push_back(g);
  }
  if (s_.sharding != Sharding::None) {
    BRISK_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
    BRISK_CHECK(norm_type == 2.0 || (std::isinf(norm_type) && norm_type > 0),
                "clip_grad_norm_: norm_type must be 2 or inf, got ", norm_type);
    const bool inf = std::isinf(norm_type);
    const double local = shard_grads.empty() ? 0.0 : kernels::total_norm(shard_grads, norm_type).item<double>();
    Tensor t = full({1}, inf ? local : local * local, {.dtype = DType::F64});
    if (world_size_ > 1) pg_->all_reduce(t, {.op = inf ? dist::ReduceOp::Max : dist::ReduceOp::Sum});
    const double total = inf ? t.item<double>() : std::sqrt(t.item<double>());
    if (!shard_grads.empty())
      kernels::clip_grads_with_norm_(shard_grads, max_norm, full({}, total, {.dtype = DType::F64}));
    return total;
  }
  // The gradients are identical on every rank after a synced backward, so the local norm is the
  // norm over all ranks' gradients.
  return optim::clip_grad_norm_(params, max_norm, norm_type);
}

double Accelerator::clip_grad_norm_(const nn::Module& model, double max_norm, double norm_type) {
  return clip_grad_norm_(model.parameters(), max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  unscale_gradients();
  optim::clip_grad_value_(params, clip_value);
}

void Accelerator::clip_grad_value_(const nn::Module& model, double clip_value) {
  clip_grad_value_(model.parameters(), clip_value);
}

// --- collectives ---------------------------------------------------------------------------------

Tensor Accelerator::gather(const Tensor& t) {
  BRISK_CHECK(t.defined(), "Accelerator::gather: the tensor is undefined");
  Tensor x = contiguous_detached(t.dim() == 0 ? t.reshape({1}) : t);
  if (world_size_ == 1) return x;
  // Shapes must agree: compare them first so a mismatch is an error, not a hang.
  constexpr int64_t kMaxDims = 16;
  BRISK_CHECK(x.dim() <= kMaxDims, "Accelerator::gather: at most ", kMaxDims, " dims, got ", x.sizes());
  std::vector<int64_t> mine(kMaxDims + 2, -1);
  mine[0] = x.dim();
  mine[1] = static_cast<int64_t>(x.dtype());
  for (int64_t d = 0; d < x.dim(); ++d) mine[static_cast<size_t>(d + 2)] = x.size(d);
  Tensor all = pg_->all_gather(from_vector<int64_t>(mine, {1, kMaxDims + 2}));
  std::vector<int64_t> v = all.to_vector<int64_t>();
  for (int r = 1; r < world_size_; ++r) {
    bool same = std::equal(v.begin(), v.begin() + kMaxDims + 2, v.begin() + r * (kMaxDims + 2));
    if (!same) {
      std::ostringstream os;
      for (int q = 0; q < world_size_; ++q) {
        const int64_t* row = v.data() + q * (kMaxDims + 2);
        os << (q ? ", " : "") << "rank " << q << " " << dtype_name(static_cast<DType>(row[1])) << " [";
        for (int64_t d = 0; d < row[0]; ++d) os << (d ? ", " : "") << row[d + 2];
        os << "]";
      }
      BRISK_THROW("Accelerator::gather: shapes and dtypes must match on every process, got ", os.str(),
                  " (pad_across_processes makes them equal)");
    }
  }
  return pg_->all_gather(x);
}

Tensor Accelerator::gather_for_metrics(const Tensor& t) {
  BRISK_CHECK(t.defined(), "Accelerator::gather_for_metrics: the tensor is undefined");
  LoaderState* l = active_loader();
  Tensor x = contiguous_detached(t.dim() == 0 ? t.reshape({1}) : t);
  Tensor out = x;
  if (world_size_ > 1) {
    std::vector<Tensor> parts = pg_->all_gather_uneven(x);
    out = kernels::cat(parts, 0);
  }
  // On the last batch of an epoch, the tail of the gathered round repeats samples from the start.
  if (l && l->sharded && l->at_end()) {
    const int64_t real = l->iterable ? l->shard->last_round_real() : l->last_round_real;
    const int64_t size = l->iterable ? l->shard->round_size() : l->last_round_size;
    if (size > 0 && real < size && out.size(0) == size) out = kernels::contiguous(out.narrow(0, 0, real));
  }
  return out;
}

Tensor Accelerator::reduce(const Tensor& t, dist::ReduceOp op) {
  BRISK_CHECK(op != dist::ReduceOp::Mean || t.is_floating_point(),
              "Accelerator::reduce: mean needs a floating-point tensor, got ", dtype_name(t.dtype()));
  Tensor x = empty(t.sizes(), t.dtype(), t.device());
  kernels::copy_(x, t.detach());
  if (world_size_ == 1) return x;
  pg_->all_reduce(x, {.op = op});
  return x;
}

Tensor Accelerator::broadcast(const Tensor& t, int from) {
  BRISK_CHECK(from >= 0 && from < world_size_, "Accelerator::broadcast: from must be a rank in [0, ", world_size_,
              "), got ", from);
  Tensor x = empty(t.sizes(), t.dtype(), t.device());
  kernels::copy_(x, t.detach());
  if (world_size_ > 1) pg_->broadcast(x, {.root = from});
  return x;
}

Tensor Accelerator::pad_across_processes(const Tensor& t, int64_t dim, double value, bool pad_first) {
  BRISK_CHECK(t.defined() && t.dim() >= 1, "Accelerator::pad_across_processes: needs a tensor with at least one dim");
  const int64_t d = wrap_dim(dim, t.dim(), "Accelerator::pad_across_processes");
  if (world_size_ == 1) return t;
  Tensor size = from_vector<int64_t>({t.size(d)}, {1});
  pg_->all_reduce(size, {.op = dist::ReduceOp::Max});
  const int64_t longest = size.item<int64_t>();
  if (longest == t.size(d)) return t;
  Shape shape = t.sizes();
  shape[static_cast<size_t>(d)] = longest;
  Tensor out = full(shape, value, {.dtype = t.dtype(), .device = t.device()});
  Tensor region = out.narrow(d, pad_first ? longest - t.size(d) : 0, t.size(d));
  kernels::copy_(region, t.detach());
  return out;
}

std::pair<int64_t, int64_t> Accelerator::share(int64_t n) const {
  const int64_t base = n / world_size_, extra = n % world_size_;
  const int64_t begin = rank_ * base + std::min<int64_t>(rank_, extra);
  return {begin, begin + base + (rank_ < extra ? 1 : 0)};
}

Tensor Accelerator::split_between_processes(const Tensor& t) const {
  BRISK_CHECK(t.defined() && t.dim() >= 1, "Accelerator::split_between_processes: needs a tensor with a dim 0");
  auto [begin, end] = share(t.size(0));
  return t.narrow(0, begin, end - begin);
}

data::DataLoader& Accelerator::skip_first_batches(data::DataLoader& loader, int64_t n) {
  loader.set_start_batch(n);
  return loader;
}

}  // namespace brisk
