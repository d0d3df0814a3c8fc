// The Trainer (trainer.h): the training loop of examples/fashion_mnist.cpp, written once, driven by
// TrainingArguments.
#include "brisk/accelerate/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "brisk/autograd/autograd.h"
#include "brisk/data/safetensors.h"
#include "brisk/kernels/factory.h"
#include "brisk/optim/adam.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "brisk/util/json.h"

namespace brisk {

namespace fs = std::filesystem;

// --- TrainingArguments ------------------------------------------------------------------------------

namespace {

// A flag for a choice kept as an enum: the value is parsed once, by parse_enum (a bad one is a
// usage error listing the valid spellings); --help shows the default's spelling.
template <class E>
void add_choice(cli::Parser& p, const std::string& name, const std::string& help, E* value) {
  p.add(
      name, help, [value, name](const std::string& v) { *value = parse_enum<E>(v, "--" + name); },
      std::string(enum_name(*value)));
}
template <class E>
void add_choice(cli::Parser& p, const std::string& name, const std::string& help, std::optional<E>* value) {
  p.add(
      name, help, [value, name](const std::string& v) { *value = parse_enum<E>(v, "--" + name); }, "");
}

// WarmupLR's decay for a schedule with a warm-up (constant alone has none: a LambdaLR).
optim::WarmupDecay decay_after_warmup(const TrainingArguments& a) {
  switch (a.lr_scheduler_type) {
    case SchedulerType::Cosine:
      return optim::WarmupDecay::Cosine;
    case SchedulerType::Constant:
    case SchedulerType::ConstantWithWarmup:
      return optim::WarmupDecay::Constant;
    case SchedulerType::Linear:
      break;
  }
  return optim::WarmupDecay::Linear;
}

}  // namespace

void TrainingArguments::add_flags(cli::Parser& p) {
  p.add("output_dir", "folder for metrics.jsonl/.csv, checkpoints/ and model.safetensors", &output_dir);
  p.add("num_train_epochs", "passes over the training set", &num_train_epochs);
  p.add("max_steps", "optimizer steps to train (> 0 overrides --num_train_epochs)", &max_steps);
  p.add("per_device_train_batch_size", "training samples per step and process", &per_device_train_batch_size);
  p.add("per_device_eval_batch_size", "evaluation samples per batch and process", &per_device_eval_batch_size);
  p.add("learning_rate", "AdamW's peak learning rate", &learning_rate);
  p.add("weight_decay", "AdamW's decoupled weight decay", &weight_decay);
  p.add("adam_beta1", "AdamW's beta1", &adam_beta1);
  p.add("adam_beta2", "AdamW's beta2", &adam_beta2);
  p.add("adam_epsilon", "AdamW's epsilon", &adam_epsilon);
  add_choice(p, "lr_scheduler_type", "linear, cosine, constant or constant_with_warmup", &lr_scheduler_type);
  p.add("warmup_steps", "linear warm-up over this many optimizer steps (wins over --warmup_ratio)", &warmup_steps);
  p.add("warmup_ratio", "linear warm-up over this fraction of the optimizer steps", &warmup_ratio);
  p.add("gradient_accumulation_steps", "micro-batches per optimizer step", &gradient_accumulation_steps);
  p.add("max_grad_norm", "clip the gradients' total norm to this (<= 0: no clipping)", &max_grad_norm);
  add_choice(p, "mixed_precision", "no, fp16 or bf16 (default: brisk launch's --mixed_precision, else no)",
             &mixed_precision);
  p.add("seed", "seed for the random generator and the shuffling", &seed);
  p.add("logging_steps", "log the training loss every this many optimizer steps (<= 0: never)", &logging_steps);
  add_choice(p, "eval_strategy", "no, steps or epoch", &eval_strategy);
  p.add("eval_steps", "with --eval_strategy steps: evaluate every this many steps (0: --logging_steps)", &eval_steps);
  add_choice(p, "save_strategy", "no, steps or epoch", &save_strategy);
  p.add("save_steps", "with --save_strategy steps: save a checkpoint every this many steps", &save_steps);
  p.add("save_total_limit", "keep only the newest this many checkpoints (0: all)", &save_total_limit);
  p.add("load_best_model_at_end", "after training, load the weights of the best evaluation", &load_best_model_at_end);
  p.add("metric_for_best_model", "the evaluation metric that decides the best model (e.g. loss, accuracy)",
        &metric_for_best_model);
  p.add("greater_is_better", "whether a greater metric is better (default: false for losses, else true)",
        &greater_is_better);
  p.add("early_stopping_patience", "stop after this many evaluations without a new best (0: never)",
        &early_stopping_patience);
  p.add("resume_from_checkpoint", "a checkpoint folder to resume from, or \"latest\"", &resume_from_checkpoint);
  p.add("dataloader_num_workers", "data-loading threads", &dataloader_num_workers);
  p.add("report_to", "where logs go under --output_dir: jsonl, csv (comma-separated) or none", &report_to);
  p.add("disable_tqdm", "no progress bar", &disable_tqdm);
  p.add("prediction_loss_only", "evaluation keeps only the loss (outputs are not gathered)", &prediction_loss_only);
}

namespace {

bool one_of(const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (v == a) return true;
  return false;
}

// The output folder, or a brisk::Error naming it and the system's reason.
void make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  BRISK_CHECK(!ec, "Trainer: cannot create output_dir \"", dir, "\": ", ec.message());
}

bool reports_to(const TrainingArguments& a, const std::string& what) {
  auto v = cli::split_comma_list(a.report_to);
  return std::find(v.begin(), v.end(), what) != v.end();
}

}  // namespace

