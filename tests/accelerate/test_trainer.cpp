// The Trainer in one process: it trains exactly as the hand-written Accelerator loop does, its
// evaluation and save strategies fire at the planned steps, best-model selection and early
// stopping, resuming gives the uninterrupted run, and TrainingArguments from flags.
#include <brisk/accelerate/trainer.h>
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "accelerate/programs/tiny_net.h"
#include "common/scratch.h"

using namespace brisk;
using brisk::testing::flat_params;
using brisk::testing::regression_data;

namespace fs = std::filesystem;

namespace {

struct Regressor : nn::Module {
  nn::Linear f1{3, 16}, f2{16, 1};
  nn::Dropout drop{0.1};
  Regressor() { register_modules({{"f1", f1}, {"f2", f2}, {"drop", drop}}); }
  Tensor forward(const Tensor& x) override { return f2(drop(relu(f1(x)))); }
};

Tensor mse(const Tensor& out, const Tensor& y) {
  return mse_loss(out, y);
}

std::string fresh_dir(const std::string& name) {
  std::string d = (fs::path(brisk::testing::scratch()) / name).string();
  fs::remove_all(d);
  return d;
}

TrainingArguments base_args(const std::string& dir) {
  TrainingArguments a;
  a.output_dir = dir;
  a.num_train_epochs = 3;
  a.per_device_train_batch_size = 8;
  a.per_device_eval_batch_size = 8;
  a.learning_rate = 0.05;
  a.seed = 7;
  a.logging_steps = 1;
  a.save_strategy = IntervalStrategy::No;
  a.disable_tqdm = true;
  return a;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(Trainer, MatchesTheHandWrittenAcceleratorLoop) {
  auto ds = regression_data(44);  // 6 batches of 8 (the last of 4): windows of 2, 2, 2
  TrainingArguments a = base_args(fresh_dir("match"));
  a.gradient_accumulation_steps = 2;
  a.max_grad_norm = 0.5;
  a.warmup_steps = 2;
  a.weight_decay = 0.01;

  manual_seed(a.seed);
  Regressor by_trainer;
  Trainer trainer(by_trainer, a, ds, nullptr, mse);
  Metrics m = trainer.train();
  EXPECT_EQ(trainer.state().global_step, 9);
  EXPECT_EQ(m.at("train_steps"), 9);

  manual_seed(a.seed);
  Regressor by_hand;
  Accelerator acc({.gradient_accumulation_steps = 2, .seed = a.seed});
  // Decay on the weight matrices only, as Hugging Face's Trainer.
  std::vector<Tensor> matrices, vectors;
  for (const Tensor& p : by_hand.parameters()) (p.dim() >= 2 ? matrices : vectors).push_back(p);
  optim::AdamW opt({{matrices, {.lr = 0.05, .weight_decay = 0.01}}, {vectors, {.lr = 0.05, .weight_decay = 0.0}}});
  data::DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = a.seed});
  optim::WarmupLR sched(opt, {.warmup_steps = 2, .total_steps = 9, .decay = optim::WarmupDecay::Linear});
  acc.prepare(by_hand, opt, loader, sched);
  std::vector<double> losses;
  for (int epoch = 0; epoch < 3; ++epoch)
    for (auto& [x, y] : loader) {
      auto sync = acc.accumulate(by_hand);
      Tensor loss = mse_loss(by_hand(x), y);
      acc.backward(loss);
      if (acc.sync_gradients()) acc.clip_grad_norm_(by_hand, 0.5);
      opt.step();
      sched.step();
      opt.zero_grad();
    }
  EXPECT_EQ(flat_params(by_trainer), flat_params(by_hand));
  EXPECT_EQ(trainer.lr_scheduler().get_last_lr(), sched.get_last_lr());
  // And it learned something.
  EXPECT_LT(m.at("train_loss"), trainer.state().log_history.front().at("loss"));
}

