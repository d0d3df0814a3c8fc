// accelerate_side_by_side: the brisk column of docs/migrating-from-accelerate.md, the table that
// sets an Accelerate training script beside its brisk translation line for line. A classifier on a
// synthetic problem (the class is which of 4 features is largest), so it runs anywhere in seconds:
// `brisk launch -n 2 build/examples/accelerate_side_by_side`.
#include <brisk/brisk.h>

using namespace brisk;

struct Net : nn::Module {
  nn::Linear fc1{4, 32}, fc2{32, 4};
  Net() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

// n samples of 4 features; the label is the index of the largest.
std::shared_ptr<data::TensorDataset> make_data(int64_t n, uint64_t seed) {
  Generator gen(seed);
  Tensor x = randn({n, 4}, {}, &gen);
  return std::make_shared<data::TensorDataset>(x, x.argmax(1));
}

int main(int argc, char** argv) {
  int epochs = 3;
  std::string out = "out/side_by_side";
  cli::Parser p("accelerate_side_by_side", "The Accelerate script of docs/migrating-from-accelerate.md, in brisk.");
  p.add("epochs", "passes over the training set", &epochs);
  p.add("output_dir", "checkpoints, metrics and the model", &out);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    auto train_ds = make_data(4096, 1), test_ds = make_data(1000, 2);
    const int64_t steps = epochs * 4096 / 64 / 2;  // optimizer steps on one process
    // --- the right column of the table, line for line ---
    Accelerator acc({.mixed_precision = MixedPrecision::BF16,
                     .gradient_accumulation_steps = 2,
                     .project_dir = out,
                     .automatic_checkpoint_naming = true});
    acc.set_seed(0);
    Net model;
    optim::AdamW opt(model.parameters(), {.lr = 1e-2});
    data::DataLoader train(train_ds, {.batch_size = 64, .shuffle = true});
    data::DataLoader test(test_ds, {.batch_size = 256});
    optim::LambdaLR sched(opt, [&](int64_t s) { return 1.0 - double(s) / steps; });
    acc.prepare(model, opt, train, test, sched);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      model.train();
      for (auto& [x, y] : train) {
        auto sync = acc.accumulate(model);
        Tensor loss;
        {
          auto ac = acc.autocast();
          loss = cross_entropy(model(x), y);
        }
        acc.backward(loss);
        if (acc.sync_gradients()) acc.clip_grad_norm_(model, 1.0);
        opt.step();  // as in Accelerate: a no-op on accumulation micro-steps that do not sync
        sched.step();
        opt.zero_grad();
      }
      model.eval();
      int64_t correct = 0;
      {
        NoGradGuard ng;
        for (auto& [x, y] : test) {
          Tensor pred = model(x).argmax(1);
          pred = acc.gather_for_metrics(pred);
          y = acc.gather_for_metrics(y);
          correct += pred.eq(y).sum().item<int64_t>();
        }
      }
      acc.print("epoch ", epoch, ": ", double(correct) / test_ds->size());
      acc.log({{"accuracy", double(correct) / test_ds->size()}}, epoch);
      acc.save_state();
    }
    acc.wait_for_everyone();
    acc.save_model(model, out + "/model");
  } catch (const Error& e) {
    std::cerr << "accelerate_side_by_side: " << e.message() << "\n";
    return 1;
  }
  return 0;
}