void TrainingArguments::validate() const {
  BRISK_CHECK(!output_dir.empty(), "TrainingArguments: output_dir is empty");
  BRISK_CHECK(max_steps > 0 || num_train_epochs > 0, "TrainingArguments: num_train_epochs must be >= 1 (got ",
              num_train_epochs, ") unless max_steps > 0 (got ", max_steps, ")");
  BRISK_CHECK(per_device_train_batch_size >= 1, "TrainingArguments: per_device_train_batch_size must be >= 1, got ",
              per_device_train_batch_size);
  BRISK_CHECK(per_device_eval_batch_size >= 1, "TrainingArguments: per_device_eval_batch_size must be >= 1, got ",
              per_device_eval_batch_size);
  BRISK_CHECK(learning_rate >= 0, "TrainingArguments: learning_rate must be >= 0, got ", learning_rate);
  BRISK_CHECK(gradient_accumulation_steps >= 1, "TrainingArguments: gradient_accumulation_steps must be >= 1, got ",
              gradient_accumulation_steps);
  BRISK_CHECK(warmup_steps >= 0 && warmup_ratio >= 0 && warmup_ratio <= 1,
              "TrainingArguments: warmup_steps must be >= 0 and warmup_ratio in [0, 1], got ", warmup_steps, " and ",
              warmup_ratio);
  BRISK_CHECK(eval_strategy != IntervalStrategy::Steps || eval_steps > 0 || logging_steps > 0,
              "TrainingArguments: eval_strategy steps needs eval_steps > 0 (or logging_steps > 0), got ", eval_steps);
  BRISK_CHECK(save_strategy != IntervalStrategy::Steps || save_steps > 0,
              "TrainingArguments: save_strategy steps needs save_steps > 0, got ", save_steps);
  BRISK_CHECK(save_total_limit >= 0, "TrainingArguments: save_total_limit must be >= 0, got ", save_total_limit);
  BRISK_CHECK(early_stopping_patience >= 0, "TrainingArguments: early_stopping_patience must be >= 0, got ",
              early_stopping_patience);
  BRISK_CHECK((!load_best_model_at_end && early_stopping_patience == 0) || eval_strategy != IntervalStrategy::No,
              "TrainingArguments: load_best_model_at_end and early_stopping_patience need an eval_strategy other "
              "than no");
  BRISK_CHECK(dataloader_num_workers >= 0, "TrainingArguments: dataloader_num_workers must be >= 0, got ",
              dataloader_num_workers);
  for (const std::string& r : cli::split_comma_list(report_to))
    BRISK_CHECK(one_of(r, {"jsonl", "csv", "none"}), "TrainingArguments: report_to takes jsonl, csv or none, got \"", r,
                "\" in \"", report_to, "\"");
}

