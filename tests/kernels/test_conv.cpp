// conv2d kernels: forward and all three gradients against naive loops over every
// (n, c_out, oh, ow, c_in, kh, kw) term, argument errors, and run-to-run determinism.
#include <gtest/gtest.h>
#include <omp.h>

#include <brisk/brisk.h>
#include <brisk/kernels/conv.h>

#include <functional>
#include <string>
#include <vector>

#include "common/gradcheck.h"

using namespace brisk;

namespace {

struct ConvCase {
  int64_t n, c_in, h, w, c_out, kh, kw;
  Conv2dOptions o;
  bool bias = true;
};

std::string describe(const ConvCase& c) {
  std::ostringstream os;
  os << "x (" << c.n << ", " << c.c_in << ", " << c.h << ", " << c.w << ") w (" << c.c_out << ", "
     << c.c_in / c.o.groups << ", " << c.kh << ", " << c.kw << ") stride " << c.o.stride << " pad " << c.o.padding
     << " dil " << c.o.dilation << " groups " << c.o.groups << (c.bias ? " bias" : " no bias");
  return os.str();
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// Calls term(y_index, x_index, w_index) for every product y += x * w of the convolution,
// with flat C-order indices; the naive 7-loop definition.
void for_each_term(const ConvCase& c, const std::function<void(int64_t, int64_t, int64_t)>& term) {
  const Conv2dOptions& o = c.o;
  const int64_t oh_n = out_size(c.h, c.kh, o.stride.h, o.padding.h, o.dilation.h);
  const int64_t ow_n = out_size(c.w, c.kw, o.stride.w, o.padding.w, o.dilation.w);
  const int64_t cin_g = c.c_in / o.groups, cout_g = c.c_out / o.groups;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.c_out; ++co)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow)
          for (int64_t cg = 0; cg < cin_g; ++cg)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t ih = oh * o.stride.h - o.padding.h + i * o.dilation.h;
                const int64_t iw = ow * o.stride.w - o.padding.w + j * o.dilation.w;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const int64_t ci = (co / cout_g) * cin_g + cg;
                term(((n * c.c_out + co) * oh_n + oh) * ow_n + ow, ((n * c.c_in + ci) * c.h + ih) * c.w + iw,
                     ((co * cin_g + cg) * c.kh + i) * c.kw + j);
              }
}

Shape out_shape(const ConvCase& c) {
  return {c.n, c.c_out, out_size(c.h, c.kh, c.o.stride.h, c.o.padding.h, c.o.dilation.h),
          out_size(c.w, c.kw, c.o.stride.w, c.o.padding.w, c.o.dilation.w)};
}

struct ConvData {
  Tensor x, w, b;
};
ConvData make_data(const ConvCase& c, DType dt, uint64_t seed) {
  Generator gen(seed);
  ConvData d;
  d.x = randn({c.n, c.c_in, c.h, c.w}, {.dtype = dt}, &gen);
  d.w = randn({c.c_out, c.c_in / c.o.groups, c.kh, c.kw}, {.dtype = dt}, &gen);
  if (c.bias) d.b = randn({c.c_out}, {.dtype = dt}, &gen);
  return d;
}

std::vector<double> naive_forward(const ConvCase& c, const ConvData& d) {
  const Shape ys = out_shape(c);
  std::vector<double> y(static_cast<size_t>(shape_numel(ys)), 0.0);
  const auto x = d.x.to_vector<double>(), w = d.w.to_vector<double>();
  for_each_term(c, [&](int64_t yi, int64_t xi, int64_t wi) { y[yi] += x[xi] * w[wi]; });
  if (c.bias) {
    const auto b = d.b.to_vector<double>();
    const int64_t p = ys[2] * ys[3];
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[(static_cast<int64_t>(i) / p) % c.c_out];
  }
  return y;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at flat index " << i;
  }
}

std::vector<ConvCase> grid() {
  return {
      {1, 1, 5, 5, 1, 3, 3, {}},
      {2, 3, 7, 6, 4, 3, 3, {.padding = 1}},
      {2, 3, 8, 9, 5, 3, 2, {.stride = 2, .padding = {1, 0}}},
      {1, 2, 9, 9, 3, 3, 3, {.stride = {1, 2}, .padding = 2, .dilation = 2}, false},
      {3, 4, 6, 5, 6, 3, 3, {.padding = 1, .groups = 2}},
      {2, 6, 7, 7, 6, 3, 3, {.stride = 2, .padding = 1, .groups = 6}},  // depthwise
      {2, 4, 5, 5, 8, 1, 1, {}},                                        // pointwise (no im2col)
      {2, 4, 5, 5, 8, 1, 1, {.groups = 4}, false},                      // grouped pointwise
      {2, 3, 6, 7, 2, 1, 1, {.stride = 2}},
      {1, 2, 4, 11, 3, 2, 5, {.stride = {2, 3}, .padding = {0, 2}, .dilation = {1, 2}}},
      {2, 2, 6, 5, 3, 3, 3, {.padding = 2, .dilation = 2}},  // "same" size, dilated
      {1, 2, 2, 2, 2, 5, 5, {.padding = 2}, false},          // padding as wide as the image
      {2, 3, 5, 6, 2, 3, 1, {.padding = {0, 0}}},            // stride 1, width kept, height shrinks
      {64, 1, 28, 28, 16, 3, 3, {.padding = 1}},             // the example CNN's first layer
      {4, 16, 14, 14, 32, 3, 3, {.padding = 1}},             // and its second
  };
}

}  // namespace

