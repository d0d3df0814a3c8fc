// mlp_demo: a 2-layer MLP learns the "two moons" toy problem with plain SGD written out by
// hand, using only tensors, elementwise ops, reductions, views and autograd.
// The matrix products are spelled as broadcast multiply + sum: (x.unsqueeze(2) * w.unsqueeze(0)).sum({1}).
#include <brisk/brisk.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

using namespace brisk;

namespace {

struct Options {
  int epochs = 30;
  double lr = 0.5;
  uint64_t seed = 0;
  int64_t hidden = 32;
  int64_t batch_size = 32;
  int64_t train_size = 1024;
};

void print_help() {
  std::printf(
      "usage: mlp_demo [--epochs N] [--lr X] [--seed S] [--hidden H] [--batch-size B] [--train-size N]\n"
      "Trains a 2-layer MLP (2 -> H -> 1, ReLU) on two interleaved half-moons with minibatch SGD\n"
      "and prints the loss and accuracy after each epoch. Flags take --kebab-case or --snake_case,\n"
      "and '--flag value' or '--flag=value'.\n"
      "  --epochs N       passes over the training set (default 30)\n"
      "  --lr X           SGD learning rate (default 0.5)\n"
      "  --seed S         random seed for data and weights (default 0)\n"
      "  --hidden H       hidden units (default 32)\n"
      "  --batch-size B   minibatch size (default 32)\n"
      "  --train-size N   training points (default 1024; the test set has N/4)\n");
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "mlp_demo: %s (try --help)\n", msg.c_str());
  std::exit(2);
}

double parse_number(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    double v = std::stod(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
    return v;
  } catch (const std::exception&) {
    usage_error("--" + flag + " expects a number, got '" + value + "'");
  }
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) usage_error("unexpected argument '" + arg + "'");
    std::string name = arg.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (i + 1 >= argc) usage_error("--" + name + " needs a value");
      value = argv[++i];
    }
    for (char& c : name)
      if (c == '_') c = '-';  // --batch_size and --batch-size are the same flag
    double v = parse_number(name, value);
    auto positive = [&](double x) {
      if (!(x > 0)) usage_error(brisk::detail::str_cat("--", name, " must be positive, got ", value));
      return x;
    };
    if (name == "epochs") {
      o.epochs = static_cast<int>(positive(v));
    } else if (name == "lr") {
      o.lr = positive(v);
    } else if (name == "seed") {
      if (v < 0) usage_error("--seed must be non-negative");
      o.seed = static_cast<uint64_t>(v);
    } else if (name == "hidden") {
      o.hidden = static_cast<int64_t>(positive(v));
    } else if (name == "batch-size") {
      o.batch_size = static_cast<int64_t>(positive(v));
    } else if (name == "train-size") {
      o.train_size = static_cast<int64_t>(positive(v));
    } else {
      usage_error("unknown flag '--" + name + "'");
    }
  }
  return o;
}

// n points on two interleaved half circles with a little noise; label 0 or 1 per moon.
struct Data {
  std::vector<float> x;  // (n, 2) row-major
  std::vector<float> y;  // (n)
};

Data two_moons(int64_t n, Generator& gen) {
  auto angle = rand({n}, {.dtype = DType::F64}, &gen).to_vector<double>();
  auto noise = randn({n, 2}, {.dtype = DType::F64}, &gen).to_vector<double>();
  Data d;
  for (int64_t i = 0; i < n; ++i) {
    const double t = angle[i] * std::numbers::pi;
    const bool second = i % 2 == 1;
    const double px = second ? 1.0 - std::cos(t) : std::cos(t);
    const double py = second ? 0.5 - std::sin(t) : std::sin(t);
    d.x.push_back(static_cast<float>(px + 0.1 * noise[2 * i]));
    d.x.push_back(static_cast<float>(py + 0.1 * noise[2 * i + 1]));
    d.y.push_back(second ? 1.f : 0.f);
  }
  return d;
}

