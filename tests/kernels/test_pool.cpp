// Pooling kernels: max (values and argmax indices), average (count_include_pad both ways,
// ceil_mode) and adaptive average, forward and backward, against naive loops and hand values.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/conv.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/gradcheck.h"

using namespace brisk;

namespace {

struct PoolCase {
  int64_t n, c, h, w;
  Size2 kernel, stride, padding, dilation = 1;
  bool ceil_mode = false;
};

std::string describe(const PoolCase& p) {
  std::ostringstream os;
  os << "x (" << p.n << ", " << p.c << ", " << p.h << ", " << p.w << ") kernel " << p.kernel << " stride " << p.stride
     << " pad " << p.padding << " dil " << p.dilation << (p.ceil_mode ? " ceil" : "");
  return os.str();
}

// PyTorch's output size, written out independently of the kernel's helper.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

std::vector<PoolCase> max_grid() {
  return {
      {2, 3, 8, 8, 2, 2, 0},
      {1, 2, 7, 9, 3, 2, 1},
      {2, 1, 6, 10, {2, 3}, {1, 2}, {1, 1}},
      {1, 2, 9, 9, 3, 1, 1, 2},
      {1, 2, 7, 7, 2, 2, 0, 1, true},
      {2, 2, 8, 7, {3, 2}, {2, 1}, {1, 0}, {1, 2}, true},
      {3, 4, 28, 28, 2, 2, 0},  // the example CNN's pooling
      // 2x2 / stride 2 on odd sizes: the one-pass backward must zero the last row and column;
      // overlapping 2x2 / stride 1 windows: some argmaxes leave their 2x2 block, so the backward
      // falls back to the scatter.
      {2, 3, 7, 9, 2, 2, 0},
      {1, 2, 6, 6, 2, 1, 0},
  };
}

// Distinct values (no ties), so the argmax is unambiguous.
Tensor distinct_values(const Shape& s, DType dt, uint64_t seed) {
  Generator gen(seed);
  Tensor perm = randperm(shape_numel(s), &gen);
  std::vector<double> v;
  for (int64_t i : perm.to_vector<int64_t>()) v.push_back(0.25 * static_cast<double>(i) - 3.0);
  return from_vector<double>(v, s).to(dt);
}

}  // namespace

TEST(MaxPool2d, HandComputedValuesAndIndices) {
  Tensor x = from_vector<float>({1, 5, 2, 0, 3, 4, 9, 8, -1, 7, 6, 2, 0, 0, 3, 1}, {1, 1, 4, 4});
  kernels::MaxPool2dResult r = kernels::max_pool2d(x, 2);
  EXPECT_EQ(r.values.to_vector<float>(), (std::vector<float>{5, 9, 7, 6}));
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 6, 9, 10}));
  Tensor gx = kernels::max_pool2d_backward(ones({1, 1, 2, 2}), r.indices, x.sizes());
  EXPECT_EQ(gx.to_vector<float>(), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0}));
}