TEST(Conv2d, HandComputedSumOfWindow) {
  // 1..9 in a 3x3 image, a 2x2 kernel of ones: each output sums a 2x2 window, plus bias 0.5.
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = ones({1, 1, 2, 2});
  Tensor y = kernels::conv2d(x, w, full({1}, 0.5));
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12.5f, 16.5f, 24.5f, 28.5f}));
}

TEST(Conv2d, ForwardMatchesNaiveLoopsOverGrid) {
  for (DType dt : {DType::F64, DType::F32}) {
    for (const ConvCase& c : grid()) {
      ConvData d = make_data(c, dt, 7);
      Tensor y = kernels::conv2d(d.x, d.w, d.b, c.o);
      EXPECT_EQ(y.sizes(), out_shape(c)) << describe(c);
      expect_close(y.to_vector<double>(), naive_forward(c, d), dt == DType::F64 ? 1e-12 : 1e-4,
                   describe(c) + " " + dtype_name(dt));
    }
  }
}

TEST(Conv2d, NonContiguousInputsGiveTheSameResult) {
  for (const ConvCase& c : grid()) {
    ConvData d = make_data(c, DType::F64, 3);
    ConvData nc{brisk::testing::noncontiguous(d.x), brisk::testing::noncontiguous(d.w),
                c.bias ? brisk::testing::noncontiguous(d.b) : Tensor()};
    expect_close(kernels::conv2d(nc.x, nc.w, nc.b, c.o).to_vector<double>(), naive_forward(c, d), 1e-12, describe(c));
  }
}

TEST(Conv2d, HalfPrecisionComputesInFloat) {
  ConvCase c{2, 3, 6, 6, 4, 3, 3, {.padding = 1}};
  ConvData d = make_data(c, DType::F32, 5);
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor y = kernels::conv2d(d.x.to(dt), d.w.to(dt), d.b.to(dt), c.o);
    EXPECT_EQ(y.dtype(), dt);
    ConvData rounded{d.x.to(dt).to(DType::F64), d.w.to(dt).to(DType::F64), d.b.to(dt).to(DType::F64)};
    expect_close(y.to_vector<double>(), naive_forward(c, rounded), dt == DType::F16 ? 2e-3 : 1e-2, dtype_name(dt));
  }
}

TEST(Conv2d, BackwardMatchesNaiveLoopsOverGrid) {
  for (DType dt : {DType::F64, DType::F32}) {
    for (const ConvCase& c : grid()) {
      ConvData d = make_data(c, dt, 11);
      Generator gen(12);
      Tensor gy = randn(out_shape(c), {.dtype = dt}, &gen);
      const auto x = d.x.to_vector<double>(), w = d.w.to_vector<double>(), g = gy.to_vector<double>();
      std::vector<double> gx(x.size(), 0.0), gw(w.size(), 0.0), gb(static_cast<size_t>(c.c_out), 0.0);
      for_each_term(c, [&](int64_t yi, int64_t xi, int64_t wi) {
        gx[xi] += g[yi] * w[wi];
        gw[wi] += g[yi] * x[xi];
      });
      const int64_t p = gy.size(2) * gy.size(3);
      for (size_t i = 0; i < g.size(); ++i) gb[(static_cast<int64_t>(i) / p) % c.c_out] += g[i];

      const double tol = dt == DType::F64 ? 1e-11 : 1e-3;
      kernels::Conv2dGrads r = kernels::conv2d_backward(gy, d.x, d.w, c.o, true, true, true);
      expect_close(r.input.to_vector<double>(), gx, tol, describe(c) + " grad input");
      expect_close(r.weight.to_vector<double>(), gw, tol, describe(c) + " grad weight");
      expect_close(r.bias.to_vector<double>(), gb, tol, describe(c) + " grad bias");
      EXPECT_EQ(r.input.sizes(), d.x.sizes());
      EXPECT_EQ(r.weight.sizes(), d.w.sizes());

      // Each gradient alone, with non-contiguous operands, gives the same numbers.
      Tensor gy_nc = brisk::testing::noncontiguous(gy), x_nc = brisk::testing::noncontiguous(d.x);
      kernels::Conv2dGrads only_w = kernels::conv2d_backward(gy_nc, x_nc, d.w, c.o, false, true, false);
      EXPECT_FALSE(only_w.input.defined());
      EXPECT_FALSE(only_w.bias.defined());
      expect_close(only_w.weight.to_vector<double>(), gw, tol, describe(c) + " grad weight alone");
      kernels::Conv2dGrads only_x = kernels::conv2d_backward(gy_nc, x_nc, d.w, c.o, true, false, false);
      expect_close(only_x.input.to_vector<double>(), gx, tol, describe(c) + " grad input alone");
    }
  }
}