// x: (N, K), w: (K, M) -> (N, M), as a broadcast product summed over K.
Tensor matmul_by_broadcast(const Tensor& x, const Tensor& w) {
  return sum(x.unsqueeze(2) * w.unsqueeze(0), {1});
}

struct Mlp {
  Tensor w1, b1, w2, b2;
  // logits: (N)
  Tensor forward(const Tensor& x) const {
    Tensor h = relu(matmul_by_broadcast(x, w1) + b1);
    return (matmul_by_broadcast(h, w2) + b2).squeeze(1);
  }
  std::vector<Tensor> parameters() const { return {w1, b1, w2, b2}; }
};

// Binary cross-entropy on logits z with labels y in {0, 1}, in the overflow-free form
// max(z, 0) - z * y + log(1 + exp(-|z|)).
Tensor bce_with_logits(const Tensor& z, const Tensor& y) {
  return mean(relu(z) - z * y + log1p(exp(-abs(z))));
}

double accuracy(const Tensor& logits, const Tensor& y) {
  auto z = logits.to_vector<float>();
  auto t = y.to_vector<float>();
  int64_t right = 0;
  for (size_t i = 0; i < z.size(); ++i) right += (z[i] > 0) == (t[i] > 0.5f);
  return static_cast<double>(right) / static_cast<double>(z.size());
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  Generator gen(opt.seed);

  const int64_t n_train = opt.train_size, n_test = std::max<int64_t>(opt.train_size / 4, 1);
  Data train = two_moons(n_train, gen), test = two_moons(n_test, gen);
  Tensor x_test = from_vector(test.x, {n_test, 2}), y_test = from_vector(test.y, {n_test});

  // He-style initialisation for the ReLU layer, small output layer; leaves that require grad.
  Mlp net{randn({2, opt.hidden}, {}, &gen) * std::sqrt(2.0 / 2.0), zeros({opt.hidden}),
          randn({opt.hidden, 1}, {}, &gen) * std::sqrt(1.0 / static_cast<double>(opt.hidden)), zeros({1})};
  for (Tensor* p : {&net.w1, &net.b1, &net.w2, &net.b2}) p->requires_grad_();

  std::printf("mlp_demo: 2 -> %lld -> 1 MLP on two moons, %lld train / %lld test points, SGD lr %g, batch %lld\n",
              static_cast<long long>(opt.hidden), static_cast<long long>(n_train), static_cast<long long>(n_test),
              opt.lr, static_cast<long long>(opt.batch_size));
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    // Shuffle on the host, then walk the shuffled copy in contiguous minibatches (narrow views).
    auto order = randperm(n_train, &gen).to_vector<int64_t>();
    std::vector<float> xs(train.x.size()), ys(train.y.size());
    for (int64_t i = 0; i < n_train; ++i) {
      xs[2 * i] = train.x[2 * order[i]];
      xs[2 * i + 1] = train.x[2 * order[i] + 1];
      ys[i] = train.y[order[i]];
    }
    Tensor x_all = from_vector(xs, {n_train, 2}), y_all = from_vector(ys, {n_train});

    double loss_sum = 0;
    int64_t batches = 0;
    for (int64_t start = 0; start < n_train; start += opt.batch_size) {
      const int64_t len = std::min(opt.batch_size, n_train - start);
      Tensor loss = bce_with_logits(net.forward(x_all.narrow(0, start, len)), y_all.narrow(0, start, len));
      loss.backward();
      {
        NoGradGuard no_grad;
        for (const Tensor& p : net.parameters()) {
          add_(p, p.grad(), -opt.lr);  // p -= lr * dL/dp
          p.set_grad(Tensor());        // the next backward starts from zero
        }
      }
      loss_sum += loss.item<double>();
      ++batches;
    }
    NoGradGuard no_grad;
    Tensor test_logits = net.forward(x_test);
    std::printf("epoch %3d/%d  train loss %.4f  test loss %.4f  test accuracy %5.1f%%\n", epoch, opt.epochs,
                loss_sum / static_cast<double>(batches), bce_with_logits(test_logits, y_test).item<double>(),
                100.0 * accuracy(test_logits, y_test));
  }
  return 0;
}