std::string TrainingArguments::best_metric_key() const {
  return metric_for_best_model.rfind("eval_", 0) == 0 ? metric_for_best_model : "eval_" + metric_for_best_model;
}

bool TrainingArguments::best_is_greater() const {
  if (greater_is_better) return *greater_is_better;
  const std::string k = best_metric_key();
  return !(k.size() >= 4 && k.compare(k.size() - 4, 4, "loss") == 0);
}

// --- Trainer --------------------------------------------------------------------------------------------

namespace {
// As Hugging Face's Trainer: weight decay on the weight matrices and kernels (dim >= 2), none on
// biases and normalisation scales; one group when there is no decay.
std::vector<optim::ParamGroup<optim::AdamWOptions>> decay_groups(nn::Module& model, optim::AdamWOptions options) {
  if (options.weight_decay == 0) return {{model.parameters(), options}};
  return optim::decay_matrices_only(model.parameters(), options);
}
}  // namespace

Trainer::Trainer(nn::Module& model, TrainingArguments args, std::shared_ptr<data::Dataset> train_dataset,
                 std::shared_ptr<data::Dataset> eval_dataset, LossFn loss, ComputeMetrics compute_metrics)
    : model_(model),
      args_(std::move(args)),
      train_dataset_(std::move(train_dataset)),
      eval_dataset_(std::move(eval_dataset)),
      loss_(std::move(loss)),
      compute_metrics_(std::move(compute_metrics)) {
  args_.validate();
  BRISK_CHECK(train_dataset_ != nullptr || args_.max_steps == 0, "Trainer: no training dataset");
  BRISK_CHECK(args_.eval_strategy == IntervalStrategy::No || eval_dataset_ != nullptr, "Trainer: eval_strategy is ",
              enum_name(args_.eval_strategy), " but there is no eval_dataset");
  acc_ = std::make_unique<Accelerator>(AcceleratorOptions{
      .mixed_precision = args_.mixed_precision,
      .gradient_accumulation_steps = args_.gradient_accumulation_steps,
      .seed = args_.seed,
      .project_dir = args_.output_dir,
      .automatic_checkpoint_naming = true,
      .total_limit = args_.save_total_limit > 0 ? std::optional<int64_t>(args_.save_total_limit) : std::nullopt});
  opt_ = std::make_unique<optim::AdamW>(decay_groups(model_, optim::AdamWOptions{.lr = args_.learning_rate,
                                                                                 .beta1 = args_.adam_beta1,
                                                                                 .beta2 = args_.adam_beta2,
                                                                                 .eps = args_.adam_epsilon,
                                                                                 .weight_decay = args_.weight_decay}));
  train_loader_ = std::make_unique<data::DataLoader>(
      train_dataset_, data::DataLoaderOptions{.batch_size = args_.per_device_train_batch_size,
                                              .shuffle = true,
                                              .num_workers = args_.dataloader_num_workers,
                                              .seed = args_.seed,
                                              .pin_memory = true});
  acc_->prepare(model_, *opt_, *train_loader_);
  if (eval_dataset_) {
    eval_loader_ = std::make_unique<data::DataLoader>(
        eval_dataset_, data::DataLoaderOptions{.batch_size = args_.per_device_eval_batch_size,
                                               .num_workers = args_.dataloader_num_workers,
                                               .pin_memory = true});
    acc_->prepare(*eval_loader_);
  }

  // The plan: the last batch of an epoch always ends an accumulation window.
  const int64_t batches = train_loader_->size();
  BRISK_CHECK(batches > 0, "Trainer: the training set gives no batch (", train_dataset_->size(), " samples, batch ",
              args_.per_device_train_batch_size, " per process, ", acc_->num_processes(), " processes)");
  state_.steps_per_epoch = (batches + args_.gradient_accumulation_steps - 1) / args_.gradient_accumulation_steps;
  state_.max_steps = args_.max_steps > 0 ? args_.max_steps : args_.num_train_epochs * state_.steps_per_epoch;
  const int64_t warmup =
      args_.warmup_steps > 0
          ? args_.warmup_steps
          : static_cast<int64_t>(std::ceil(args_.warmup_ratio * static_cast<double>(state_.max_steps)));
  if (args_.lr_scheduler_type == SchedulerType::Constant) {
    sched_ = std::make_unique<optim::LambdaLR>(*opt_, [](int64_t) { return 1.0; });
  } else if (warmup >= state_.max_steps) {
    // A warm-up as long as the run (or longer): the rate rises throughout, as Hugging Face's
    // schedules do (step / warmup_steps), and never decays.
    sched_ = std::make_unique<optim::LambdaLR>(
        *opt_, [warmup](int64_t step) { return static_cast<double>(step) / static_cast<double>(warmup); });
  } else {
    sched_ = std::make_unique<optim::WarmupLR>(
        *opt_, optim::WarmupOptions{
                   .warmup_steps = warmup, .total_steps = state_.max_steps, .decay = decay_after_warmup(args_)});
  }
  acc_->prepare(*sched_);

  // What a checkpoint must carry besides the Accelerator's own state to continue the same run.
  acc_->register_for_checkpointing(
      "trainer",
      [this] {
        json::Value v = json::Value::object();
        v.set("global_step", state_.global_step);
        v.set("loss_since_log", loss_since_log_);
        v.set("steps_since_log", steps_since_log_);
        v.set("loss_total", loss_total_);
        v.set("best_metric", state_.best_metric ? json::Value(*state_.best_metric) : json::Value());
        v.set("best_step", state_.best_step);
        v.set("evaluations_without_improvement", state_.evaluations_without_improvement);
        return v;
      },
      [this](const json::Value& v) {
        state_.global_step = v.at("global_step").as_int();
        loss_since_log_ = v.at("loss_since_log").as_double();
        steps_since_log_ = v.at("steps_since_log").as_int();
        loss_total_ = v.at("loss_total").as_double();
        const json::Value& best = v.at("best_metric");
        state_.best_metric = best.is_null() ? std::nullopt : std::optional<double>(best.as_double());
        state_.best_step = v.at("best_step").as_int();
        state_.evaluations_without_improvement = v.at("evaluations_without_improvement").as_int();
      });
}