TEST(MaxPool2d, FirstMaximumWinsTiesAndNaNPropagates) {
  Tensor x = from_vector<float>({2, 2, 2, 2}, {1, 1, 2, 2});
  EXPECT_EQ(kernels::max_pool2d(x, 2).indices.to_vector<int64_t>(), (std::vector<int64_t>{0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = from_vector<float>({1, nan, 3, 2}, {1, 1, 2, 2});
  kernels::MaxPool2dResult r = kernels::max_pool2d(y, 2);
  EXPECT_TRUE(std::isnan(r.values.item<float>()));
  EXPECT_EQ(r.indices.item<int64_t>(), 1);
  // The same holds on the general (padded) path.
  Tensor z = from_vector<float>({1, nan, 3, 2}, {1, 1, 2, 2});
  kernels::MaxPool2dResult rp = kernels::max_pool2d(z, 3, {.stride = 1, .padding = 1});
  EXPECT_TRUE(std::isnan(rp.values.to_vector<float>()[0]));
}

TEST(MaxPool2d, MatchesNaiveLoopsWithPaddingDilationAndCeilMode) {
  for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
    for (const PoolCase& p : max_grid()) {
      Tensor x = distinct_values({p.n, p.c, p.h, p.w}, dt, 3);
      kernels::MaxPool2dResult r = kernels::max_pool2d(
          brisk::testing::noncontiguous(x), p.kernel,
          {.stride = p.stride, .padding = p.padding, .dilation = p.dilation, .ceil_mode = p.ceil_mode});
      const int64_t oh = out_size(p.h, p.kernel.h, p.stride.h, p.padding.h, p.dilation.h, p.ceil_mode);
      const int64_t ow = out_size(p.w, p.kernel.w, p.stride.w, p.padding.w, p.dilation.w, p.ceil_mode);
      ASSERT_EQ(r.values.sizes(), (Shape{p.n, p.c, oh, ow})) << describe(p);
      ASSERT_EQ(r.values.dtype(), dt);
      const auto xv = x.to_vector<double>(), yv = r.values.to_vector<double>();
      const auto iv = r.indices.to_vector<int64_t>();
      for (int64_t pl = 0; pl < p.n * p.c; ++pl)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double best = -INFINITY;
            int64_t arg = -1;
            for (int64_t a = 0; a < p.kernel.h; ++a)
              for (int64_t b = 0; b < p.kernel.w; ++b) {
                const int64_t ih = i * p.stride.h - p.padding.h + a * p.dilation.h;
                const int64_t iw = j * p.stride.w - p.padding.w + b * p.dilation.w;
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                const double v = xv[pl * p.h * p.w + ih * p.w + iw];
                if (v > best) best = v, arg = ih * p.w + iw;
              }
            const int64_t o = (pl * oh + i) * ow + j;
            ASSERT_EQ(yv[o], best) << describe(p) << " output " << o;
            ASSERT_EQ(iv[o], arg) << describe(p) << " output " << o;
          }
      // Backward: each output's gradient lands on its argmax (summed where windows overlap).
      Tensor gy = distinct_values(r.values.sizes(), dt, 4);
      Tensor gx = kernels::max_pool2d_backward(brisk::testing::noncontiguous(gy), r.indices, x.sizes());
      std::vector<double> want(xv.size(), 0.0);
      const auto gv = gy.to_vector<double>();
      for (size_t o = 0; o < iv.size(); ++o) want[(o / (oh * ow)) * p.h * p.w + iv[o]] += gv[o];
      const auto got = gx.to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], dt == DType::BF16 ? 0.05 * (1 + std::abs(want[i])) : 1e-6) << describe(p);
    }
  }
}

namespace {

struct AvgCase {
  PoolCase p;
  bool count_include_pad = true;
};

// PyTorch's average: windows clipped to [-pad, size + pad) define the padded count; the sum runs
// over the in-bounds part.
std::vector<double> naive_avg(const AvgCase& c, const std::vector<double>& x, int64_t oh, int64_t ow) {
  const PoolCase& p = c.p;
  std::vector<double> y;
  for (int64_t pl = 0; pl < p.n * p.c; ++pl)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double s = 0;
        int64_t in_bounds = 0, in_padded = 0;
        for (int64_t a = 0; a < p.kernel.h; ++a)
          for (int64_t b = 0; b < p.kernel.w; ++b) {
            const int64_t ih = i * p.stride.h - p.padding.h + a, iw = j * p.stride.w - p.padding.w + b;
            if (ih < p.h + p.padding.h && iw < p.w + p.padding.w) ++in_padded;
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
            s += x[pl * p.h * p.w + ih * p.w + iw];
            ++in_bounds;
          }
        y.push_back(s / static_cast<double>(c.count_include_pad ? in_padded : in_bounds));
      }
  return y;
}

}  // namespace

