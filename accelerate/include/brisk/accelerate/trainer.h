// The Trainer: a complete training loop on top of the Accelerator (Hugging Face's Trainer in
// C++), for programs that do not want to write the loop themselves (docs/trainer.md). Not part of
// <brisk/brisk.h> (programs that define their own `Trainer` keep compiling): include
// <brisk/accelerate/trainer.h>.
//
//   TrainingArguments args;                          // or from flags: args.add_flags(parser)
//   args.num_train_epochs = 8;
//   args.eval_strategy = IntervalStrategy::Epoch;
//   Trainer trainer(model, args, train_set, test_set, cross_entropy_loss, accuracy_metric);
//   trainer.train();                                 // progress bar, logs, evaluation, checkpoints
//   trainer.save_model();                            // <output_dir>/model.safetensors
//
// The same program trains on one CPU or data-parallel under `brisk launch -n N`: the Trainer
// builds its Accelerator from the arguments, so every process takes its share of the batches
// and only the main process draws the progress bar, writes logs and checkpoints.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brisk/accelerate/accelerator.h"
#include "brisk/data/dataloader.h"
#include "brisk/data/dataset.h"
#include "brisk/nn/module.h"
#include "brisk/optim/lr_scheduler.h"
#include "brisk/optim/optimizer.h"
#include "brisk/util/cli.h"

namespace brisk {

// When the Trainer evaluates or saves: never, every N optimizer steps, after each epoch (Hugging
// Face's IntervalStrategy; spelled "no", "steps", "epoch" in flags).
enum class IntervalStrategy : uint8_t { No, Steps, Epoch };
// The learning-rate schedule (Hugging Face's SchedulerType; spelled "linear", "cosine", "constant",
// "constant_with_warmup" in flags): a linear warm-up, then a linear or cosine decay to 0 at the
// last step, or the peak rate throughout (constant: no warm-up either).
enum class SchedulerType : uint8_t { Linear, Cosine, Constant, ConstantWithWarmup };

// Every option of a Trainer run, named as Hugging Face's TrainingArguments. A plain struct: set
// the fields in code, or register them all as `--field value` flags with add_flags().
struct TrainingArguments {
  std::string output_dir = "trainer_output";  // metrics.jsonl/.csv, checkpoints/, model.safetensors
  int64_t num_train_epochs = 3;
  int64_t max_steps = -1;  // > 0: train this many optimizer steps (overrides num_train_epochs)
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  double learning_rate = 5e-5;  // AdamW
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  SchedulerType lr_scheduler_type = SchedulerType::Linear;
  int64_t warmup_steps = 0;   // > 0 wins over warmup_ratio
  double warmup_ratio = 0.0;  // fraction of the total optimizer steps
  int64_t gradient_accumulation_steps = 1;
  double max_grad_norm = 1.0;                     // <= 0: no clipping
  std::optional<MixedPrecision> mixed_precision;  // unset: brisk launch's, else no
  uint64_t seed = 42;                             // weights' RNG (at Trainer construction) and shuffling
  int64_t logging_steps = 500;                    // <= 0: no step logs
  IntervalStrategy eval_strategy = IntervalStrategy::No;
  int64_t eval_steps = 0;  // steps: every eval_steps (0: logging_steps)
  IntervalStrategy save_strategy = IntervalStrategy::Steps;
  int64_t save_steps = 500;                    // steps: every save_steps
  int64_t save_total_limit = 0;                // > 0: keep only the newest this many checkpoints
  bool load_best_model_at_end = false;         // the best evaluation's weights after train()
  std::string metric_for_best_model = "loss";  // with or without the "eval_" prefix
  std::optional<bool> greater_is_better;       // unset: false for "...loss", true otherwise
  int64_t early_stopping_patience = 0;         // > 0: stop after this many evaluations without a new best
  std::string resume_from_checkpoint;          // a checkpoint folder, or "latest"
  int64_t dataloader_num_workers = 0;
  std::string report_to = "jsonl,csv";  // comma-separated: jsonl, csv; or none
  bool disable_tqdm = false;            // no progress bar
  // evaluate() keeps only the loss: the model's outputs are not gathered (a language model's
  // logits over a validation set would fill memory); compute_metrics then sees EvalPrediction's
  // loss alone (e.g. perplexity = exp(loss)).
  bool prediction_loss_only = false;

  // Registers every field as a flag of the same name (--num_train_epochs 8 --output_dir out).
  void add_flags(cli::Parser& parser);
  // Throws brisk::Error naming the field and its value when something is out of range.
  void validate() const;
  // The metric name as logged ("eval_" prefixed) and whether greater is better.
  std::string best_metric_key() const;
  bool best_is_greater() const;
};

using Metrics = std::map<std::string, double>;

// What evaluate()/predict() hand to compute_metrics: every sample of the dataset exactly once,
// gathered from all processes (in the evaluation loader's order).
struct EvalPrediction {
  Tensor predictions;  // the model's outputs, (n, ...); undefined with prediction_loss_only
  Tensor label_ids;    // the targets, (n, ...); undefined with prediction_loss_only
  double loss = 0;     // the mean loss over the n samples (0 when there is no loss)
};

struct PredictionOutput {
  Tensor predictions, label_ids;
  Metrics metrics;  // "test_loss", "test_<metric>" ...
};

// Where the run stands, handed to the callbacks.
struct TrainerState {
  int64_t global_step = 0;  // optimizer steps done
  int64_t max_steps = 0;    // planned optimizer steps
  int64_t steps_per_epoch = 0;
  double epoch = 0;  // fractional: global_step / steps_per_epoch
  std::optional<double> best_metric;
  int64_t best_step = -1;
  int64_t evaluations_without_improvement = 0;
  std::vector<Metrics> log_history;  // every record logged, in order (train and eval)
};

// Hooks into train(); any may be left empty. Callbacks run on every process.
struct TrainerCallback {
  std::function<void(const TrainerState&)> on_step_end = nullptr;                      // after each optimizer step
  std::function<void(const TrainerState&, const Metrics&)> on_evaluate = nullptr;      // after evaluate()
  std::function<void(const TrainerState&, const std::string& dir)> on_save = nullptr;  // after a checkpoint
  std::function<void(const TrainerState&, const Metrics& record)> on_log = nullptr;    // each log record
};

class Trainer {
 public:
  // The loss of a batch from the model's outputs and the targets (mean over the batch). Empty:
  // the model itself returns its loss (a scalar) from the inputs.
  using LossFn = std::function<Tensor(const Tensor& outputs, const Tensor& targets)>;
  using ComputeMetrics = std::function<Metrics(const EvalPrediction&)>;