Trainer::~Trainer() = default;

Tensor Trainer::compute_loss(const Tensor& outputs, const Tensor& targets) const {
  if (loss_) return loss_(outputs, targets);
  BRISK_CHECK(outputs.numel() == 1,
              "Trainer: without a loss function the model must return its loss (one value), "
              "got outputs of shape ",
              outputs.sizes());
  return outputs.reshape({});
}

// resume_from_checkpoint, a restart by `brisk launch --max-restarts` or the start after a
// preemption: the newest complete checkpoint (none yet: from scratch, with fresh logs).
void Trainer::resume_or_start_fresh() {
  bool resumed = false;
  std::string from;
  if (!args_.resume_from_checkpoint.empty() && args_.resume_from_checkpoint != "latest")
    from = acc_->load_state(args_.resume_from_checkpoint);
  else
    from = acc_->resume_on_restart(args_.resume_from_checkpoint == "latest");
  if (!from.empty()) {
    acc_->print("Trainer: resumed from ", from, " at step ", state_.global_step);
    resumed = true;
    if (acc_->is_main_process()) restore_logs();
  }
  if (!resumed) {
    // A fresh run starts fresh logs.
    state_.log_history.clear();
    csv_rows_.clear();
    csv_columns_.clear();
    csv_rewrite_ = true;
    if (acc_->is_main_process()) {
      make_dir(args_.output_dir);
      std::error_code ec;
      for (const char* f : {"metrics.jsonl", "metrics.csv"}) {
        fs::remove(fs::path(args_.output_dir) / f, ec);
        BRISK_CHECK(!ec, "Trainer: cannot remove the old ", f, " in \"", args_.output_dir, "\": ", ec.message());
      }
    }
  }
}