TEST(AvgPool2d, HandComputedWithAndWithoutPaddingInTheCount) {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_EQ(kernels::avg_pool2d(x, 2).to_vector<float>(), (std::vector<float>{2.5f}));
  // 2x2 windows, stride 1, padding 1: the corner window holds one real value and three zeros.
  Tensor with = kernels::avg_pool2d(x, 2, {.stride = 1, .padding = 1});
  Tensor without = kernels::avg_pool2d(x, 2, {.stride = 1, .padding = 1, .count_include_pad = false});
  EXPECT_EQ(with.to_vector<float>(), (std::vector<float>{0.25f, 0.75f, 0.5f, 1.f, 2.5f, 1.5f, 0.75f, 1.75f, 1.f}));
  EXPECT_EQ(without.to_vector<float>(), (std::vector<float>{1.f, 1.5f, 2.f, 2.f, 2.5f, 3.f, 3.f, 3.5f, 4.f}));
}

TEST(AvgPool2d, MatchesNaiveLoopsForwardAndBackward) {
  const std::vector<AvgCase> cases = {
      {{2, 3, 8, 8, 2, 2, 0}},          {{1, 2, 7, 9, 3, 2, 1}},
      {{1, 2, 7, 9, 3, 2, 1}, false},   {{2, 1, 6, 10, {2, 3}, {1, 2}, {1, 1}}},
      {{1, 2, 7, 7, 2, 2, 1, 1, true}}, {{1, 2, 8, 7, {3, 2}, {2, 3}, {1, 1}, 1, true}, false},
  };
  for (const AvgCase& c : cases) {
    const PoolCase& p = c.p;
    const AvgPool2dOptions o{
        .stride = p.stride, .padding = p.padding, .ceil_mode = p.ceil_mode, .count_include_pad = c.count_include_pad};
    Generator gen(5);
    Tensor x = randn({p.n, p.c, p.h, p.w}, {.dtype = DType::F64}, &gen);
    Tensor y = kernels::avg_pool2d(brisk::testing::noncontiguous(x), p.kernel, o);
    const int64_t oh = out_size(p.h, p.kernel.h, p.stride.h, p.padding.h, 1, p.ceil_mode);
    const int64_t ow = out_size(p.w, p.kernel.w, p.stride.w, p.padding.w, 1, p.ceil_mode);
    ASSERT_EQ(y.sizes(), (Shape{p.n, p.c, oh, ow})) << describe(p);
    const auto want = naive_avg(c, x.to_vector<double>(), oh, ow), got = y.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << describe(p);

    // The backward is the adjoint: <avg(x), g> == <x, avg_backward(g)> for every x, so check it
    // column by column of the naive forward's matrix (one-hot inputs).
    Tensor gy = randn(y.sizes(), {.dtype = DType::F64}, &gen);
    const auto gx =
        kernels::avg_pool2d_backward(brisk::testing::noncontiguous(gy), x.sizes(), p.kernel, o).to_vector<double>();
    const auto gv = gy.to_vector<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<double> e(static_cast<size_t>(x.numel()), 0.0);
      e[i] = 1.0;
      const auto col = naive_avg(c, e, oh, ow);
      double dot = 0;
      for (size_t k = 0; k < col.size(); ++k) dot += col[k] * gv[k];
      ASSERT_NEAR(gx[i], dot, 1e-12) << describe(p) << " input " << i;
    }
  }
}

TEST(AdaptiveAvgPool2d, UsesPyTorchWindows) {
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5) along each dim.
  Tensor x = arange(0, 25, 1, {.dtype = DType::F64}).reshape({1, 1, 5, 5});
  Tensor y = kernels::adaptive_avg_pool2d(x, 3);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const int64_t s[] = {0, 1, 3}, e[] = {2, 4, 5};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double sum = 0;
      for (int64_t a = s[i]; a < e[i]; ++a)
        for (int64_t b = s[j]; b < e[j]; ++b) sum += xv[a * 5 + b];
      EXPECT_DOUBLE_EQ(yv[i * 3 + j], sum / static_cast<double>((e[i] - s[i]) * (e[j] - s[j])));
    }
  // Output 1x1 is the global mean; output equal to the input is the identity.
  EXPECT_DOUBLE_EQ(kernels::adaptive_avg_pool2d(x, 1).item<double>(), 12.0);
  EXPECT_EQ(kernels::adaptive_avg_pool2d(x, 5).to_vector<double>(), xv);
}