  // Builds the Accelerator (which seeds brisk's generator and the shuffling with args.seed: for
  // reproducible initial weights call manual_seed(args.seed) before building the model), the AdamW
  // optimizer, the learning-rate schedule and the data loaders, and prepares them. The model is
  // the caller's and must outlive the Trainer. eval_dataset may be null (no evaluation).
  Trainer(nn::Module& model, TrainingArguments args, std::shared_ptr<data::Dataset> train_dataset,
          std::shared_ptr<data::Dataset> eval_dataset = nullptr, LossFn loss = nullptr,
          ComputeMetrics compute_metrics = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains to max_steps / num_train_epochs (or an early stop), resuming first when
  // args.resume_from_checkpoint is set. Returns the final training metrics
  // ("train_loss" over the whole run, "train_steps", "train_seconds").
  Metrics train();
  // Evaluates on eval_dataset (or `dataset`): "<prefix>_loss" and compute_metrics' values,
  // prefixed, over every sample once, the same on every process. Logged and passed to on_evaluate.
  Metrics evaluate(const std::shared_ptr<data::Dataset>& dataset = nullptr, const std::string& prefix = "eval");
  // The gathered outputs and targets over `dataset`, and the metrics prefixed "test_" (not logged).
  PredictionOutput predict(const std::shared_ptr<data::Dataset>& dataset);
  // The weights as <dir>/model.safetensors (main process; dir "": output_dir).
  void save_model(const std::string& dir = "");
  // A checkpoint now (<output_dir>/checkpoints/checkpoint_<n>), as save_strategy does; returns it.
  std::string save_checkpoint();

  void add_callback(TrainerCallback callback) { callbacks_.push_back(std::move(callback)); }
  // Ends train() after the current optimizer step (for callbacks).
  void request_stop() { stop_ = true; }

  const TrainerState& state() const { return state_; }
  const TrainingArguments& args() const { return args_; }
  Accelerator& accelerator() { return *acc_; }
  optim::Optimizer& optimizer() { return *opt_; }
  optim::LRScheduler& lr_scheduler() { return *sched_; }
  data::DataLoader& train_dataloader() { return *train_loader_; }

 private:
  Tensor compute_loss(const Tensor& outputs, const Tensor& targets) const;
  struct Gathered {
    Tensor predictions, labels;
    double loss = 0;
    int64_t count = 0;
  };
  Gathered run_eval(data::DataLoader& loader, bool keep_outputs);
  data::DataLoader& eval_loader_for(const std::shared_ptr<data::Dataset>& dataset);
  void log(Metrics record);
  void after_evaluation(const Metrics& metrics);
  void write_log_files(const Metrics& record);
  void restore_logs();
  void resume_or_start_fresh();  // train()'s start: from a checkpoint, or with fresh logs

  nn::Module& model_;
  TrainingArguments args_;
  std::shared_ptr<data::Dataset> train_dataset_, eval_dataset_;
  LossFn loss_;
  ComputeMetrics compute_metrics_;
  std::unique_ptr<Accelerator> acc_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LRScheduler> sched_;
  std::unique_ptr<data::DataLoader> train_loader_, eval_loader_;
  // Loaders for other datasets handed to evaluate()/predict(), prepared on first use.
  std::vector<std::pair<std::shared_ptr<data::Dataset>, std::unique_ptr<data::DataLoader>>> other_loaders_;
  std::vector<TrainerCallback> callbacks_;
  TrainerState state_;
  bool stop_ = false;
  // The running training loss since the last log, and over the whole run (checkpointed).
  double loss_since_log_ = 0, loss_total_ = 0;
  int64_t steps_since_log_ = 0;
  std::vector<std::string> csv_columns_;
  std::vector<Metrics> csv_rows_;
  bool csv_rewrite_ = true;  // the next record rewrites metrics.csv whole (fresh run, resume, new column)
};

template <>
struct EnumNames<IntervalStrategy> {
  static constexpr std::array<std::pair<std::string_view, IntervalStrategy>, 3> values{
      {{"no", IntervalStrategy::No}, {"steps", IntervalStrategy::Steps}, {"epoch", IntervalStrategy::Epoch}}};
};
template <>
struct EnumNames<SchedulerType> {
  static constexpr std::array<std::pair<std::string_view, SchedulerType>, 4> values{
      {{"linear", SchedulerType::Linear},
       {"cosine", SchedulerType::Cosine},
       {"constant", SchedulerType::Constant},
       {"constant_with_warmup", SchedulerType::ConstantWithWarmup}}};
};

}  // namespace brisk
