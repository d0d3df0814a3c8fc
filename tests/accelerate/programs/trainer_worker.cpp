// One rank of the Trainer's data-parallel test: N processes with per_device_train_batch_size b
// train as one process with batch N * b does (the reference loop below, no Accelerator), and
// evaluation metrics cover every evaluation sample once. Prints "PASS trainer rank r of N".
#include <brisk/accelerate/trainer.h>
#include <brisk/brisk.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tiny_net.h"

using namespace brisk;
using brisk::testing::regression_data;

namespace {

int rank_for_messages = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "FAIL rank %d: %s\n", rank_for_messages, what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

// No dropout: the processes' random streams differ, so dropout would not match one process.
struct Regressor : nn::Module {
  nn::Linear f1{3, 16}, f2{16, 1};
  Regressor() { register_modules({{"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override { return f2(relu(f1(x))); }
};

bool close(const std::vector<float>& a, const std::vector<float>& r, double rtol, double atol, std::string* why) {
  if (a.size() != r.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - r[i]) > atol + rtol * std::fabs(r[i])) {
      *why = "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(r[i]);
      return false;
    }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "out/trainer_worker", token;
  cli::Parser p("trainer_worker", "One rank of the Trainer's data-parallel test.");
  p.add("out", "output_dir", &out);
  p.add("token", "ignored (lets the test runner find leftover processes)", &token);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    rank_for_messages = dist::init().rank();
    const int64_t N = dist::world().size(), b = 4, epochs = 3;
    auto train = regression_data(N * b * 5, 11);  // 5 steps per epoch
    auto eval = regression_data(37, 3);           // not a multiple of N * batch
    TrainingArguments a;
    a.output_dir = out + "/np" + std::to_string(N);
    a.num_train_epochs = epochs;
    a.per_device_train_batch_size = b;
    a.per_device_eval_batch_size = 4;
    a.learning_rate = 0.05;
    a.max_grad_norm = 0.5;
    a.warmup_steps = 2;
    a.seed = 7;
    a.logging_steps = 5;
    a.eval_strategy = IntervalStrategy::Epoch;
    a.save_strategy = IntervalStrategy::No;
    a.disable_tqdm = true;
    manual_seed(a.seed);
    Regressor net;
    int64_t eval_samples = -1;
    std::vector<std::vector<float>> eval_predictions;
    Trainer trainer(
        net, a, train, eval, [](const Tensor& o, const Tensor& y) { return mse_loss(o, y); },
        [&](const EvalPrediction& e) -> Metrics {
          eval_samples = e.predictions.size(0);
          Tensor d = e.predictions - e.label_ids;
          return {{"mae", mean(abs(d)).item<double>()}, {"mse", mean(d * d).item<double>()}};
        });
    double last_eval_loss = 0;
    trainer.add_callback(
        {.on_evaluate = [&](const TrainerState&, const Metrics& m) { last_eval_loss = m.at("eval_loss"); }});
    trainer.train();
    check(trainer.state().global_step == epochs * 5, "steps: " + std::to_string(trainer.state().global_step));
    check(eval_samples == 37, "compute_metrics saw " + std::to_string(eval_samples) + " predictions, expected 37");
    check(brisk::testing::same_on_every_rank(trainer.accelerator(), brisk::testing::flat_params(net)),
          "parameters differ across ranks");

    // The reference: one process, batch N * b, the same shuffling, schedule and clipping.
    manual_seed(a.seed);
    Regressor ref;
    optim::AdamW opt(ref.parameters(), {.lr = 0.05, .weight_decay = 0.0});
    optim::WarmupLR sched(opt, {.warmup_steps = 2, .total_steps = epochs * 5, .decay = optim::WarmupDecay::Linear});
    data::DataLoader loader(train, {.batch_size = N * b, .shuffle = true, .seed = a.seed});
    for (int64_t e = 0; e < epochs; ++e)
      for (auto& [x, y] : loader) {
        mse_loss(ref(x), y).backward();
        optim::clip_grad_norm_(ref.parameters(), 0.5);
        opt.step();
        sched.step();
        opt.zero_grad();
      }
    std::string why;
    check(close(brisk::testing::flat_params(net), brisk::testing::flat_params(ref), 1e-4, 1e-5, &why),
          "parameters differ from one process with batch " + std::to_string(N * b) + ": " + why);
    // eval_loss: the squared error per sample over the whole evaluation set.
    NoGradGuard no_grad;
    data::Example all{eval->data(), eval->targets()};
    const double ref_loss = mse_loss(ref(all.data), all.target).item<double>();
    check(std::fabs(last_eval_loss - ref_loss) <= 1e-4 * std::fabs(ref_loss) + 1e-6,
          "eval_loss " + std::to_string(last_eval_loss) + " vs " + std::to_string(ref_loss));
    // Only the main process writes the logs.
    trainer.accelerator().wait_for_everyone();
    check(std::filesystem::exists(a.output_dir + "/metrics.jsonl"), "no metrics.jsonl");
    std::printf("PASS trainer rank %d of %lld\n", rank_for_messages, static_cast<long long>(N));
    std::fflush(stdout);
  } catch (const Error& e) {
    std::fprintf(stderr, "FAIL rank %d: %s\n", rank_for_messages, e.message().c_str());
    return 1;
  }
  return 0;
}
