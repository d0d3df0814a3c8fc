// Results never depend on the thread count: every CPU kernel whose work is split over OpenMP
// threads (GEMM, convolution and its gradients, reductions, softmax, the norms, pooling
// backward, the loss, the optimizer's norms) gives the same bits on 1, 2, 3 and 4 threads, and
// so does a whole training run of a small CNN (conv, batch norm, pooling, dropout, linear,
// cross-entropy, gradient clipping, Adam). Shapes are chosen large enough that every parallel
// path is taken, with sizes that are not multiples of the vector widths or block sizes.
#include <gtest/gtest.h>
#include <omp.h>

#include <brisk/brisk.h>
#include <brisk/kernels/conv.h>
#include <brisk/kernels/linalg.h>
#include <brisk/kernels/nn.h>
#include <brisk/kernels/optim.h>
#include <brisk/kernels/reduce.h>
#include <brisk/kernels/threads.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/random.h"

using namespace brisk;

namespace {

using Bytes = std::vector<unsigned char>;

// The raw bytes of each tensor (bit-for-bit comparison: -0 vs +0 and NaN payloads count).
std::vector<Bytes> bytes_of(const std::vector<Tensor>& ts) {
  std::vector<Bytes> out;
  for (const Tensor& t : ts) {
    Tensor c = t.contiguous();
    Bytes b(c.nbytes());
    if (!b.empty()) std::memcpy(b.data(), c.data_ptr(), b.size());
    out.push_back(std::move(b));
  }
  return out;
}

// How many elements (of `width` bytes) differ between two byte strings of equal length.
int64_t differing(const Bytes& a, const Bytes& b, size_t width) {
  int64_t n = 0;
  for (size_t i = 0; i + width <= a.size(); i += width) n += std::memcmp(a.data() + i, b.data() + i, width) != 0;
  return n;
}

// Runs f on each thread count and expects every output to match the 1-thread run bit for bit.
void expect_same_on_threads(const std::string& what, const std::vector<int>& counts,
                            const std::function<std::vector<Tensor>()>& f) {
  const int saved = get_num_threads();
  std::vector<Bytes> ref;
  std::vector<size_t> widths;
  for (int threads : counts) {
    set_num_threads(threads);
    const std::vector<Tensor> outs = f();
    if (ref.empty()) {
      ref = bytes_of(outs);
      for (const Tensor& t : outs) widths.push_back(t.element_size());
      continue;
    }
    const std::vector<Bytes> got = bytes_of(outs);
    ASSERT_EQ(got.size(), ref.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].size(), ref[i].size()) << what << ", output " << i;
      EXPECT_TRUE(got[i] == ref[i]) << what << ", output " << i << ": " << differing(got[i], ref[i], widths[i])
                                    << " of " << got[i].size() / widths[i] << " elements differ between "
                                    << counts.front() << " and " << threads << " threads";
    }
  }
  set_num_threads(saved);
}

const std::vector<int> kCounts = {1, 2, 3, 4};

// Runs f(name) once per CPU GEMM library this process can use (OpenBLAS when built in, Eigen).
template <class F>
void for_each_cpu_gemm(F f) {
  const kernels::CpuGemm saved = kernels::cpu_gemm();
  for (kernels::CpuGemm b : {kernels::CpuGemm::OpenBLAS, kernels::CpuGemm::Eigen}) {
    if (!kernels::cpu_gemm_available(b)) continue;
    kernels::set_cpu_gemm(b);
    f(std::string(b == kernels::CpuGemm::OpenBLAS ? "OpenBLAS" : "Eigen"));
  }
  kernels::set_cpu_gemm(saved);
}

// Seeded standard-normal values, f32 unless asked.
Tensor ti_randn(const Shape& s, uint64_t seed, DType dt = DType::F32) {
  return brisk::testing::seeded_randn(s, seed, dt);
}

}  // namespace

