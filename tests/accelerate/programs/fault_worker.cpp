// fault_worker: one case of the fault matrix (tests/accelerate/fault_tests.cmake). Every rank
// trains a small MLP through the Accelerator on the gradient path the environment chose
// (BRISK_REDUCER_MODE=overlap|shm, BRISK_SHARDING=zero1|zero2|zero3, or --path nccl on GPUs),
// all-reducing a metric each step as a training loop does; at step --step, rank --rank fails in
// the way FAULT names. The test judges how the JOB ends (status, time, leftovers, messages), so
// this program only has to fail as a user's program would.
//
// usage: fault_worker FAULT [--path overlap|shm|zero|nccl] [--rank R] [--step S] [--steps N]
// FAULT: none abort sigkill exception exit1 exit0 skip wrong_collective hang kill_in_shm
//        launcher_sigint launcher_sigterm
#include <brisk/brisk.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

using namespace brisk;

namespace {

constexpr int kSkip = 77;  // CTest's SKIP_RETURN_CODE for the cases this machine cannot run

struct Args {
  std::string fault = "none";
  std::string path = "cpu";
  int rank = 1;
  int64_t step = 5;
  int64_t steps = 30;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw std::invalid_argument("usage: fault_worker FAULT [--path P] [--rank R] [--step S] [--steps N]");
  a.fault = argv[1];
  // The launcher must stop the job: make it long enough that it cannot end first.
  if (a.fault.starts_with("launcher_")) a.steps = 1000000;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--path") {
      a.path = v;
    } else if (flag == "--rank") {
      a.rank = std::stoi(v);
    } else if (flag == "--step") {
      a.step = std::stoll(v);
    } else if (flag == "--steps") {
      a.steps = std::stoll(v);
    } else {
      throw std::invalid_argument("fault_worker: unknown flag " + flag);
    }
  }
  return a;
}

struct Mlp : nn::Module {
  nn::Linear f1{32, 64}, f2{64, 64}, f3{64, 10};
  Mlp() { register_modules({{"f1", f1}, {"f2", f2}, {"f3", f3}}); }
  Tensor forward(const Tensor& x) override { return f3(relu(f2(relu(f1(x))))); }
};

std::shared_ptr<data::TensorDataset> synthetic(int64_t n) {
  Generator g(7);
  Tensor x = randn({n, 32}, {}, &g);
  Tensor y = argmax(matmul(x, randn({32, 10}, {}, &g)), 1);
  return std::make_shared<data::TensorDataset>(x, y);
}

// The launcher a user would interrupt: `brisk launch` (the nearest ancestor of that name), else
// OpenMPI's mpirun when the job was started without it.
pid_t launcher_pid() {
  pid_t mpirun = -1;
  for (pid_t p = getppid(); p > 1;) {
    std::ifstream comm("/proc/" + std::to_string(p) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "brisk") return p;
    if (mpirun < 0 && (name == "mpirun" || name == "orterun" || name == "prterun" || name == "mpiexec")) mpirun = p;
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string pid_s, comm_s, state;
    pid_t parent = 0;
    stat >> pid_s >> comm_s >> state >> parent;
    p = parent;
  }
  return mpirun;
}

[[noreturn]] void sleep_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Faults that end this process (or hang it) before its step: returns false for exit0 (the
// program returns from main), true when the step goes on (skip, wrong_collective and the
// launcher's signals act later or elsewhere).
bool fail_now(const Args& a) {
  const std::string& f = a.fault;
  if (f == "abort") std::abort();
  if (f == "sigkill") ::raise(SIGKILL);
  if (f == "exception") throw std::runtime_error("fault_worker: an uncaught exception on purpose");
  if (f == "exit1") std::exit(1);
  if (f == "exit0") return false;
  if (f == "hang") sleep_forever();
  if (f == "kill_in_shm") {
    // Let the others enter the step's gradient all-reduce first, then die.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::raise(SIGKILL);
  }
  if (f == "launcher_sigint" || f == "launcher_sigterm") {
    const pid_t launcher = launcher_pid();
    if (launcher < 0) throw std::runtime_error("fault_worker: found no brisk launch or mpirun above this process");
    std::printf("[rank %d] sending %s to the launcher (process %d)\n", a.rank, f.c_str() + 9, launcher);
    std::fflush(stdout);
    ::kill(launcher, f == "launcher_sigint" ? SIGINT : SIGTERM);
  }
  return true;
}

// One step: forward, backward (the gradient all-reduce), the optimizer, and a metric all-reduce
// (which the skip and wrong_collective faults get wrong on the failing rank).
void train_step(Accelerator& acc, Mlp& net, optim::AdamW& opt, const Tensor& x, const Tensor& y, bool faulty,
                const std::string& fault) {
  Tensor loss = nn::cross_entropy(net(x), y);
  acc.backward(loss);
  opt.step();
  opt.zero_grad();
  Tensor metric = loss.detach().reshape({1});
  if (faulty && fault == "skip") return;
  if (faulty && fault == "wrong_collective") {
    acc.broadcast(metric, 0);
    return;
  }
  acc.reduce(metric, dist::ReduceOp::Avg);
}

int run(const Args& a) {
  if (a.path == "nccl" && cuda::device_count() < dist::init().size()) {
    std::printf("SKIP: the NCCL path needs a GPU per rank (this machine has %d, the job %d ranks)\n",
                cuda::device_count(), dist::init().size());
    return kSkip;
  }
  Accelerator acc({.cpu = a.path != "nccl", .seed = 3});
  const int me = acc.process_index();
  Mlp net;
  optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  data::DataLoader loader(synthetic(4096), {.batch_size = 32, .shuffle = true});
  acc.prepare(net, opt, loader);
  int64_t step = 0;
  for (int epoch = 0; step < a.steps; ++epoch) {
    for (auto& [x, y] : loader) {
      const bool faulty = me == a.rank && step == a.step;
      if (faulty) {
        std::printf("[rank %d] fault: %s at step %lld\n", me, a.fault.c_str(), static_cast<long long>(step));
        std::fflush(stdout);
        if (!fail_now(a)) return 0;  // exit0: return from main in the middle of training
      }
      train_step(acc, net, opt, x, y, faulty, a.fault);
      if (++step == a.steps) break;
    }
  }
  acc.wait_for_everyone();
  std::printf("[rank %d] finished %lld steps\n", me, static_cast<long long>(step));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  // An uncaught exception is one of the faults: only the argument errors above are caught.
  return run(a);
}