TEST(Trainer, EvaluationSaveAndLoggingFireAtThePlannedSteps) {
  auto ds = regression_data(40);  // 5 steps per epoch, 15 in all
  TrainingArguments a = base_args(fresh_dir("strategies"));
  a.logging_steps = 3;
  a.eval_strategy = IntervalStrategy::Steps;
  a.eval_steps = 4;
  a.save_strategy = IntervalStrategy::Epoch;
  a.save_total_limit = 2;
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, ds, regression_data(37, 3), mse, [](const EvalPrediction& p) -> Metrics {
    EXPECT_EQ(p.predictions.size(0), 37);  // every evaluation sample once
    EXPECT_EQ(p.label_ids.size(0), 37);
    Tensor err = abs(p.predictions - p.label_ids);
    return {{"mae", mean(err).item<double>()}};
  });
  std::vector<int64_t> evals, saves, logs, step_ends;
  std::vector<std::string> dirs;
  trainer.add_callback({.on_step_end = [&](const TrainerState& s) { step_ends.push_back(s.global_step); },
                        .on_evaluate =
                            [&](const TrainerState& s, const Metrics& m) {
                              evals.push_back(s.global_step);
                              EXPECT_TRUE(m.count("eval_loss") && m.count("eval_mae")) << "keys prefixed eval_";
                              EXPECT_EQ(m.at("eval_samples"), 37);
                            },
                        .on_save =
                            [&](const TrainerState& s, const std::string& dir) {
                              saves.push_back(s.global_step);
                              dirs.push_back(dir);
                            },
                        .on_log =
                            [&](const TrainerState& s, const Metrics& m) {
                              if (m.count("loss")) logs.push_back(s.global_step);
                            }});
  trainer.train();
  EXPECT_EQ(step_ends.size(), 15u);
  EXPECT_EQ(evals, (std::vector<int64_t>{4, 8, 12}));
  EXPECT_EQ(saves, (std::vector<int64_t>{5, 10, 15}));
  EXPECT_EQ(logs, (std::vector<int64_t>{3, 6, 9, 12, 15}));
  // save_total_limit: the two newest checkpoints remain, and both load.
  int kept = 0;
  for (auto& e : fs::directory_iterator(fs::path(a.output_dir) / "checkpoints")) kept += e.is_directory();
  EXPECT_EQ(kept, 2);
  EXPECT_FALSE(fs::exists(dirs[0]));
  EXPECT_TRUE(accelerate::is_complete_checkpoint(dirs[2]));
  // metrics.jsonl: the training logs, the evaluations and the final summary, one JSON object a line.
  auto lines = lines_of(a.output_dir + "/metrics.jsonl");
  ASSERT_EQ(lines.size(), 5u + 3u + 1u);
  int eval_lines = 0;
  for (const auto& l : lines) {
    json::Value v = json::parse(l);
    if (v.contains("eval_mae")) {
      ++eval_lines;
      EXPECT_EQ(v.at("step").as_int() % 4, 0) << l;
    }
  }
  EXPECT_EQ(eval_lines, 3);
  EXPECT_EQ(lines_of(a.output_dir + "/metrics.csv").size(), 1u + 9u);
}