TEST(ThreadIndependence, MatmulLargeOddAndBatched) {
  for_each_cpu_gemm([](const std::string& library) {
    for (DType dt : {DType::F32, DType::F64}) {
      // Big enough to be split over threads; sizes off every block multiple; deep K (k-blocking).
      Tensor a = ti_randn({203, 1031}, 1, dt), b = ti_randn({1031, 157}, 2, dt);
      Tensor at = ti_randn({517, 96}, 3, dt), bt = ti_randn({300, 517}, 4, dt);
      // Batches smaller and larger than the thread count, products of either size class.
      Tensor ba = ti_randn({3, 130, 250}, 5, dt), bb = ti_randn({3, 250, 141}, 6, dt);
      Tensor sa = ti_randn({37, 40, 33}, 7, dt), sb = ti_randn({37, 33, 45}, 8, dt);
      // Products cut into many panels: of rows (8 panels), of columns (8, the last one short).
      Tensor tall = ti_randn({3900, 40}, 9, dt), thin = ti_randn({130, 40}, 10, dt);
      Tensor wide_a = ti_randn({70, 40}, 11, dt), wide_b = ti_randn({70, 4001}, 12, dt);
      expect_same_on_threads(library + " matmul " + dtype_name(dt), kCounts, [&] {
        return std::vector<Tensor>{kernels::matmul(a, b),
                                   kernels::matmul(at.t(), bt.t()),
                                   kernels::matmul(b.t(), a.t()),
                                   kernels::matmul(ba, bb),
                                   kernels::matmul(sa, sb),
                                   kernels::matmul(tall, thin.t()),
                                   kernels::matmul(wide_a.t(), wide_b)};
      });
    }
  });
}

// The panel split must not change what is computed: gemm with every transposition, alpha, beta
// and a padded C, on shapes cut into several row or column panels, against a naive f64 loop.
TEST(ThreadIndependence, GemmPanelsMatchANaiveProduct) {
  struct Case {
    int64_t m, n, k;
  };
  for_each_cpu_gemm([](const std::string& library) {
    for (const Case& c : {Case{1100, 90, 200}, Case{40, 4001, 70}, Case{300, 260, 64}}) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          Generator gen(static_cast<uint64_t>(c.m + int64_t{2} * ta + tb));
          const std::vector<double> a = randn({c.m * c.k}, {.dtype = DType::F64}, &gen).to_vector<double>();
          const std::vector<double> b = randn({c.k * c.n}, {.dtype = DType::F64}, &gen).to_vector<double>();
          const int64_t lda = ta ? c.m : c.k, ldb = tb ? c.k : c.n, ldc = c.n + 3;
          std::vector<double> out(static_cast<size_t>(c.m * ldc)), want(out.size());
          for (size_t i = 0; i < out.size(); ++i) out[i] = want[i] = static_cast<double>(i % 7) - 3.0;
          const double alpha = 0.5, beta = 2.0;
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < c.n; ++j) {
              double s = 0;
              for (int64_t l = 0; l < c.k; ++l)
                s += a[ta ? l * lda + i : i * lda + l] * b[tb ? j * ldb + l : l * ldb + j];
              want[i * ldc + j] = alpha * s + beta * want[i * ldc + j];
            }
          kernels::gemm(ta, tb, c.m, c.n, c.k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
          int64_t bad = 0;
          for (size_t i = 0; i < out.size(); ++i) bad += std::abs(out[i] - want[i]) > 1e-9 * (1.0 + std::abs(want[i]));
          EXPECT_EQ(bad, 0) << library << " " << c.m << "x" << c.n << "x" << c.k << " trans_a " << ta << " trans_b "
                            << tb;
        }
      }
    }
  });
}

TEST(ThreadIndependence, LinearShapesOfTheExampleCnn) {
  // The example CNN's fully connected layer at batch 64, forward and both gradients.
  Tensor x = ti_randn({64, 1568}, 11), w = ti_randn({256, 1568}, 12), b = ti_randn({256}, 13),
         gy = ti_randn({64, 256}, 14);
  expect_same_on_threads("linear 1568 -> 256", kCounts, [&] {
    return std::vector<Tensor>{kernels::linear(x, w, b), kernels::matmul(gy, w), kernels::matmul(gy.t(), x)};
  });
}