TEST(AdaptiveAvgPool2d, BackwardSpreadsEachGradientOverItsWindow) {
  Generator gen(9);
  Tensor x = randn({2, 3, 7, 10}, {.dtype = DType::F64}, &gen);
  const Size2 out{3, 4};
  Tensor gy = randn({2, 3, 3, 4}, {.dtype = DType::F64}, &gen);
  const auto gx =
      kernels::adaptive_avg_pool2d_backward(brisk::testing::noncontiguous(gy), x.sizes()).to_vector<double>();
  std::vector<double> want(gx.size(), 0.0);
  const auto gv = gy.to_vector<double>();
  for (int64_t pl = 0; pl < 6; ++pl)
    for (int64_t i = 0; i < out.h; ++i)
      for (int64_t j = 0; j < out.w; ++j) {
        const int64_t h0 = static_cast<int64_t>(std::floor(i * 7.0 / 3)),
                      h1 = static_cast<int64_t>(std::ceil((i + 1) * 7.0 / 3));
        const int64_t w0 = static_cast<int64_t>(std::floor(j * 10.0 / 4)),
                      w1 = static_cast<int64_t>(std::ceil((j + 1) * 10.0 / 4));
        for (int64_t a = h0; a < h1; ++a)
          for (int64_t b = w0; b < w1; ++b)
            want[pl * 70 + a * 10 + b] += gv[(pl * 3 + i) * 4 + j] / static_cast<double>((h1 - h0) * (w1 - w0));
      }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(gx[i], want[i], 1e-12) << i;
}

TEST(Pooling, RejectsBadArgumentsNamingOp) {
  auto expect_error = [](const std::function<void()>& f, const std::string& op, const std::string& fragment) {
    try {
      f();
      ADD_FAILURE() << op << ": no error; expected one mentioning " << fragment;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(op), std::string::npos) << msg;
      EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    }
  };
  Tensor x = zeros({1, 2, 5, 5});
  expect_error([&] { kernels::max_pool2d(zeros({2, 5, 5}), 2); }, "max_pool2d", "[2, 5, 5]");
  expect_error([&] { kernels::max_pool2d(x, 6); }, "max_pool2d", "larger than the padded input");
  expect_error([&] { kernels::max_pool2d(x, 2, {.stride = -1}); }, "max_pool2d", "stride");
  expect_error([&] { kernels::max_pool2d(x, 2, {.padding = 2}); }, "max_pool2d", "half the kernel");
  expect_error([&] { kernels::max_pool2d(x, 2, {.dilation = 0}); }, "max_pool2d", "dilation");
  expect_error([&] { kernels::avg_pool2d(x, {0, 2}); }, "avg_pool2d", "kernel");
  expect_error([&] { kernels::avg_pool2d(x, 3, {.padding = -1}); }, "avg_pool2d", "padding");
  expect_error([&] { kernels::adaptive_avg_pool2d(x, {0, 1}); }, "adaptive_avg_pool2d", "output size");
  expect_error(
      [&] {
        kernels::avg_pool2d_backward(zeros({1, 2, 3, 3}), x.sizes(), 2, {});
      },
      "avg_pool2d_backward", "[1, 2, 3, 3]");
}

TEST(Pooling, RejectsDilatedWindowsWithNoTapInsideTheInput) {
  // A 1-wide input, kernel 2 dilated by 2 with padding 1: the taps at -1 and 1 both miss it.
  try {
    kernels::max_pool2d(zeros({1, 1, 4, 1}), {1, 2}, {.stride = 1, .padding = {0, 1}, .dilation = {1, 2}});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tap inside input"), std::string::npos) << e.what();
  }
  // The same kernel on a 3-wide input has a tap inside every window.
  EXPECT_NO_THROW(
      kernels::max_pool2d(zeros({1, 1, 4, 3}), {1, 2}, {.stride = 1, .padding = {0, 1}, .dilation = {1, 2}}));
}