Metrics Trainer::train() {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  stop_ = false;
  resume_or_start_fresh();
  const int64_t total = state_.max_steps;
  const int64_t spe = state_.steps_per_epoch;
  const int64_t start_step = state_.global_step;
  const bool eval_by_steps = args_.eval_strategy == IntervalStrategy::Steps;
  const int64_t eval_every = args_.eval_steps > 0 ? args_.eval_steps : args_.logging_steps;
  ProgressBar bar(total - start_step, "train", "step", acc_->is_main_process() && !args_.disable_tqdm);
  double micro_loss_sum = 0;
  int64_t micro_steps = 0;
  while (state_.global_step < total && !stop_) {
    for (auto& [x, y] : *train_loader_) {
      double loss_value;
      {
        MemoryCategoryGuard activations(MemoryCategory::Activations);
        auto sync = acc_->accumulate(model_);
        Tensor loss;
        {
          auto ac = acc_->autocast();
          loss = compute_loss(model_(x), y);
        }
        acc_->backward(loss);
        if (acc_->sync_gradients() && args_.max_grad_norm > 0) acc_->clip_grad_norm_(model_, args_.max_grad_norm);
        opt_->step();
        sched_->step();
        opt_->zero_grad();
        loss_value = loss.item<double>();
      }
      micro_loss_sum += loss_value;
      ++micro_steps;
      if (!acc_->sync_gradients()) continue;
      // One optimizer step: its loss is the mean over its micro-batches.
      const double step_loss = micro_loss_sum / static_cast<double>(micro_steps);
      micro_loss_sum = 0;
      micro_steps = 0;
      ++state_.global_step;
      state_.epoch = static_cast<double>(state_.global_step) / static_cast<double>(spe);
      loss_since_log_ += step_loss;
      loss_total_ += step_loss;
      ++steps_since_log_;
      char post[64];
      std::snprintf(post, sizeof post, "loss %.4f, epoch %.2f", step_loss, state_.epoch);
      bar.update(1, post);
      for (auto& c : callbacks_)
        if (c.on_step_end) c.on_step_end(state_);

      if (args_.logging_steps > 0 && state_.global_step % args_.logging_steps == 0) {
        // The mean over the steps since the last log and over the processes.
        const double mean = loss_since_log_ / static_cast<double>(steps_since_log_);
        const double loss_all =
            acc_->reduce(full({1}, mean, {.dtype = DType::F64}), dist::ReduceOp::Mean).item<double>();
        loss_since_log_ = 0;
        steps_since_log_ = 0;
        log({{"loss", loss_all}, {"learning_rate", sched_->get_last_lr()}});
      }
      const bool epoch_end = state_.global_step % spe == 0;
      if ((eval_by_steps && state_.global_step % eval_every == 0) ||
          (args_.eval_strategy == IntervalStrategy::Epoch && epoch_end)) {
        after_evaluation(evaluate());
      }
      if ((args_.save_strategy == IntervalStrategy::Steps && state_.global_step % args_.save_steps == 0) ||
          (args_.save_strategy == IntervalStrategy::Epoch && epoch_end)) {
        save_checkpoint();
      }
      if (state_.global_step >= total || stop_) break;
      // SIGTERM/SIGUSR1 (a batch system's preemption): every rank saves (unless it just did) and
      // the program exits with status 75; started again, it continues from here.
      acc_->stop_if_preempted();
    }
  }
  bar.close();
  if (args_.load_best_model_at_end && state_.best_metric) {
    acc_->wait_for_everyone();
    const std::string path = (fs::path(args_.output_dir) / "best_model" / "model.safetensors").string();
    {
      auto full = acc_->full_parameters(model_);  // zero3: loaded whole, then back into the shards
      model_.load_state_dict(data::load_safetensors(path).tensors);
    }
    acc_->print("Trainer: loaded the best model (", args_.best_metric_key(), " ", *state_.best_metric, " at step ",
                state_.best_step, ") from ", path);
  }
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  const double train_loss =
      acc_->reduce(full({1}, state_.global_step > 0 ? loss_total_ / static_cast<double>(state_.global_step) : 0.0,
                        {.dtype = DType::F64}),
                   dist::ReduceOp::Mean)
          .item<double>();
  Metrics out{{"train_loss", train_loss},
              {"train_steps", static_cast<double>(state_.global_step - start_step)},
              {"train_seconds", seconds}};
  log(out);
  return out;
}

