// gpt2_trainer: GPT-2 (models/gpt2.h) trained as a language model by the Trainer instead of the
// hand-written loop of examples/gpt2.cpp: byte tokens of a text (default: the fortunes),
// windows of block_size tokens at every offset for training and side by side for evaluation, and
// perplexity = exp(eval_loss) as the metric (outputs are not gathered: prediction_loss_only).
// Every TrainingArguments field is a flag (--help). Data-parallel unchanged under
// `brisk launch -n 2 build/examples/gpt2_trainer`.
#include <brisk/accelerate/trainer.h>
#include <brisk/brisk.h>

#include <cmath>

using namespace brisk;

int main(int argc, char** argv) {
  TrainingArguments args;  // nanoGPT's small-model recipe
  args.output_dir = "out/gpt2_trainer";
  args.max_steps = 200;
  args.per_device_train_batch_size = 16;
  args.per_device_eval_batch_size = 16;
  args.learning_rate = 1e-3;
  args.weight_decay = 0.1;
  args.adam_beta2 = 0.99;
  args.lr_scheduler_type = SchedulerType::Cosine;
  args.warmup_steps = 20;
  args.logging_steps = 20;
  args.eval_strategy = IntervalStrategy::Steps;
  args.eval_steps = 100;
  args.save_strategy = IntervalStrategy::No;
  args.prediction_loss_only = true;
  std::string preset = "tiny", data_path;
  int threads = 0;
  cli::Parser p("gpt2_trainer", "Trains GPT-2 on a text's bytes with the Trainer; logs eval_perplexity.");
  args.add_flags(p);
  p.add("preset", "model shape: tiny, small, 124M or 350M", &preset);
  p.add("data", "a text file or folder (default: the fortunes, apt-get install fortunes)", &data_path);
  p.add("threads", "CPU threads per process (0: OMP_NUM_THREADS or all cores)", &threads);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    if (threads > 0) set_num_threads(threads);
    models::GPT2Config cfg = models::GPT2Config::preset(preset);
    cfg.vocab_size = 256;  // bytes
    data::TokenSplit split = data::split_tokens(data::ByteTokenizer().encode(data::read_text_corpus(data_path)), 0.1);
    auto train = std::make_shared<data::TokenWindows>(std::move(split.train), cfg.block_size, 1);
    auto val = std::make_shared<data::TokenWindows>(std::move(split.val), cfg.block_size, cfg.block_size);
    manual_seed(args.seed);  // the initial weights
    models::GPT2 model(cfg);
    auto perplexity = [](const EvalPrediction& e) -> Metrics { return {{"perplexity", std::exp(e.loss)}}; };
    Trainer trainer(model, args, train, val, models::GPT2::loss, perplexity);
    trainer.add_callback({.on_evaluate = [&](const TrainerState& s, const Metrics& m) {
      trainer.accelerator().print("step ", s.global_step, ": eval loss ", m.at("eval_loss"), ", perplexity ",
                                  m.at("eval_perplexity"));
    }});
    Metrics done = trainer.train();
    trainer.save_model();
    trainer.accelerator().print("train loss ", done.at("train_loss"), "; saved ", args.output_dir,
                                "/model.safetensors and metrics.jsonl");
  } catch (const Error& e) {
    std::cerr << "gpt2_trainer: " << e.message() << "\n";
    return 1;
  }
  return 0;
}