TEST(Pooling, MaxPoolBackwardRejectsIndicesOutsideThePlane) {
  Tensor gy = ones({1, 2, 2, 2});
  Tensor idx = from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 9}, {1, 2, 2, 2});  // 9 >= 3 * 3
  try {
    kernels::max_pool2d_backward(gy, idx, {1, 2, 3, 3});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index out of range (value 9, limit 9)"), std::string::npos) << e.what();
  }
  // The same on the 2x2 / stride 2 shape, whose fast path checks each index against its own
  // window: an index past the plane, or negative, still fails with the same message.
  for (int64_t bad : {int64_t{16}, int64_t{-1}}) {
    Tensor idx4 = from_vector<int64_t>({0, 2, 8, 10, 0, 2, 8, bad}, {1, 2, 2, 2});
    try {
      kernels::max_pool2d_backward(gy, idx4, {1, 2, 4, 4});
      ADD_FAILURE() << "expected an error for index " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("index out of range (value " + std::to_string(bad) + ", limit 16)"),
                std::string::npos)
          << e.what();
    }
  }
}

// The 2x2 / stride 2 f32 path (vectorised where the CPU has AVX-512): every width and height from
// 2 to 37 (rows shorter and longer than a vector, odd sizes whose last row or column is in no
// window), values with ties and NaNs, against the window rule written out: the first strictly
// greater value or any NaN takes over, taps in window order. The backward puts 0 + g on the argmax
// (so a -0 gradient lands as +0, as accumulation into zeros gives) and zeros elsewhere; indices that
// point elsewhere in the plane (a caller's own) still scatter correctly.
TEST(MaxPool2d, TwoByTwoPathMatchesTheWindowRuleOnEveryShape) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Generator gen(11);
  for (int64_t h = 2; h <= 37; h += 5) {
    for (int64_t w = 2; w <= 37; ++w) {
      // Small integers make ties common; a few NaNs.
      Tensor x = randint(0, 4, {2, 3, h, w}, {.dtype = DType::I64}, &gen).to(DType::F32);
      std::vector<float> xv = x.to_vector<float>();
      for (size_t i = 7; i < xv.size(); i += 53) xv[i] = nan;
      x = from_vector<float>(xv, {2, 3, h, w});
      kernels::MaxPool2dResult r = kernels::max_pool2d(x, 2);
      const int64_t oh = h / 2, ow = w / 2;
      const auto yv = r.values.to_vector<float>();
      const auto iv = r.indices.to_vector<int64_t>();
      std::vector<float> gyv(yv.size());
      for (size_t o = 0; o < gyv.size(); ++o) gyv[o] = o % 5 == 0 ? -0.0f : static_cast<float>(o) - 20.0f;
      Tensor gx = kernels::max_pool2d_backward(from_vector<float>(gyv, r.values.sizes()), r.indices, x.sizes());
      const auto gv = gx.to_vector<float>();
      std::vector<float> want_g(xv.size(), 0.0f);
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t taps[4] = {2 * i * w + 2 * j, 2 * i * w + 2 * j + 1, (2 * i + 1) * w + 2 * j,
                                     (2 * i + 1) * w + 2 * j + 1};
            float best = xv[pl * h * w + taps[0]];
            int64_t arg = taps[0];
            for (int t = 1; t < 4; ++t) {
              const float v = xv[pl * h * w + taps[t]];
              if (v > best || std::isnan(v)) best = v, arg = taps[t];
            }
            const int64_t o = (pl * oh + i) * ow + j;
            ASSERT_EQ(iv[o], arg) << "h " << h << " w " << w << " output " << o;
            if (std::isnan(best))
              ASSERT_TRUE(std::isnan(yv[o])) << "h " << h << " w " << w << " output " << o;
            else
              ASSERT_EQ(yv[o], best) << "h " << h << " w " << w << " output " << o;
            want_g[pl * h * w + arg] = 0.0f + gyv[o];
          }
      ASSERT_EQ(0, std::memcmp(gv.data(), want_g.data(), gv.size() * sizeof(float)))
          << "backward, h " << h << " w " << w;
    }
  }
  // Indices a caller made, all pointing at the first element of their plane: summed there.
  Tensor idx = zeros({1, 2, 3, 4}, {.dtype = DType::I64});
  Tensor gx = kernels::max_pool2d_backward(ones({1, 2, 3, 4}), idx, {1, 2, 6, 8});
  const auto gv = gx.to_vector<float>();
  EXPECT_EQ(gv[0], 12.0f);
  EXPECT_EQ(gv[48], 12.0f);
  EXPECT_EQ(std::count(gv.begin(), gv.end(), 0.0f), 96 - 2);
}

