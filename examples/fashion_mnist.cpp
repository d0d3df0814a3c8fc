// fashion_mnist: trains the example CNN (models/fashion_cnn.h) on Fashion-MNIST with the Accelerator (on the GPU of
// each process where there are GPUs, as the Accelerator decides, else on the CPU), on one
// process or data-parallel on several (`brisk launch -n 2 build/examples/fashion_mnist`): a progress
// bar on the main process, per-epoch test metrics over the whole test set (gather_for_metrics),
// metrics.jsonl/.csv, a checkpoint per epoch under <out>/checkpoints and the trained weights as
// <out>/model.safetensors. `--bench N` times N training steps instead; `--profile` prints where the
// time went, op by op (docs/profiling.md).
#include <brisk/brisk.h>

#include <chrono>
#include <cstdio>

using namespace brisk;

namespace {

struct Args {
  int epochs = 8;
  int64_t batch_size = 64;  // per process
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string data;  // empty: BRISK_FASHION_MNIST_DIR, else Debian's dataset-fashion-mnist folder
  std::string out = "out/fashion_mnist";
  int threads = 0;  // 0: OMP_NUM_THREADS or all cores
  int64_t workers = 1;
  int64_t bench = 0;
  int64_t steps_per_epoch = 0;                 // 0: the whole training set
  std::optional<std::string> mixed_precision;  // unset: BRISK_MIXED_PRECISION (brisk launch), else "no"
  std::optional<std::string> sharding;         // unset: BRISK_SHARDING (brisk launch), else "none"
  bool resume = false;
  int64_t checkpoint_every = 0;  // also a checkpoint every this many optimizer steps (0: per epoch only)
  bool async_save = true;        // checkpoints written in the background (docs/checkpoints.md)
  bool profile = false;          // the per-op table at exit (as BRISK_PROFILE=1)
};

// Fashion-MNIST's mean and standard deviation over the training images.
constexpr double kMean = 0.2860, kStd = 0.3530;
Tensor normalize(const Tensor& images) {
  return (images - kMean) * (1.0 / kStd);
}

struct Eval {
  double loss = 0, accuracy = 0;
  int64_t count = 0;
};

// Every process evaluates its shard; gather_for_metrics puts the predictions of all processes
// together, without the samples repeated to even out the shards: exactly the test set, once.
Eval evaluate(Accelerator& acc, models::FashionCNN& net, data::DataLoader& loader, int64_t expected) {
  NoGradGuard no_grad;
  net.eval();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (auto& [x, y] : loader) {
    Tensor logits;
    {
      auto ac = acc.autocast();
      logits = net(normalize(x));
    }
    Tensor losses = acc.gather_for_metrics(cross_entropy(logits, y, {.reduction = Reduction::None}));
    Tensor predictions = acc.gather_for_metrics(argmax(logits, 1));
    Tensor labels = acc.gather_for_metrics(y);
    loss_sum += sum(losses.to(DType::F64)).item<double>();
    correct += sum(eq(predictions, labels)).item<int64_t>();
    seen += labels.numel();
  }
  net.train();
  BRISK_CHECK(seen == expected, "fashion_mnist: gather_for_metrics counted ", seen, " test predictions, expected ",
              expected);
  return {loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen), seen};
}