TEST(ThreadIndependence, Conv2dForwardAndBackward) {
  struct Case {
    Shape x, w;
    Conv2dOptions o;
  };
  const std::vector<Case> cases = {
      {{13, 16, 14, 14}, {32, 16, 3, 3}, {.padding = 1}},  // the example CNN's second conv
      {{9, 3, 30, 30}, {20, 3, 5, 5}, {.stride = 2, .padding = 2}},
      {{7, 12, 11, 11}, {18, 4, 3, 3}, {.padding = 1, .groups = 3}},
      {{5, 24, 9, 9}, {40, 24, 1, 1}, {}},  // pointwise: the image is the column matrix
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    Tensor x = ti_randn(c.x, 100 + i), w = ti_randn(c.w, 200 + i), b = ti_randn({c.w[0]}, 300 + i);
    Tensor y = kernels::conv2d(x, w, b, c.o);
    Tensor gy = ti_randn(y.sizes(), 400 + i);
    expect_same_on_threads("conv2d case " + std::to_string(i), kCounts, [&] {
      kernels::Conv2dGrads g = kernels::conv2d_backward(gy, x, w, c.o, true, true, true);
      return std::vector<Tensor>{kernels::conv2d(x, w, b, c.o), g.input, g.weight, g.bias};
    });
  }
}

TEST(ThreadIndependence, ReductionsOverLargeTensors) {
  Tensor big = ti_randn({(1 << 20) + 37}, 21);
  Tensor m = ti_randn({4099, 301}, 22);
  Tensor t3 = ti_randn({17, 513, 29}, 23);
  expect_same_on_threads("sum/mean/var/norm", kCounts, [&] {
    return std::vector<Tensor>{kernels::sum(big, {0}),
                               kernels::mean(big, {0}),
                               kernels::sum(m, {0}),
                               kernels::sum(m, {1}),
                               kernels::sum(m, {0, 1}),
                               kernels::mean(t3, {0, 2}),
                               kernels::var(m, {0}),
                               kernels::std(big, {0}),
                               kernels::logsumexp(m, {1}),
                               kernels::sum(t3, {1}),
                               kernels::total_norm({big, m}, 2.0)};
  });
}

TEST(ThreadIndependence, SoftmaxAndLosses) {
  Tensor x = ti_randn({311, 1000}, 31), gy = ti_randn({311, 1000}, 32);
  Tensor xc = ti_randn({64, 100, 37}, 33);  // softmax over a non-last dim
  Generator gen(34);
  Tensor targets = randint(0, 1000, {311}, {.dtype = DType::I64}, &gen);
  expect_same_on_threads("softmax / cross_entropy", kCounts, [&] {
    Tensor y = kernels::softmax(x, 1), ly = kernels::log_softmax(x, 1);
    kernels::ClassLossResult ce = kernels::cross_entropy(x, targets, -100, 0.1, kernels::Reduction::Mean);
    Tensor gce = kernels::cross_entropy_backward(ones({}, {}), x, targets, ce, -100, 0.1, kernels::Reduction::Mean);
    return std::vector<Tensor>{y, ly, kernels::softmax_backward(gy, y, 1), kernels::softmax(xc, 1), ce.loss, gce};
  });
}

TEST(ThreadIndependence, LayerNormAndBatchNorm) {
  Tensor x = ti_randn({517, 768}, 41), w = ti_randn({768}, 42), b = ti_randn({768}, 43), gy = ti_randn({517, 768}, 44);
  Tensor xb = ti_randn({37, 24, 13, 13}, 45), wb = ti_randn({24}, 46), bb = ti_randn({24}, 47),
         gb = ti_randn({37, 24, 13, 13}, 48);
  expect_same_on_threads("layer_norm / batch_norm", kCounts, [&] {
    kernels::LayerNormResult ln = kernels::layer_norm(x, {768}, w, b, 1e-5);
    kernels::LayerNormGrads lg = kernels::layer_norm_backward(gy, x, ln.mean, ln.rstd, w, {true, true, true});
    Tensor rm = zeros({24}), rv = ones({24});
    kernels::BatchNormResult bn = kernels::batch_norm(xb, wb, bb, rm, rv, true, 0.1, 1e-5);
    kernels::BatchNormGrads bg =
        kernels::batch_norm_backward(gb, xb, wb, bn.save_mean, bn.save_invstd, true, {true, true, true});
    return std::vector<Tensor>{ln.y,         ln.mean,        ln.rstd, lg.dx, lg.dweight, lg.dbias,   bn.y,
                               bn.save_mean, bn.save_invstd, rm,      rv,    bg.dx,      bg.dweight, bg.dbias};
  });
}