namespace {

// The flat index into its plane of tap t of output (oh, ow).
int64_t tap_index(const PoolCase& p, int64_t oh, int64_t ow, int64_t t) {
  const int64_t ih = oh * p.stride.h - p.padding.h + t / p.kernel.w * p.dilation.h;
  const int64_t iw = ow * p.stride.w - p.padding.w + t % p.kernel.w * p.dilation.w;
  return ih * p.w + iw;
}

// Bits of a tensor, so NaNs and -0 compare exactly.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* b = static_cast<const unsigned char*>(c.data_ptr());
  return {b, b + c.numel() * static_cast<int64_t>(dtype_size(c.dtype()))};
}

}  // namespace

// The one-byte taps are the indices in another form: the same values, each tap naming the index's
// input, and the backward's gradient the same bits as the indices' scatter (overlapping windows
// summed in the same order, -0 gradients landing as +0), for every dtype and geometry, ties and
// NaNs included.
TEST(MaxPool2dTaps, SameValuesAndGradientBitsAsTheIndices) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<PoolCase> cases = max_grid();
  for (int64_t h = 2; h <= 37; h += 7)
    for (int64_t w = 2; w <= 37; w += 3) cases.push_back({2, 3, h, w, 2, 2, 0});
  Generator gen(5);
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    for (const PoolCase& p : cases) {
      // Small integers: ties are common; a few NaNs.
      std::vector<float> xv =
          randint(-2, 3, {p.n, p.c, p.h, p.w}, {.dtype = DType::I64}, &gen).to(DType::F32).to_vector<float>();
      for (size_t i = 5; i < xv.size(); i += 41) xv[i] = nan;
      Tensor x = from_vector<float>(xv, {p.n, p.c, p.h, p.w}).to(dt);
      const MaxPool2dOptions o{
          .stride = p.stride, .padding = p.padding, .dilation = p.dilation, .ceil_mode = p.ceil_mode};
      kernels::MaxPool2dResult r = kernels::max_pool2d(x, p.kernel, o);
      kernels::MaxPool2dTaps t = kernels::max_pool2d_taps(brisk::testing::noncontiguous(x), p.kernel, o);
      ASSERT_EQ(t.taps.dtype(), DType::U8);
      ASSERT_EQ(t.taps.sizes(), r.indices.sizes()) << describe(p);
      ASSERT_EQ(bytes_of(t.values), bytes_of(r.values)) << describe(p) << " " << dtype_name(dt);
      const int64_t oh = r.values.size(2), ow = r.values.size(3);
      const auto iv = r.indices.to_vector<int64_t>();
      const auto tv = t.taps.to_vector<int64_t>();
      for (size_t o = 0; o < iv.size(); ++o)
        ASSERT_EQ(tap_index(p, static_cast<int64_t>(o) / ow % oh, static_cast<int64_t>(o) % ow, tv[o]), iv[o])
            << describe(p) << " output " << o;
      std::vector<float> gv(iv.size());
      for (size_t o = 0; o < gv.size(); ++o) gv[o] = o % 7 == 0 ? -0.0f : static_cast<float>(o % 13) - 6.5f;
      Tensor gy = from_vector<float>(gv, r.values.sizes()).to(dt);
      Tensor want = kernels::max_pool2d_backward(gy, r.indices, x.sizes());
      Tensor got = kernels::max_pool2d_taps_backward(brisk::testing::noncontiguous(gy), t.taps, x.sizes(), p.kernel, o);
      ASSERT_EQ(bytes_of(got), bytes_of(want)) << describe(p) << " " << dtype_name(dt);
    }
  }
}