// Every batch of `loader` through the model; predictions and labels gathered from all processes
// without the samples repeated to even out the shards.
Trainer::Gathered Trainer::run_eval(data::DataLoader& loader, bool keep_outputs) {
  NoGradGuard no_grad;
  const bool was_training = model_.is_training();
  model_.eval();
  Gathered g;
  std::vector<Tensor> preds, labels;
  for (auto& [x, y] : loader) {
    Tensor out, loss;
    const int64_t n = x.size(0);
    // The last batch of a process may end with samples repeated to even out the shards, which
    // gather_for_metrics drops: its loss is taken sample by sample, so that the dropped samples
    // do not count (exact for a loss that is a mean over the batch's samples).
    const bool last = loader.has_size() && loader.position() == loader.size();
    std::vector<double> each;
    {
      auto ac = acc_->autocast();
      out = model_(x);
      if (y.defined() || !loss_) loss = compute_loss(out, y);
      if (last && loss_ && y.defined() && n > 1)
        for (int64_t i = 0; i < n; ++i) each.push_back(loss_(out.narrow(0, i, 1), y.narrow(0, i, 1)).item<double>());
    }
    if (loss.defined()) {
      // Otherwise the batch's mean loss once per sample, so that the gathered mean weighs batches by size.
      Tensor per_sample = acc_->gather_for_metrics(each.empty() ? full({n}, loss.item<double>(), {.dtype = DType::F64})
                                                                : from_vector<double>(each, {n}));
      g.loss += sum(per_sample).item<double>();
      g.count += per_sample.numel();
    }
    if (!keep_outputs) continue;
    if (loss_) preds.push_back(acc_->gather_for_metrics(out.detach()).to(DType::F32));
    if (y.defined()) labels.push_back(acc_->gather_for_metrics(y));
  }
  if (was_training) model_.train();
  if (!preds.empty()) g.predictions = cat(preds, 0);
  if (!labels.empty()) g.labels = cat(labels, 0);
  if (g.count == 0 && g.labels.defined()) g.count = g.labels.size(0);
  return g;
}

data::DataLoader& Trainer::eval_loader_for(const std::shared_ptr<data::Dataset>& dataset) {
  if (!dataset || dataset == eval_dataset_) {
    BRISK_CHECK(eval_loader_ != nullptr, "Trainer::evaluate: no eval_dataset was given and none passed");
    return *eval_loader_;
  }
  for (auto& [d, l] : other_loaders_)
    if (d == dataset) return *l;
  auto loader = std::make_unique<data::DataLoader>(
      dataset, data::DataLoaderOptions{.batch_size = args_.per_device_eval_batch_size,
                                       .num_workers = args_.dataloader_num_workers,
                                       .pin_memory = true});
  acc_->prepare(*loader);
  other_loaders_.emplace_back(dataset, std::move(loader));
  return *other_loaders_.back().second;
}

