// fashion_mnist: trains the example CNN of DESIGN.md on Fashion-MNIST on the CPU, with a progress
// bar, per-epoch test metrics (also written to <out>/metrics.jsonl) and the trained weights saved
// as <out>/model.safetensors. `--bench N` times N training steps instead.
#include <brisk/brisk.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace brisk;

namespace {

struct Args {
  int epochs = 8;
  int64_t batch_size = 64;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string data;  // empty: BRISK_FASHION_MNIST_DIR, else Debian's dataset-fashion-mnist folder
  std::string out = "out/fashion_mnist";
  int threads = 0;   // 0: OMP_NUM_THREADS or all cores
  int64_t workers = 1;
  int64_t bench = 0;
  int64_t steps_per_epoch = 0;  // 0: the whole training set
};

// Fashion-MNIST's mean and standard deviation over the training images.
constexpr double kMean = 0.2860, kStd = 0.3530;
Tensor normalize(const Tensor& images) { return (images - kMean) * (1.0 / kStd); }

struct Eval {
  double loss = 0, accuracy = 0;
};

Eval evaluate(models::FashionCNN& net, data::DataLoader& loader) {
  NoGradGuard no_grad;
  net.eval();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (auto& [x, y] : loader) {
    Tensor logits = net(normalize(x));
    loss_sum += cross_entropy(logits, y, {.reduction = "sum"}).item<double>();
    correct += sum(eq(argmax(logits, 1), y)).item<int64_t>();
    seen += y.numel();
  }
  net.train();
  return {loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  cli::Parser p("fashion_mnist",
                "Trains the example CNN (conv 1->16->32, 3x3, ReLU, 2x2 max-pool; linear 1568->256->10) on\n"
                "Fashion-MNIST with Adam, printing test accuracy after each epoch.");
  p.add("epochs", "passes over the training set", &a.epochs);
  p.add("batch_size", "images per step", &a.batch_size);
  p.add("lr", "Adam learning rate", &a.lr);
  p.add("seed", "seed for the weights and the shuffling", &a.seed);
  p.add("data", "folder with the four Fashion-MNIST .gz files (default: $BRISK_FASHION_MNIST_DIR, else "
                "/usr/share/datasets/fashion-mnist)", &a.data);
  p.add("out", "folder for metrics.jsonl and model.safetensors", &a.out);
  p.add("threads", "CPU threads (0: OMP_NUM_THREADS or all cores)", &a.threads);
  p.add("workers", "data-loading threads", &a.workers);
  p.add("bench", "time this many training steps after a warm-up and print images/s, then exit", &a.bench);
  p.add("steps_per_epoch", "stop each epoch after this many steps (0: the whole training set)", &a.steps_per_epoch);
  if (!p.parse(argc, argv)) return p.exit_code();
  if (a.epochs < 1 || a.batch_size < 1 || !(a.lr > 0)) {
    std::fprintf(stderr, "fashion_mnist: --epochs, --batch-size and --lr must be positive\n");
    return 2;
  }

  try {
    set_num_threads(a.threads);
    manual_seed(a.seed);
    auto train_set = std::make_shared<data::FashionMNIST>(data::Split::Train, a.data);
    auto test_set = std::make_shared<data::FashionMNIST>(data::Split::Test, a.data);
    data::DataLoader train(train_set, {.batch_size = a.batch_size, .shuffle = true, .num_workers = a.workers,
                                       .seed = a.seed});
    data::DataLoader test(test_set, {.batch_size = 1000});

    models::FashionCNN net;
    optim::Adam opt(net.parameters(), {.lr = a.lr});
    auto step = [&](const Tensor& x, const Tensor& y) {
      MemoryCategoryGuard activations(MemoryCategory::Activations);
      Tensor loss = cross_entropy(net(normalize(x)), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      return loss.item<double>();
    };

    if (a.bench > 0) {
      int64_t done = -5;  // 5 warm-up steps
      std::chrono::steady_clock::time_point t0;
      while (done < a.bench) {
        for (auto& [x, y] : train) {
          if (done == 0) t0 = std::chrono::steady_clock::now();
          step(x, y);
          if (++done == a.bench) break;
        }
      }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("train images/s: %.0f\n", static_cast<double>(a.bench * a.batch_size) / s);
      return 0;
    }

    std::filesystem::create_directories(a.out);
    std::ofstream metrics(a.out + "/metrics.jsonl", std::ios::trunc);
    std::printf("fashion_mnist: %lld train / %lld test images, batch %lld, Adam lr %g, %d thread(s), %lld parameters\n",
                static_cast<long long>(train_set->size()), static_cast<long long>(test_set->size()),
                static_cast<long long>(a.batch_size), a.lr, get_num_threads(),
                static_cast<long long>(net.num_parameters()));
    for (int epoch = 1; epoch <= a.epochs; ++epoch) {
      const int64_t planned = a.steps_per_epoch > 0 ? std::min(a.steps_per_epoch, train.size()) : train.size();
      ProgressBar bar(planned, "epoch " + std::to_string(epoch) + "/" + std::to_string(a.epochs), "step");
      double loss_sum = 0;
      int64_t steps = 0, images = 0;
      for (auto& [x, y] : train) {
        loss_sum += step(x, y);
        ++steps;
        images += y.numel();
        char post[64];
        std::snprintf(post, sizeof post, "loss %.4f, %.0f img/s", loss_sum / static_cast<double>(steps),
                      static_cast<double>(images) / bar.elapsed_seconds());
        bar.update(1, post);
        if (steps == planned) break;
      }
      bar.close();
      const double seconds = bar.elapsed_seconds(), ips = static_cast<double>(images) / seconds;
      Eval ev = evaluate(net, test);
      const double train_loss = loss_sum / static_cast<double>(steps);
      std::printf("epoch %d/%d: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f images/s, %.1fs\n", epoch,
                  a.epochs, train_loss, ev.loss, 100 * ev.accuracy, ips, seconds);
      std::fflush(stdout);
      char line[256];
      std::snprintf(line, sizeof line,
                    "{\"epoch\": %d, \"train_loss\": %.6f, \"test_loss\": %.6f, \"test_accuracy\": %.6f, "
                    "\"images_per_s\": %.1f, \"seconds\": %.3f}\n",
                    epoch, train_loss, ev.loss, ev.accuracy, ips, seconds);
      metrics << line << std::flush;
    }
    data::save_safetensors(a.out + "/model.safetensors", net.state_dict(), {{"format", "pt"}, {"model", "FashionCNN"}});
    std::printf("saved %s/model.safetensors and %s/metrics.jsonl\n", a.out.c_str(), a.out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