// drop_nonpositive folds relu's backward into the taps: a window whose maximum is not > 0 (0, as
// relu outputs are, or NaN) has no tap and gets no gradient, the same bits as relu's rule applied
// to the pooled gradient before the indices' scatter.
TEST(MaxPool2dTaps, DroppingNonpositiveMaximaIsRelusMask) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Generator gen(6);
  for (const PoolCase& p : max_grid()) {
    std::vector<float> xv =
        randint(-3, 3, {p.n, p.c, p.h, p.w}, {.dtype = DType::I64}, &gen).to(DType::F32).to_vector<float>();
    for (float& v : xv) v = std::max(v, 0.0f);  // a relu output: many windows of zeros
    xv[3] = nan;
    Tensor x = from_vector<float>(xv, {p.n, p.c, p.h, p.w});
    const MaxPool2dOptions o{
        .stride = p.stride, .padding = p.padding, .dilation = p.dilation, .ceil_mode = p.ceil_mode};
    kernels::MaxPool2dResult r = kernels::max_pool2d(x, p.kernel, o);
    kernels::MaxPool2dTaps t = kernels::max_pool2d_taps(x, p.kernel, o, true);
    ASSERT_EQ(bytes_of(t.values), bytes_of(r.values)) << describe(p);
    const auto yv = r.values.to_vector<float>();
    const auto tv = t.taps.to_vector<int64_t>();
    int64_t dropped = 0;
    for (size_t o = 0; o < yv.size(); ++o) {
      ASSERT_EQ(tv[o] == kernels::kMaxPoolDroppedTap, !(yv[o] > 0.0f)) << describe(p) << " output " << o;
      dropped += tv[o] == kernels::kMaxPoolDroppedTap;
    }
    ASSERT_GT(dropped, 0) << describe(p);
    Tensor gy = randn(r.values.sizes(), {}, &gen);
    Tensor masked = kernels::unary_backward(kernels::UnaryOp::Relu, gy, r.values, r.values);
    Tensor want = kernels::max_pool2d_backward(masked, r.indices, x.sizes());
    Tensor got = kernels::max_pool2d_taps_backward(gy, t.taps, x.sizes(), p.kernel, o);
    ASSERT_EQ(bytes_of(got), bytes_of(want)) << describe(p);
  }
}

TEST(MaxPool2dTaps, RejectsTapsOutsideTheirWindowAndUnsupportedWindows) {
  auto expect_error = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "expected an error containing: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Tensor gy = ones({1, 2, 2, 2});
  // 2x2 windows have taps 0-3 (and the dropped code); 4 is no tap of theirs.
  Tensor bad = from_vector<int64_t>({0, 1, 2, 3, 255, 1, 2, 4}, {1, 2, 2, 2}).to(DType::U8);
  expect_error(
      [&] {
        kernels::max_pool2d_taps_backward(gy, bad, {1, 2, 4, 4}, 2);
      },
      "max_pool2d_backward: a tap lies outside its window or the input");
  // With padding 1, output (0, 0)'s tap 0 lies in the padding.
  Tensor pad = zeros({1, 2, 2, 2}, {.dtype = DType::U8});
  expect_error(
      [&] {
        kernels::max_pool2d_taps_backward(gy, pad, {1, 2, 3, 3}, 3, {.stride = 2, .padding = 1});
      },
      "a tap lies outside its window or the input");
  expect_error(
      [&] {
        kernels::max_pool2d_taps_backward(gy, pad.to(DType::I64), {1, 2, 4, 4}, 2);
      },
      "taps must be u8 of shape [1, 2, 2, 2], got i64");
  expect_error(
      [&] {
        kernels::max_pool2d_taps_backward(ones({1, 2, 3, 3}), pad, {1, 2, 4, 4}, 2);
      },
      "does not match the output shape");
  // 16 x 16 = 256 taps do not fit in a byte beside the dropped code: max_pool2d serves them.
  EXPECT_FALSE(kernels::max_pool2d_taps_supported(zeros({1, 1, 16, 16}), 16));
  EXPECT_TRUE(kernels::max_pool2d_taps_supported(zeros({1, 1, 16, 16}), {15, 16}));
  expect_error([&] { kernels::max_pool2d_taps(zeros({1, 1, 16, 16}), 16); }, "use max_pool2d");
}