TEST(Trainer, EpochStrategiesCountOptimizerStepsWithAccumulation) {
  auto ds = regression_data(40);  // 5 batches: windows of 2, 2, 1 -> 3 steps per epoch
  TrainingArguments a = base_args(fresh_dir("epochs"));
  a.gradient_accumulation_steps = 2;
  a.eval_strategy = IntervalStrategy::Epoch;
  a.save_strategy = IntervalStrategy::Epoch;
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, ds, regression_data(16, 3), mse);
  std::vector<int64_t> evals, saves;
  trainer.add_callback({.on_evaluate = [&](const TrainerState& s, const Metrics&) { evals.push_back(s.global_step); },
                        .on_save = [&](const TrainerState& s, const std::string&) { saves.push_back(s.global_step); }});
  trainer.train();
  EXPECT_EQ(trainer.state().steps_per_epoch, 3);
  EXPECT_EQ(evals, (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(saves, (std::vector<int64_t>{3, 6, 9}));
}

TEST(Trainer, BestModelAtEndAndEarlyStopping) {
  auto ds = regression_data(16);  // 2 steps per epoch
  TrainingArguments a = base_args(fresh_dir("best"));
  a.num_train_epochs = 20;
  a.eval_strategy = IntervalStrategy::Epoch;
  a.load_best_model_at_end = true;
  a.metric_for_best_model = "score";  // greater is better (not a loss)
  a.early_stopping_patience = 3;
  // A scripted metric: the best is the second evaluation; three evaluations without a new best
  // follow (2.5 and 2.9 do not beat 3), so training stops after the fifth, at step 10.
  const std::vector<double> scores = {1, 3, 2, 2.5, 2.9, 5, 6};
  size_t calls = 0;
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, ds, regression_data(8, 3), mse, [&](const EvalPrediction&) -> Metrics {
    return {{"score", scores.at(calls++)}};
  });
  std::vector<std::vector<float>> weights_at_eval;
  trainer.add_callback(
      {.on_evaluate = [&](const TrainerState&, const Metrics&) { weights_at_eval.push_back(flat_params(net)); }});
  trainer.train();
  EXPECT_EQ(calls, 5u);
  EXPECT_EQ(trainer.state().global_step, 10);
  EXPECT_EQ(trainer.state().best_step, 4);
  EXPECT_EQ(*trainer.state().best_metric, 3);
  ASSERT_EQ(weights_at_eval.size(), 5u);
  EXPECT_NE(weights_at_eval[1], weights_at_eval[4]);
  EXPECT_EQ(flat_params(net), weights_at_eval[1]) << "the best evaluation's weights are loaded at the end";
}

// Under zero3 (BRISK_SHARDING, as `brisk launch --sharding zero3` sets it) the parameters hold no
// bytes between uses: the best model is still saved and loaded back at the end (through the
// gathered parameters).
TEST(Trainer, BestModelAtEndUnderZero3) {
  ::setenv("BRISK_SHARDING", "zero3", 1);
  auto ds = regression_data(16);
  TrainingArguments a = base_args(fresh_dir("best_zero3"));
  a.num_train_epochs = 4;
  a.eval_strategy = IntervalStrategy::Epoch;
  a.load_best_model_at_end = true;
  a.metric_for_best_model = "score";
  const std::vector<double> scores = {1, 3, 2, 2.5};
  size_t calls = 0;
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, ds, regression_data(8, 3), mse, [&](const EvalPrediction&) -> Metrics {
    return {{"score", scores.at(calls++)}};
  });
  std::vector<std::vector<float>> weights_at_eval;
  trainer.add_callback({.on_evaluate = [&](const TrainerState&, const Metrics&) {
    auto full = trainer.accelerator().full_parameters(net);
    weights_at_eval.push_back(flat_params(net));
  }});
  trainer.train();
  ::unsetenv("BRISK_SHARDING");
  ASSERT_EQ(weights_at_eval.size(), 4u);
  EXPECT_NE(weights_at_eval[1], weights_at_eval[3]);
  auto full = trainer.accelerator().full_parameters(net);
  EXPECT_EQ(flat_params(net), weights_at_eval[1]) << "the best evaluation's weights are loaded at the end";
}

TEST(Trainer, LossIsTheDefaultBestMetricAndLowerIsBetter) {
  TrainingArguments a;
  EXPECT_EQ(a.best_metric_key(), "eval_loss");
  EXPECT_FALSE(a.best_is_greater());
  a.metric_for_best_model = "eval_accuracy";
  EXPECT_EQ(a.best_metric_key(), "eval_accuracy");
  EXPECT_TRUE(a.best_is_greater());
  a.greater_is_better = false;
  EXPECT_FALSE(a.best_is_greater());
}