TEST(Conv2d, ResultsAreReproducibleForAGivenThreadCount) {
  ConvCase c{13, 8, 10, 10, 12, 3, 3, {.padding = 1, .groups = 2}};
  ConvData d = make_data(c, DType::F32, 21);
  Generator gen(22);
  Tensor gy = randn(out_shape(c), {}, &gen);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    auto run = [&] {
      kernels::Conv2dGrads r = kernels::conv2d_backward(gy, d.x, d.w, c.o, true, true, true);
      return std::vector<std::vector<float>>{kernels::conv2d(d.x, d.w, d.b, c.o).to_vector<float>(),
                                             r.input.to_vector<float>(), r.weight.to_vector<float>(),
                                             r.bias.to_vector<float>()};
    };
    const auto first = run();
    for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(run(), first) << threads << " threads, repeat " << rep;
  }
  omp_set_num_threads(saved);
}

// Each thread builds its column matrices in scratch memory of its own, kept from call to call
// (kernels/cpu/scratch.cpp), rather than in a block of the CPU allocator: a forward pass takes
// its output from the allocator and nothing more, at its peak too, on any thread count.
TEST(Conv2d, ForwardTakesOnlyItsOutputFromTheAllocator) {
  ConvCase c{8, 4, 16, 16, 16, 3, 3, {.padding = 1}};
  ConvData d = make_data(c, DType::F32, 31);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    (void)kernels::conv2d(d.x, d.w, d.b, c.o);  // the first call on a thread may grow its scratch
    const int64_t before = memory_stats().total_current;
    reset_peak_memory_stats();
    Tensor y = kernels::conv2d(d.x, d.w, d.b, c.o);
    const MemoryStats after = memory_stats();
    EXPECT_EQ(after.total_current - before, y.nbytes()) << threads << " threads";
    EXPECT_EQ(after.total_peak - before, y.nbytes()) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

namespace {

// Runs f, expecting a brisk::Error whose message names conv2d and contains `fragment`.
void expect_conv_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("conv2d"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Conv2d, RejectsBadArgumentsNamingOpAndShapes) {
  Tensor x = zeros({2, 4, 5, 5}), w = zeros({6, 4, 3, 3});
  expect_conv_error([&] { kernels::conv2d(zeros({4, 5, 5}), w, Tensor()); }, "[4, 5, 5]");        // wrong input dims
  expect_conv_error([&] { kernels::conv2d(x, zeros({6, 4, 3}), Tensor()); }, "[6, 4, 3]");        // wrong weight dims
  expect_conv_error([&] { kernels::conv2d(x, zeros({6, 3, 3, 3}), Tensor()); }, "[6, 3, 3, 3]");  // channels
  expect_conv_error([&] { kernels::conv2d(x, zeros({6, 4, 3, 3}), Tensor(), {.groups = 3}); }, "groups 3");
  expect_conv_error([&] { kernels::conv2d(x, zeros({6, 2, 3, 3}), Tensor(), {.groups = 4}); }, "groups 4");
  expect_conv_error([&] { kernels::conv2d(x, zeros({6, 4, 7, 3}), Tensor()); }, "larger than the padded input");
  expect_conv_error([&] { kernels::conv2d(x, zeros({6, 4, 7, 3}), Tensor(), {.dilation = {1, 3}}); }, "larger");
  expect_conv_error([&] { kernels::conv2d(x, w, Tensor(), {.stride = 0}); }, "stride");
  expect_conv_error([&] { kernels::conv2d(x, w, Tensor(), {.stride = {1, -1}}); }, "stride");
  expect_conv_error([&] { kernels::conv2d(x, w, Tensor(), {.dilation = 0}); }, "dilation");
  expect_conv_error([&] { kernels::conv2d(x, w, Tensor(), {.padding = -1}); }, "padding");
  expect_conv_error([&] { kernels::conv2d(x, w, zeros({5})); }, "bias");
  expect_conv_error([&] { kernels::conv2d(x, w.to(DType::F64), Tensor()); }, "dtype");
  expect_conv_error([&] { kernels::conv2d_backward(zeros({2, 6, 4, 4}), x, w, {}, true, true, true); }, "[2, 6, 4, 4]");
}

TEST(Conv2d, PaddingLetsTheKernelExceedTheInput) {
  // A 3x3 kernel on a 2x2 image is fine once padding makes the input 4x4.
  Tensor y = kernels::conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3}), Tensor(), {.padding = 1});
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
}
