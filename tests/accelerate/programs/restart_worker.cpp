// restart_worker: the program of the restart tests (tests/accelerate/restart_tests.cmake). A small
// MLP trained through the Accelerator as a user's loop would: epochs of --steps-per-epoch steps
// (0: whole epochs; a cut epoch breaks out of its loop), a checkpoint every --save-every steps (0:
// after each epoch)
// (automatic naming under --out), and on a restart by `brisk launch --max-restarts` it continues
// from the newest complete checkpoint by itself (Accelerator::resume_on_restart). At the end it
// saves its state into <out>/final and its weights into <out>/model.safetensors, which the test
// compares with those of the run that never failed. The launcher's flags choose the gradient path,
// sharding, mixed precision and accumulation; BRISK_FAULT_KILL_AT_STEP kills a rank on the first
// attempt. Preempted (SIGTERM or SIGUSR1, BRISK_FAULT_SIGNAL_AT_STEP in the tests) it saves after the
// step and exits with status 75; started again it continues (with --save-every above 0: the epoch's
// steps are then counted from the loader's position, which a mid-epoch checkpoint records).
//
// usage: restart_worker --out DIR [--epochs E] [--steps-per-epoch S] [--save-every K] [--sleep-ms MS]
#include <brisk/brisk.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

using namespace brisk;

namespace {

struct Args {
  std::string out;
  int epochs = 3;
  int64_t steps_per_epoch = 0;
  int64_t save_every = 4;
  int64_t sleep_ms = 0;  // after each step: slow enough for a test to signal it from outside
};

struct Mlp : nn::Module {
  nn::Linear f1{16, 32}, f2{32, 4};
  Mlp() { register_modules({{"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override { return f2(relu(f1(x))); }
};

std::shared_ptr<data::TensorDataset> synthetic(int64_t n) {
  Generator g(11);
  Tensor x = randn({n, 16}, {}, &g);
  Tensor y = argmax(matmul(x, randn({16, 4}, {}, &g)), 1);
  return std::make_shared<data::TensorDataset>(x, y);
}

// One epoch (or its first steps_per_epoch steps), a checkpoint every save_every steps. With
// save_every 0 the caller saves after each epoch and the steps are counted from 0, as
// fashion_mnist does; otherwise a resumed run counts the batches of the epoch it already took.
void run_epoch(Accelerator& acc, Mlp& net, optim::AdamW& opt, data::DataLoader& loader, const Args& a, int64_t& step) {
  int64_t done = a.save_every > 0 ? loader.next_batch().batch : 0;
  for (auto& [x, y] : loader) {
    if (a.steps_per_epoch > 0 && done >= a.steps_per_epoch) break;
    auto sync = acc.accumulate(net);
    Tensor loss;
    {
      auto ac = acc.autocast();
      loss = nn::cross_entropy(net(x), y);
    }
    acc.backward(loss);
    opt.step();
    opt.zero_grad();
    ++done;
    ++step;
    if (a.save_every > 0 && step % a.save_every == 0) acc.save_state();
    acc.stop_if_preempted();  // SIGTERM/SIGUSR1: every rank saves and the program exits with status 75
    if (a.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.sleep_ms));
  }
}

int run(const Args& a) {
  Accelerator acc(
      {.cpu = true, .seed = 5, .project_dir = a.out, .automatic_checkpoint_naming = true, .total_limit = 2});
  Mlp net;
  optim::AdamW opt(net.parameters(), {.lr = 1e-2});
  data::DataLoader loader(synthetic(96), {.batch_size = 4, .shuffle = true});
  acc.prepare(net, opt, loader);
  int64_t step = 0;
  int first_epoch = 0;
  acc.register_for_checkpointing(
      "progress",
      [&] {
        json::Value v = json::Value::object();
        v.set("step", step);
        v.set("epoch", first_epoch);
        return v;
      },
      [&](const json::Value& v) {
        step = v.at("step").as_int();
        first_epoch = static_cast<int>(v.at("epoch").as_int());
      });
  if (const std::string from = acc.resume_on_restart(); !from.empty())
    acc.print("restart_worker: continuing from ", from, " at step ", step, ", epoch ", first_epoch);
  for (int e = first_epoch; e < a.epochs; ++e) {
    run_epoch(acc, net, opt, loader, a, step);
    first_epoch = e + 1;
    if (a.save_every == 0) acc.save_state();
  }
  acc.save_state(a.out + "/final");
  acc.save_model(net, a.out);
  acc.print("restart_worker: finished ", step, " steps, ", a.epochs, " epochs");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  cli::Parser p("restart_worker", "the restart tests' training program");
  p.add("out", "project folder (checkpoints, final state, weights)", &a.out);
  p.add("epochs", "epochs to train", &a.epochs);
  p.add("steps_per_epoch", "cut each epoch after this many steps (0: whole epochs)", &a.steps_per_epoch);
  p.add("save_every", "a checkpoint every this many steps (0: after each epoch)", &a.save_every);
  p.add("sleep_ms", "sleep this long after each step (a test signalling the job from outside)", &a.sleep_ms);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    return run(a);
  } catch (const Error& e) {
    std::fprintf(stderr, "restart_worker: %s\n", e.message().c_str());
    return 1;
  }
}