// 1. Options: the command line. False when the program stops here (--help, a bad flag or value),
// with its exit status in `status`.
bool parse_options(int argc, char** argv, Args& a, int& status) {
  cli::Parser p("fashion_mnist",
                "Trains the example CNN (conv 1->16->32, 3x3, ReLU, 2x2 max-pool; linear 1568->256->10) on\n"
                "Fashion-MNIST with Adam, printing test accuracy after each epoch. Data-parallel under\n"
                "`brisk launch -n N` (each process takes every N-th batch; --batch-size is per process).");
  p.add("epochs", "passes over the training set", &a.epochs);
  p.add("batch_size", "images per step and process", &a.batch_size);
  p.add("lr", "Adam learning rate", &a.lr);
  p.add("seed", "seed for the weights and the shuffling", &a.seed);
  p.add("data",
        "folder with the four Fashion-MNIST .gz files (default: $BRISK_FASHION_MNIST_DIR, else "
        "/usr/share/datasets/fashion-mnist)",
        &a.data);
  p.add("out", "folder for metrics.jsonl, checkpoints/ and model.safetensors", &a.out);
  p.add("threads", "CPU threads per process (0: OMP_NUM_THREADS or all cores)", &a.threads);
  p.add("workers", "data-loading threads", &a.workers);
  p.add("bench", "time this many training steps after a warm-up and print images/s, then exit", &a.bench);
  p.add("steps_per_epoch", "stop each epoch after this many steps (0: the whole training set)", &a.steps_per_epoch);
  p.add("mixed_precision", "no, fp16 or bf16 (default: brisk launch's --mixed_precision, else no)", &a.mixed_precision);
  p.add("sharding",
        "none, zero1, zero2 or zero3: ZeRO stage, docs/sharding.md (default: brisk launch's --sharding, else none)",
        &a.sharding);
  p.add("resume", "continue from the newest checkpoint under <out>/checkpoints", &a.resume);
  p.add("checkpoint_every", "also save a checkpoint every this many optimizer steps (0: after each epoch only)",
        &a.checkpoint_every);
  p.add("async_save", "write checkpoints in the background (--no-async-save: save_state waits for the disk)",
        &a.async_save);
  p.add("profile",
        "print the per-op profile (self and total CPU time, calls, allocations) to stderr at exit; with --bench "
        "the warm-up steps are left out",
        &a.profile);
  if (!p.parse(argc, argv)) {
    status = p.exit_code();
    return false;
  }
  if (a.epochs < 1 || a.batch_size < 1 || !(a.lr > 0) || a.checkpoint_every < 0) {
    std::fprintf(stderr,
                 "fashion_mnist: --epochs, --batch-size and --lr must be positive, --checkpoint-every at least 0\n");
    status = 2;
    return false;
  }
  return true;
}

// The Accelerator's options: the flags (user input, parsed once here: a bad value names the valid
// ones), a checkpoint per epoch under <out>/checkpoints (the last two kept).
AcceleratorOptions accelerator_options(const Args& a) {
  std::optional<MixedPrecision> mp;
  if (a.mixed_precision) mp = parse_enum<MixedPrecision>(*a.mixed_precision, "--mixed_precision");
  std::optional<Sharding> sharding;
  if (a.sharding) sharding = parse_enum<Sharding>(*a.sharding, "--sharding");
  return {.mixed_precision = mp,
          .sharding = sharding,
          .seed = a.seed,
          .project_dir = a.out,
          .automatic_checkpoint_naming = true,
          .total_limit = 2,
          .async_save = a.async_save,
          .profile = a.profile ? std::optional<bool>(true) : std::nullopt};
}

// 2. Data: the training and test sets and their loaders. Batches in pinned memory, so that on a GPU
// (where prepare() sends the loaders' batches, as the model) their copies run asynchronously;
// plain memory on a CPU-only machine.
struct Data {
  explicit Data(const Args& a)
      : train_set(std::make_shared<data::FashionMNIST>(data::Split::Train, a.data)),
        test_set(std::make_shared<data::FashionMNIST>(data::Split::Test, a.data)),
        train(train_set, {.batch_size = a.batch_size,
                          .shuffle = true,
                          .num_workers = a.workers,
                          .seed = a.seed,
                          .pin_memory = true}),
        test(test_set, {.batch_size = 256, .pin_memory = true}) {}
  std::shared_ptr<data::FashionMNIST> train_set, test_set;
  data::DataLoader train, test;
};

// 3. Model: the CNN and its optimizer.
struct Model {
  explicit Model(const Args& a) : opt(net.parameters(), {.lr = a.lr}) {}
  models::FashionCNN net;
  optim::Adam opt;
};