TEST(Trainer, ResumingGivesTheUninterruptedRun) {
  auto ds = regression_data(40);  // 5 steps per epoch, 15 in all
  auto run = [&](const std::string& dir, const std::string& resume, int64_t stop_at,
                 std::map<int64_t, double>& losses) {
    TrainingArguments a = base_args(dir);
    a.save_strategy = IntervalStrategy::Steps;
    a.save_steps = 4;
    a.gradient_accumulation_steps = 1;
    a.resume_from_checkpoint = resume;
    manual_seed(a.seed);
    auto net = std::make_unique<Regressor>();
    Trainer trainer(*net, a, ds, nullptr, mse);
    trainer.add_callback({.on_step_end =
                              [&](const TrainerState& s) {
                                if (s.global_step == stop_at) trainer.request_stop();
                              },
                          .on_log =
                              [&](const TrainerState& s, const Metrics& m) {
                                if (m.count("loss")) losses[s.global_step] = m.at("loss");
                              }});
    trainer.train();
    return flat_params(*net);
  };
  std::map<int64_t, double> straight, first, second;
  const std::string a_dir = fresh_dir("resume_a"), b_dir = fresh_dir("resume_b");
  auto straight_params = run(a_dir, "", -1, straight);
  // Stopped after step 9: the newest checkpoint is step 8's, so step 9 is trained again.
  run(b_dir, "", 9, first);
  EXPECT_EQ(first.size(), 9u);
  auto resumed_params = run(b_dir, "latest", -1, second);
  EXPECT_EQ(second.begin()->first, 9);
  EXPECT_EQ(straight_params, resumed_params);
  for (const auto& [step, loss] : second) EXPECT_EQ(loss, straight.at(step)) << "step " << step;
  // The logs read as the uninterrupted run's: steps 1..15 once each, in order.
  std::vector<int64_t> logged;
  for (const auto& l : lines_of(b_dir + "/metrics.jsonl")) {
    json::Value v = json::parse(l);
    if (v.contains("loss")) logged.push_back(v.at("step").as_int());
  }
  std::vector<int64_t> expected;
  for (int64_t s = 1; s <= 15; ++s) expected.push_back(s);
  EXPECT_EQ(logged, expected);
  // A folder that holds no checkpoint is an error that names it.
  TrainingArguments bad = base_args(fresh_dir("resume_c"));
  bad.resume_from_checkpoint = b_dir + "/no_such_checkpoint";
  Regressor net;
  Trainer t(net, bad, ds, nullptr, mse);
  try {
    t.train();
    ADD_FAILURE() << "resuming from a missing folder did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_checkpoint"), std::string::npos) << e.what();
  }
}

TEST(Trainer, MaxStepsOverridesEpochsAndPredictGathersEverySample) {
  auto ds = regression_data(40);
  TrainingArguments a = base_args(fresh_dir("max_steps"));
  a.max_steps = 7;  // one epoch and two steps
  a.report_to = "none";
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, ds, nullptr, mse);
  trainer.train();
  EXPECT_EQ(trainer.state().global_step, 7);
  EXPECT_FALSE(fs::exists(a.output_dir + "/metrics.jsonl"));
  PredictionOutput p = trainer.predict(regression_data(13, 5));
  EXPECT_EQ(p.predictions.size(0), 13);
  EXPECT_EQ(p.label_ids.size(0), 13);
  EXPECT_TRUE(p.metrics.count("test_loss"));
  trainer.save_model();
  EXPECT_TRUE(fs::exists(a.output_dir + "/model.safetensors"));
}