Metrics Trainer::evaluate(const std::shared_ptr<data::Dataset>& dataset, const std::string& prefix) {
  const auto t0 = std::chrono::steady_clock::now();
  // Outputs are gathered only for compute_metrics, and not with prediction_loss_only.
  Gathered g = run_eval(eval_loader_for(dataset), compute_metrics_ && !args_.prediction_loss_only);
  Metrics m;
  const double mean_loss = g.count > 0 ? g.loss / static_cast<double>(g.count) : 0.0;
  if (g.count > 0) m[prefix + "_loss"] = mean_loss;
  if (compute_metrics_)
    for (const auto& [k, v] : compute_metrics_({g.predictions, g.labels, mean_loss}))
      m[k.rfind(prefix + "_", 0) == 0 ? k : ::brisk::detail::str_cat(prefix, "_", k)] = v;
  m[prefix + "_samples"] = static_cast<double>(g.count);
  m[prefix + "_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log(m);
  for (auto& c : callbacks_)
    if (c.on_evaluate) c.on_evaluate(state_, m);
  return m;
}

PredictionOutput Trainer::predict(const std::shared_ptr<data::Dataset>& dataset) {
  BRISK_CHECK(dataset != nullptr, "Trainer::predict: no dataset");
  Gathered g = run_eval(eval_loader_for(dataset), /*keep_outputs=*/true);
  PredictionOutput out{g.predictions, g.labels, {}};
  const double mean_loss = g.count > 0 ? g.loss / static_cast<double>(g.count) : 0.0;
  if (g.count > 0) out.metrics["test_loss"] = mean_loss;
  if (compute_metrics_ && g.labels.defined())
    for (const auto& [k, v] : compute_metrics_({g.predictions, g.labels, mean_loss})) out.metrics["test_" + k] = v;
  out.metrics["test_samples"] = static_cast<double>(g.count);
  return out;
}

// Best-model tracking and early stopping after an evaluation inside train().
void Trainer::after_evaluation(const Metrics& m) {
  if (!args_.load_best_model_at_end && args_.early_stopping_patience == 0) return;
  const std::string key = args_.best_metric_key();
  auto it = m.find(key);
  BRISK_CHECK(it != m.end(), "Trainer: metric_for_best_model \"", args_.metric_for_best_model,
              "\" is not among the evaluation metrics (looked for \"", key, "\")");
  const double v = it->second;
  const bool better =
      !state_.best_metric || (args_.best_is_greater() ? v > *state_.best_metric : v < *state_.best_metric);
  if (better) {
    state_.best_metric = v;
    state_.best_step = state_.global_step;
    state_.evaluations_without_improvement = 0;
    if (args_.load_best_model_at_end) {
      // Written beside the checkpoints, so save_total_limit never removes it and a resumed run
      // still finds it.
      acc_->save_model(model_, (fs::path(args_.output_dir) / "best_model").string());
      acc_->wait_for_everyone();
    }
  } else {
    ++state_.evaluations_without_improvement;
    if (args_.early_stopping_patience > 0 && state_.evaluations_without_improvement >= args_.early_stopping_patience) {
      acc_->print("Trainer: early stop at step ", state_.global_step, ": ", key, " has not improved on ",
                  *state_.best_metric, " (step ", state_.best_step, ") in ", state_.evaluations_without_improvement,
                  " evaluations");
      stop_ = true;
    }
  }
}

std::string Trainer::save_checkpoint() {
  std::string dir = acc_->save_state();
  for (auto& c : callbacks_)
    if (c.on_save) c.on_save(state_, dir);
  return dir;
}

void Trainer::save_model(const std::string& dir) {
  acc_->save_model(model_, dir.empty() ? args_.output_dir : dir);
}

void Trainer::log(Metrics record) {
  record["step"] = static_cast<double>(state_.global_step);
  record["epoch"] = state_.epoch;
  state_.log_history.push_back(record);
  if (acc_->is_main_process()) write_log_files(record);
  for (auto& c : callbacks_)
    if (c.on_log) c.on_log(state_, record);
}

// After a resume: the records the interrupted run logged up to the checkpoint's step are kept (and
// those it logged after it dropped), so the logs read as those of an uninterrupted run.
void Trainer::restore_logs() {
  state_.log_history.clear();
  csv_rows_.clear();
  csv_columns_.clear();
  csv_rewrite_ = true;  // metrics.csv may still hold the interrupted run's later rows
  const fs::path jsonl = fs::path(args_.output_dir) / "metrics.jsonl";
  if (!fs::exists(jsonl)) return;
  std::ifstream in(jsonl);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json::Value v = json::parse(line);
    if (!v.is_object()) continue;
    const json::Value* step = v.find("step");
    // Records after the checkpoint, and the interrupted run's closing summary, did not happen in
    // the run that now continues.
    if (!step || step->as_int() > state_.global_step || v.contains("train_loss")) continue;
    Metrics record;
    for (const auto& [k, x] : v.items()) record[k] = x.as_double();
    state_.log_history.push_back(record);
    kept += line + "\n";
  }
  io::write_file_atomic(jsonl.string(), kept, "Trainer");
  const std::vector<Metrics> history = state_.log_history;
  if (reports_to(args_, "csv"))
    for (const Metrics& r : history) {
      if (csv_columns_.empty()) csv_columns_.emplace_back("step");
      for (const auto& [k, x] : r)
        if (std::find(csv_columns_.begin(), csv_columns_.end(), k) == csv_columns_.end()) csv_columns_.push_back(k);
      csv_rows_.push_back(r);
    }
}