TEST(ThreadIndependence, PoolingBackward) {
  Tensor x = ti_randn({32, 16, 29, 29}, 51);
  expect_same_on_threads("max/avg pool backward", kCounts, [&] {
    kernels::MaxPool2dResult mp = kernels::max_pool2d(x, {3, 3}, {.stride = 2, .padding = 1});
    Tensor gmax = kernels::max_pool2d_backward(ones(mp.values.sizes()), mp.indices, x.sizes());
    kernels::MaxPool2dResult m2 = kernels::max_pool2d(x, {2, 2});
    Tensor gmax2 = kernels::max_pool2d_backward(ti_randn(m2.values.sizes(), 52), m2.indices, x.sizes());
    kernels::MaxPool2dTaps t3 = kernels::max_pool2d_taps(x, {3, 3}, {.stride = 2, .padding = 1});
    Tensor gtap3 = kernels::max_pool2d_taps_backward(ones(t3.values.sizes()), t3.taps, x.sizes(), {3, 3},
                                                     {.stride = 2, .padding = 1});
    kernels::MaxPool2dTaps t2 = kernels::max_pool2d_taps(x, {2, 2}, {}, true);
    Tensor gtap2 = kernels::max_pool2d_taps_backward(ti_randn(t2.values.sizes(), 52), t2.taps, x.sizes(), {2, 2});
    const AvgPool2dOptions ao{.stride = 2, .padding = 1};
    Tensor ya = kernels::avg_pool2d(x, {3, 3}, ao);
    Tensor gavg = kernels::avg_pool2d_backward(ti_randn(ya.sizes(), 53), x.sizes(), {3, 3}, ao);
    Tensor gad = kernels::adaptive_avg_pool2d_backward(ti_randn({32, 16, 5, 5}, 54), x.sizes());
    return std::vector<Tensor>{mp.values, mp.indices, gmax,  m2.values, gmax2, t3.taps,
                               gtap3,     t2.taps,    gtap2, ya,        gavg,  gad};
  });
}

TEST(ThreadIndependence, ClipTotalNorm) {
  const std::vector<Shape> shapes = {{300, 1000}, {4097}, {64, 32, 3, 3}, {10}};
  expect_same_on_threads("total norm and clipping", kCounts, [&] {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < shapes.size(); ++i) grads.push_back(ti_randn(shapes[i], 60 + i));
    Tensor norm = kernels::total_norm(grads, 2.0);
    kernels::clip_grads_with_norm_(grads, 1.0, norm);
    std::vector<Tensor> out = grads;
    out.push_back(norm);
    out.push_back(kernels::total_norm(grads, std::numeric_limits<double>::infinity()));
    return out;
  });
}

namespace {

// A small CNN with every layer kind whose kernels split work over threads.
class SmallCnn : public nn::Module {
 public:
  SmallCnn()
      : c1(1, 8, 3, {.padding = 1}),
        bn1(8),
        c2(8, 16, 3, {.padding = 1}),
        drop(0.25),
        f1(int64_t{16} * 7 * 7, 64),
        f2(64, 10) {
    register_modules({{"c1", c1}, {"bn1", bn1}, {"c2", c2}, {"drop", drop}, {"f1", f1}, {"f2", f2}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu(bn1(c1(x))), 2);  // (N, 8, 14, 14)
    h = ::brisk::avg_pool2d(relu(c2(h)), 2);     // (N, 16, 7, 7)
    return f2(relu(f1(drop(h.flatten(1)))));
  }
  nn::Conv2d c1;
  nn::BatchNorm2d bn1;
  nn::Conv2d c2;
  nn::Dropout drop;
  nn::Linear f1, f2;
};

}  // namespace

TEST(ThreadIndependence, TrainingASmallCnnGivesTheSameWeightsOn1To3Threads) {
  expect_same_on_threads("small CNN after 4 training steps", {1, 2, 3}, [] {
    manual_seed(7);
    SmallCnn net;
    optim::Adam opt(net.parameters(), {.lr = 1e-3});
    Generator data(8);
    for (int step = 0; step < 4; ++step) {
      Tensor x = randn({48, 1, 28, 28}, {}, &data);
      Tensor y = randint(0, 10, {48}, {.dtype = DType::I64}, &data);
      Tensor loss = cross_entropy(net(x), y);
      loss.backward();
      optim::clip_grad_norm_(net.parameters(), 1.0);
      opt.step();
      opt.zero_grad();
    }
    std::vector<Tensor> state;
    for (auto& [name, t] : net.state_dict()) state.push_back(t);
    return state;
  });
}