TEST(TrainingArguments, EveryFieldIsAFlag) {
  TrainingArguments a;
  cli::Parser p("prog", "test");
  p.set_quiet(true);
  a.add_flags(p);
  const char* argv[] = {"prog",
                        "--num_train_epochs",
                        "8",
                        "--output_dir",
                        "out",
                        "--eval-strategy",
                        "epoch",
                        "--learning_rate",
                        "0.001",
                        "--greater_is_better=false",
                        "--mixed_precision",
                        "bf16",
                        "--load_best_model_at_end",
                        "--report_to",
                        "jsonl",
                        "--resume_from_checkpoint",
                        "latest"};
  ASSERT_TRUE(p.parse(static_cast<int>(std::size(argv)), argv)) << p.error();
  EXPECT_EQ(a.num_train_epochs, 8);
  EXPECT_EQ(a.output_dir, "out");
  EXPECT_EQ(a.eval_strategy, IntervalStrategy::Epoch);
  EXPECT_EQ(a.learning_rate, 0.001);
  EXPECT_EQ(a.greater_is_better, false);
  EXPECT_EQ(a.mixed_precision, MixedPrecision::BF16);
  EXPECT_TRUE(a.load_best_model_at_end);
  EXPECT_EQ(a.report_to, "jsonl");
  EXPECT_EQ(a.resume_from_checkpoint, "latest");
  EXPECT_NO_THROW(a.validate());
  const std::string help = p.help();
  // --help spells them in kebab case.
  for (const char* f : {"--per-device-train-batch-size", "--save-total-limit", "--early-stopping-patience",
                        "--warmup-ratio", "--dataloader-num-workers", "--max-grad-norm", "--adam-epsilon"})
    EXPECT_NE(help.find(f), std::string::npos) << f << " missing from --help";
  // The choices show their defaults' spellings.
  EXPECT_NE(help.find("no, steps or epoch (default: steps)"), std::string::npos) << help;
  EXPECT_NE(help.find("constant_with_warmup (default: linear)"), std::string::npos) << help;
}

TEST(TrainingArguments, AChoiceFlagOutsideItsWordsIsAUsageErrorListingThem) {
  for (const auto& [flag, value, expected] :
       {std::tuple{"--eval_strategy", "sometimes",
                   "--eval_strategy: 'sometimes' is not valid; expected one of: no, "
                   "steps, epoch"},
        std::tuple{"--lr_scheduler_type", "cyclic",
                   "--lr_scheduler_type: 'cyclic' is not valid; expected one of: linear, cosine, constant, "
                   "constant_with_warmup"},
        std::tuple{"--mixed_precision", "fp8",
                   "--mixed_precision: 'fp8' is not valid; expected one of: no, fp16, "
                   "bf16"}}) {
    TrainingArguments a;
    cli::Parser p("prog", "test");
    p.set_quiet(true);
    a.add_flags(p);
    const char* argv[] = {"prog", flag, value};
    EXPECT_FALSE(p.parse(3, argv)) << flag;
    EXPECT_EQ(p.exit_code(), 2);
    EXPECT_EQ(p.error(), expected);
  }
}

TEST(TrainingArguments, BadValuesNameTheField) {
  auto message = [](const TrainingArguments& a) {
    try {
      a.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TrainingArguments a;
  a.eval_strategy = IntervalStrategy::Steps;
  a.eval_steps = 0;
  a.logging_steps = 0;
  EXPECT_NE(message(a).find("eval_strategy steps needs eval_steps"), std::string::npos);
  a = {};
  a.per_device_train_batch_size = 0;
  EXPECT_NE(message(a).find("per_device_train_batch_size"), std::string::npos);
  a = {};
  a.report_to = "jsonl,wandb";
  EXPECT_NE(message(a).find("wandb"), std::string::npos);
  a = {};
  a.load_best_model_at_end = true;  // without evaluations there is no best model
  EXPECT_NE(message(a).find("load_best_model_at_end"), std::string::npos);
}

TEST(Trainer, AnOutputDirThatCannotBeCreatedIsAnErrorNamingIt) {
  const std::string file = fresh_dir("a_file");
  std::ofstream(file) << "not a folder";
  TrainingArguments a = base_args(file + "/run");
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, regression_data(16), nullptr, mse);
  try {
    trainer.train();
    ADD_FAILURE() << "training into a folder below a file did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/run"), std::string::npos) << e.what();
  }
}

