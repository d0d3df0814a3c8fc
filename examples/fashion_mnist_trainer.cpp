// fashion_mnist_trainer: the example CNN (models/fashion_cnn.h) trained on Fashion-MNIST by the
// Trainer instead of a hand-written loop (compare examples/fashion_mnist.cpp). Every
// TrainingArguments field is a flag (--help lists them); evaluation after each epoch over the
// whole test set writes "eval_accuracy" (a fraction) to <output_dir>/metrics.jsonl. Data-parallel
// unchanged under `brisk launch -n 2 build/examples/fashion_mnist_trainer`.
#include <brisk/accelerate/trainer.h>
#include <brisk/brisk.h>

using namespace brisk;

// The CNN on images normalised with Fashion-MNIST's mean and standard deviation.
struct Net : nn::Module {
  models::FashionCNN cnn;
  Net() { register_modules({{"cnn", cnn}}); }
  Tensor forward(const Tensor& x) override { return cnn((x - 0.2860) * (1.0 / 0.3530)); }
};

int main(int argc, char** argv) {
  // The hand-written example's recipe: Adam (AdamW without decay) at a constant 1e-3, batch 64, seed 0.
  TrainingArguments args;
  args.output_dir = "out/fashion_mnist_trainer";
  args.num_train_epochs = 8;
  args.per_device_train_batch_size = 64;
  args.per_device_eval_batch_size = 256;
  args.learning_rate = 1e-3;
  args.seed = 0;  // as examples/fashion_mnist.cpp: the same weights, batches and results
  args.lr_scheduler_type = SchedulerType::Constant;
  args.max_grad_norm = 0;
  args.logging_steps = 100;
  args.eval_strategy = IntervalStrategy::Epoch;
  args.save_strategy = IntervalStrategy::Epoch;
  args.save_total_limit = 2;
  std::string data_dir;
  cli::Parser p("fashion_mnist_trainer", "Trains the example CNN on Fashion-MNIST with the Trainer.");
  args.add_flags(p);
  p.add("data", "folder of the Fashion-MNIST .gz files (default: $BRISK_FASHION_MNIST_DIR)", &data_dir);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    manual_seed(args.seed);  // the initial weights
    Net net;
    auto loss = [](const Tensor& logits, const Tensor& labels) { return cross_entropy(logits, labels); };
    auto accuracy = [](const EvalPrediction& e) -> Metrics {
      return {{"accuracy", mean(eq(argmax(e.predictions, 1), e.label_ids).to(DType::F64)).item<double>()}};
    };
    Trainer trainer(net, args, std::make_shared<data::FashionMNIST>(data::Split::Train, data_dir),
                    std::make_shared<data::FashionMNIST>(data::Split::Test, data_dir), loss, accuracy);
    trainer.add_callback({.on_evaluate = [&](const TrainerState& s, const Metrics& m) {
      trainer.accelerator().print("epoch ", s.epoch, ": eval loss ", m.at("eval_loss"), ", eval accuracy ",
                                  m.at("eval_accuracy"), " (", m.at("eval_samples"), " images)");
    }});
    Metrics done = trainer.train();
    trainer.save_model();
    trainer.accelerator().print("train loss ", done.at("train_loss"), "; saved ", args.output_dir,
                                "/model.safetensors and metrics.jsonl");
  } catch (const Error& e) {
    std::cerr << "fashion_mnist_trainer: " << e.message() << "\n";
    return 1;
  }
  return 0;
}