// One training step; the loss.
double train_step(Accelerator& acc, Model& m, const Tensor& x, const Tensor& y) {
  MemoryCategoryGuard activations(MemoryCategory::Activations);
  auto sync = acc.accumulate(m.net);
  Tensor loss;
  {
    auto ac = acc.autocast();
    loss = cross_entropy(m.net(normalize(x)), y);
  }
  acc.backward(loss);
  // Prepared optimizer: on a micro-step of a gradient-accumulation window that does not sync
  // (gradient_accumulation_steps > 1, e.g. brisk launch --gradient_accumulation_steps 4), step()
  // and zero_grad() do nothing; they act on the window's last micro-step.
  m.opt.step();
  m.opt.zero_grad();
  return loss.item<double>();
}

// --bench: times a.bench training steps after 5 warm-up steps and prints images/s.
void bench(Accelerator& acc, Model& m, data::DataLoader& train, const Args& a) {
  int64_t done = -5;  // 5 warm-up steps
  std::chrono::steady_clock::time_point t0;
  while (done < a.bench) {
    for (auto& [x, y] : train) {
      if (done == 0) {
        acc.wait_for_everyone();
        profiler::reset();  // the table covers the timed steps only
        t0 = std::chrono::steady_clock::now();
      }
      train_step(acc, m, x, y);
      if (++done == a.bench) break;
    }
  }
  acc.wait_for_everyone();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // All processes together: each trained bench steps of batch_size images.
  acc.print("train images/s: ",
            static_cast<int64_t>(static_cast<double>(a.bench * a.batch_size * acc.num_processes()) / s));
}

void print_header(Accelerator& acc, const Model& m, const Data& d, const Args& a) {
  char header[256];
  std::snprintf(header, sizeof header,
                "fashion_mnist: %lld train / %lld test images, %lld process(es) x batch %lld on %s, Adam lr %g, "
                "mixed precision %s, sharding %s, %d thread(s) per process, %lld parameters",
                static_cast<long long>(d.train_set->size()), static_cast<long long>(d.test_set->size()),
                static_cast<long long>(acc.num_processes()), static_cast<long long>(a.batch_size),
                acc.device().str().c_str(), a.lr, std::string(enum_name(acc.mixed_precision())).c_str(),
                std::string(enum_name(acc.sharding())).c_str(), get_num_threads(),
                static_cast<long long>(m.net.num_parameters()));
  acc.print(header);
}

// How far the epoch in progress got: saved with every checkpoint, so that one taken in the middle
// of an epoch (--checkpoint-every, a preemption) resumes it with the same counts and loss sum.
struct EpochProgress {
  int64_t steps = 0, images = 0;
  double loss_sum = 0;
  int64_t optimizer_steps = 0;  // over the whole run: --checkpoint-every counts these
  json::Value to_json() const {
    json::Value o = json::Value::object();
    o.set("steps", steps);
    o.set("images", images);
    o.set("loss_sum", loss_sum);
    o.set("optimizer_steps", optimizer_steps);
    return o;
  }
  void from_json(const json::Value& v) {
    steps = v.at("steps").as_int();
    loss_sum = v.at("loss_sum").as_double();
    // (checkpoints of the preemption's first version hold only the two above)
    images = v.find("images") ? v.at("images").as_int() : 0;
    optimizer_steps = v.find("optimizer_steps") ? v.at("optimizer_steps").as_int() : 0;
  }
};