TEST(Trainer, MixedPrecisionAndWarmupRatioComeFromTheArguments) {
  TrainingArguments a = base_args(fresh_dir("bf16"));
  a.mixed_precision = MixedPrecision::BF16;
  a.max_steps = 10;
  a.warmup_ratio = 0.2;  // 2 of 10 steps
  a.lr_scheduler_type = SchedulerType::Cosine;
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, regression_data(40), nullptr, mse);
  EXPECT_EQ(trainer.accelerator().mixed_precision(), MixedPrecision::BF16);
  EXPECT_EQ(trainer.lr_scheduler().get_last_lr(), 0.0);  // warm-up starts at 0
  std::vector<double> rates;
  trainer.add_callback({.on_log = [&](const TrainerState&, const Metrics& m) {
    if (m.count("learning_rate")) rates.push_back(m.at("learning_rate"));
  }});
  trainer.train();
  ASSERT_EQ(rates.size(), 10u);
  EXPECT_DOUBLE_EQ(rates[1], a.learning_rate);  // the peak after the warm-up
  EXPECT_NEAR(rates[9], 0.0, 1e-12);            // cosine down to 0 at the last step
  for (const auto& r : trainer.state().log_history)
    if (r.count("loss")) {
      EXPECT_TRUE(std::isfinite(r.at("loss")));
    }
}

// A warm-up longer than the run: the rate rises step / warmup_steps throughout, as Hugging Face's
// schedules do, instead of an error.
TEST(Trainer, AWarmupLongerThanTheRunRisesThroughout) {
  TrainingArguments a = base_args(fresh_dir("long_warmup"));
  a.max_steps = 4;
  a.warmup_steps = 10;
  manual_seed(a.seed);
  Regressor net;
  Trainer trainer(net, a, regression_data(40), nullptr, mse);
  std::vector<double> rates;
  trainer.add_callback({.on_log = [&](const TrainerState&, const Metrics& m) {
    if (m.count("learning_rate")) rates.push_back(m.at("learning_rate"));
  }});
  trainer.train();
  ASSERT_EQ(rates.size(), 4u);
  for (size_t i = 0; i < rates.size(); ++i) EXPECT_DOUBLE_EQ(rates[i], a.learning_rate * (i + 1) / 10.0) << i;
}

// prediction_loss_only: evaluation gathers no outputs, and compute_metrics gets the mean loss
// (a language model's perplexity = exp(loss)).
TEST(Trainer, PredictionLossOnlyHandsTheLossToComputeMetrics) {
  TrainingArguments a = base_args(fresh_dir("loss_only"));
  a.max_steps = 2;
  a.prediction_loss_only = true;
  manual_seed(a.seed);
  Regressor net;
  bool saw_outputs = true;
  double loss_seen = -1;
  Trainer trainer(net, a, regression_data(40), regression_data(20), mse, [&](const EvalPrediction& e) -> Metrics {
    saw_outputs = e.predictions.defined() || e.label_ids.defined();
    loss_seen = e.loss;
    return {{"perplexity", std::exp(e.loss)}};
  });
  trainer.train();
  Metrics m = trainer.evaluate();
  EXPECT_FALSE(saw_outputs);
  EXPECT_DOUBLE_EQ(loss_seen, m.at("eval_loss"));
  EXPECT_DOUBLE_EQ(m.at("eval_perplexity"), std::exp(m.at("eval_loss")));
  EXPECT_EQ(m.at("eval_samples"), 20);
  // Without it the same metrics see the gathered outputs, and the same loss.
  a.prediction_loss_only = false;
  a.output_dir = fresh_dir("loss_and_outputs");
  manual_seed(a.seed);
  Regressor net2;
  Trainer with_outputs(net2, a, regression_data(40), regression_data(20), mse, [&](const EvalPrediction& e) -> Metrics {
    saw_outputs = e.predictions.defined() && e.label_ids.defined();
    return {{"perplexity", std::exp(e.loss)}};
  });
  with_outputs.train();
  Metrics m2 = with_outputs.evaluate();
  EXPECT_TRUE(saw_outputs);
  EXPECT_DOUBLE_EQ(m2.at("eval_loss"), m.at("eval_loss"));
}