void Trainer::write_log_files(const Metrics& record) {
  const bool jsonl = reports_to(args_, "jsonl"), csv = reports_to(args_, "csv");
  if (!jsonl && !csv) return;
  make_dir(args_.output_dir);
  if (jsonl) {
    json::Value::Object o;
    o.emplace_back("step", json::Value(state_.global_step));
    for (const auto& [k, v] : record)
      if (k != "step") o.emplace_back(k, json::Value(v));
    io::AppendFile f((fs::path(args_.output_dir) / "metrics.jsonl").string(), false, "Trainer");
    f.append(json::Value::object(std::move(o)).dump() + "\n");
  }
  if (csv) {
    // A column per key seen so far: a record that brings a new key rewrites the file (atomically)
    // with the wider header; any other record is appended as one row (as Accelerator::log does).
    if (csv_columns_.empty()) csv_columns_.emplace_back("step");
    bool widened = csv_rewrite_;
    for (const auto& [k, v] : record)
      if (std::find(csv_columns_.begin(), csv_columns_.end(), k) == csv_columns_.end()) {
        csv_columns_.push_back(k);
        widened = true;
      }
    csv_rows_.push_back(record);
    auto row_text = [&](const Metrics& row) {
      std::string line;
      char buf[64];
      for (size_t i = 0; i < csv_columns_.size(); ++i) {
        if (i) line += ",";
        auto it = row.find(csv_columns_[i]);
        if (it != row.end()) {
          std::snprintf(buf, sizeof buf, "%.17g", it->second);
          line += buf;
        }
      }
      return line + "\n";
    };
    const std::string path = (fs::path(args_.output_dir) / "metrics.csv").string();
    csv_rewrite_ = false;
    if (widened || !fs::exists(path)) {
      std::string text;
      for (size_t i = 0; i < csv_columns_.size(); ++i) text += (i ? "," : "") + csv_columns_[i];
      text += "\n";
      for (const Metrics& row : csv_rows_) text += row_text(row);
      io::write_file_atomic(path, text, "Trainer");
    } else {
      io::AppendFile f(path, false, "Trainer");
      f.append(row_text(record));
    }
  }
}

}  // namespace brisk