// One epoch of training with a progress bar (from where `pr` says it got), then the test set:
// printed, logged, checkpointed. With --checkpoint-every a checkpoint every that many optimizer steps.
void run_epoch(Accelerator& acc, Model& m, Data& d, const Args& a, int epoch, EpochProgress& pr) {
  const int64_t N = acc.num_processes();
  const int64_t planned = a.steps_per_epoch > 0 ? std::min(a.steps_per_epoch, d.train.size()) : d.train.size();
  auto bar = acc.progress_bar(planned, "epoch " + std::to_string(epoch) + "/" + std::to_string(a.epochs), "step");
  if (pr.steps > 0) bar.update(pr.steps);
  for (auto& [x, y] : d.train) {
    pr.loss_sum += train_step(acc, m, x, y);
    ++pr.steps;
    pr.images += y.numel() * N;
    char post[64];
    std::snprintf(post, sizeof post, "loss %.4f, %.0f img/s", pr.loss_sum / static_cast<double>(pr.steps),
                  static_cast<double>(pr.images) / bar.elapsed_seconds());
    bar.update(1, post);
    if (acc.sync_gradients() && a.checkpoint_every > 0 && ++pr.optimizer_steps % a.checkpoint_every == 0 &&
        pr.steps < planned)
      acc.save_state();  // (the epoch's last step is saved below, after the evaluation)
    if (pr.steps == planned) break;
    acc.stop_if_preempted();  // SIGTERM/SIGUSR1: save, exit 75; started again it continues here
  }
  bar.close();
  const double seconds = bar.elapsed_seconds(), ips = static_cast<double>(pr.images) / seconds;
  Eval ev = evaluate(acc, m.net, d.test, d.test_set->size());
  // The training loss averaged over the processes (each saw its own shard).
  const double train_loss =
      acc.reduce(full({1}, pr.loss_sum / static_cast<double>(pr.steps), {.dtype = DType::F64}), dist::ReduceOp::Mean)
          .item<double>();
  char line[256];
  std::snprintf(line, sizeof line,
                "epoch %d/%d: train loss %.4f, test loss %.4f, test accuracy %.2f%% (%lld images), %.0f images/s, "
                "%.1fs",
                epoch, a.epochs, train_loss, ev.loss, 100 * ev.accuracy, static_cast<long long>(ev.count), ips,
                seconds);
  acc.print(line);
  acc.log({{"epoch", epoch},
           {"train_loss", train_loss},
           {"test_loss", ev.loss},
           {"test_accuracy", ev.accuracy},
           {"images_per_s", ips},
           {"seconds", seconds}},
          epoch);
  pr = {.optimizer_steps = pr.optimizer_steps};  // the next epoch from its start
}

// 5. The loop: the epochs not done yet (--resume: after the newest checkpoint's), a checkpoint
// after each (it records the epoch done).
void train(Accelerator& acc, Model& m, Data& d, const Args& a) {
  int first_epoch = 1;
  EpochProgress progress;
  acc.register_for_checkpointing(
      "epoch", [&] { return json::Value(first_epoch - 1); },
      [&](const json::Value& v) { first_epoch = static_cast<int>(v.as_int()) + 1; });
  acc.register_for_checkpointing(
      "epoch_progress", [&] { return progress.to_json(); }, [&](const json::Value& v) { progress.from_json(v); });
  // --resume, or a restart by `brisk launch --max-restarts` (docs/fault-tolerance.md).
  if (const std::string from = acc.resume_on_restart(a.resume); !from.empty())
    acc.print("fashion_mnist: resumed from ", from, " after epoch ", first_epoch - 1,
              progress.steps > 0 ? " and " + std::to_string(progress.steps) + " steps of the next" : "");
  print_header(acc, m, d, a);
  for (int epoch = first_epoch; epoch <= a.epochs; ++epoch) {
    run_epoch(acc, m, d, a, epoch, progress);
    first_epoch = epoch + 1;  // what the checkpoint records as done
    acc.save_state();
    acc.stop_if_preempted();  // preempted during the evaluation: this checkpoint is the one
  }
  acc.wait_for_save();  // the last checkpoint on disk, or its error here
}

// 6. Save: the trained weights.
void save(Accelerator& acc, const Model& m, const Args& a) {
  acc.save_model(m.net, a.out);
  acc.print("saved ", a.out, "/model.safetensors, ", a.out, "/checkpoints and ", a.out, "/metrics.jsonl");
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (int status = 0; !parse_options(argc, argv, a, status)) return status;
  try {
    set_num_threads(a.threads);
    Accelerator acc(accelerator_options(a));
    Data data(a);
    Model model(a);
    acc.prepare(model.net, model.opt, data.train, data.test);  // 4. Prepare: placed, wrapped, sharded
    if (a.bench > 0) {
      bench(acc, model, data.train, a);
      return 0;
    }
    train(acc, model, data, a);
    save(acc, model, a);
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
