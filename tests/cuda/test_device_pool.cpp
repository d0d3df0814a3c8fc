// The pooling and conv-bias index math of the CUDA kernels (brisk/kernels/device/pool.h), run on
// the host against the CPU kernels over many geometries: each per-element function must give
// the CPU's result bit for bit (same taps, same order of additions), the max-pool backward's
// warp scheme must add gradients in the CPU's order, and the bias gradient's per-block plan
// must read every element exactly once. In recording mode: what the conv family's GPU path
// issues (cuDNN calls, kernels, copies).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/conv.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/device/convert.h>
#include <brisk/kernels/device/pool.h>
#include <brisk/kernels/device/reduce.h>
#include <brisk/kernels/elementwise.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace brisk;
namespace dev = brisk::kernels::device;

namespace {

struct Geometry {
  int64_t n, c, h, w;
  Size2 kernel, stride, padding, dilation;
  bool ceil_mode;
  std::string str() const {
    std::ostringstream os;
    os << "x (" << n << ", " << c << ", " << h << ", " << w << ") kernel " << kernel << " stride " << stride << " pad "
       << padding << " dil " << dilation << (ceil_mode ? " ceil" : "");
    return os.str();
  }
};

// Random geometries the public ops accept (dilated kernel within the padded input, padding at
// most half the dilated kernel). `dilate`: allow dilation (average pooling has none).
std::vector<Geometry> geometries(int count, bool dilate, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  std::vector<Geometry> out;
  while (static_cast<int>(out.size()) < count) {
    Geometry g{pick(1, 2),
               pick(1, 3),
               pick(1, 12),
               pick(1, 12),
               {pick(1, 4), pick(1, 4)},
               {pick(1, 3), pick(1, 3)},
               {0, 0},
               {dilate ? pick(1, 2) : 1, dilate ? pick(1, 2) : 1},
               pick(0, 1) == 1};
    const int64_t eh = g.dilation.h * (g.kernel.h - 1) + 1, ew = g.dilation.w * (g.kernel.w - 1) + 1;
    g.padding = {pick(0, static_cast<int>(eh / 2)), pick(0, static_cast<int>(ew / 2))};
    if (eh > g.h + 2 * g.padding.h || ew > g.w + 2 * g.padding.w) continue;
    out.push_back(g);
  }
  return out;
}

dev::PoolShape shape_of(const Geometry& g) {
  dev::PoolShape s;
  s.h = g.h, s.w = g.w;
  s.kh = g.kernel.h, s.kw = g.kernel.w, s.sh = g.stride.h, s.sw = g.stride.w;
  s.ph = g.padding.h, s.pw = g.padding.w, s.dh = g.dilation.h, s.dw = g.dilation.w;
  s.oh = kernels::pool_output_size(g.h, s.kh, s.sh, s.ph, s.dh, g.ceil_mode);
  s.ow = kernels::pool_output_size(g.w, s.kw, s.sw, s.pw, s.dw, g.ceil_mode);
  return s;
}

// Small integers (many ties) with some NaN and -inf sprinkled in, as f64 values.
std::vector<double> tied_values(int64_t n, std::mt19937& rng, bool specials) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    const int r = std::uniform_int_distribution<int>(0, 39)(rng);
    x = specials && r == 0 ? std::nan("") : specials && r == 1 ? -INFINITY : static_cast<double>(r % 7 - 3);
  }
  return v;
}

std::vector<double> random_values(int64_t n, std::mt19937& rng) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = std::uniform_real_distribution<double>(-2, 2)(rng);
  return v;
}

// Bitwise equality of two values of T, NaN matching NaN.
template <class T>
bool same_bits(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b)) return true;
  } else {
    if (std::isnan(static_cast<float>(a)) && std::isnan(static_cast<float>(b))) return true;
  }
  // Bit for bit on purpose (-0 vs +0 differ): NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Runs the pooling checks for storage type T (f32, or bf16 computing in f32).
template <class T>
void check_max_forward(DType dt) {
  using A = acc_t<T>;
  std::mt19937 rng(11);
  for (const Geometry& g : geometries(300, true, 1)) {
    SCOPED_TRACE(g.str());
    const dev::PoolShape s = shape_of(g);
    Tensor x = from_vector<double>(tied_values(g.n * g.c * g.h * g.w, rng, true), {g.n, g.c, g.h, g.w}).to(dt);
    kernels::MaxPool2dResult r;
    try {
      r = kernels::max_pool2d(
          x, g.kernel, {.stride = g.stride, .padding = g.padding, .dilation = g.dilation, .ceil_mode = g.ceil_mode});
    } catch (const Error&) {
      continue;  // a dilated window with no tap inside the input: rejected by the op
    }
    ASSERT_EQ(r.values.sizes(), (Shape{g.n, g.c, s.oh, s.ow}));
    const T* xv = x.data<T>();
    const T* vals = r.values.data<T>();
    const int64_t* idx = r.indices.data<int64_t>();
    for (int64_t p = 0; p < g.n * g.c; ++p) {
      auto load = [&](int64_t y, int64_t xx) { return dev::to_acc(xv[p * g.h * g.w + y * g.w + xx]); };
      for (int64_t oh = 0; oh < s.oh; ++oh)
        for (int64_t ow = 0; ow < s.ow; ++ow) {
          const dev::MaxAt<A> m = dev::max_window<A>(s, oh, ow, load);
          const int64_t o = (p * s.oh + oh) * s.ow + ow;
          ASSERT_TRUE(same_bits(dev::from_acc<T>(m.value), vals[o]))
              << "plane " << p << " (" << oh << ", " << ow << ")";
          ASSERT_EQ(m.index, idx[o]) << "plane " << p << " (" << oh << ", " << ow << ")";
        }
    }
  }
}

// The warp scheme of the max-pool backward kernel, emulated: per plane, 32 outputs at a time;
// lanes with the same target form a group whose lowest lane adds the group's values in lane order.
template <class T>
std::vector<T> emulate_max_backward(const Tensor& gy, const Tensor& indices, int64_t planes, int64_t in_plane) {
  using A = acc_t<T>;
  const int64_t out_plane = gy.numel() / planes;
  const T* g = gy.data<T>();
  const int64_t* idx = indices.data<int64_t>();
  std::vector<A> acc(static_cast<size_t>(planes * in_plane), A(0));
  for (int64_t p = 0; p < planes; ++p) {
    A* accp = acc.data() + p * in_plane;
    for (int64_t base = 0; base < out_plane; base += 32) {
      int64_t target[32];
      A vals[32];
      for (int lane = 0; lane < 32; ++lane) {
        const int64_t o = base + lane;
        target[lane] = o < out_plane ? idx[p * out_plane + o] : -1;
        vals[lane] = o < out_plane ? dev::to_acc(g[p * out_plane + o]) : A(0);
      }
      for (int lane = 0; lane < 32; ++lane) {
        uint32_t peers = 0;  // what __match_any_sync returns to this lane
        for (int l = 0; l < 32; ++l)
          if (target[l] == target[lane]) peers |= uint32_t{1} << l;
        const bool leader = (peers & ((uint32_t{1} << lane) - 1)) == 0;
        if (target[lane] >= 0 && leader) dev::add_peers_in_order(accp, target[lane], peers, vals);
      }
    }
  }
  std::vector<T> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = dev::from_acc<T>(acc[i]);
  return out;
}

template <class T>
void check_max_backward(DType dt) {
  std::mt19937 rng(12);
  for (const Geometry& g : geometries(200, true, 2)) {
    SCOPED_TRACE(g.str());
    Tensor x = from_vector<double>(tied_values(g.n * g.c * g.h * g.w, rng, false), {g.n, g.c, g.h, g.w}).to(dt);
    kernels::MaxPool2dResult r;
    try {
      r = kernels::max_pool2d(
          x, g.kernel, {.stride = g.stride, .padding = g.padding, .dilation = g.dilation, .ceil_mode = g.ceil_mode});
    } catch (const Error&) {
      continue;  // a dilated window with no tap inside the input: rejected by the op
    }
    Tensor gy = from_vector<double>(random_values(r.values.numel(), rng), r.values.sizes()).to(dt);
    Tensor want = kernels::max_pool2d_backward(gy, r.indices, x.sizes());
    const std::vector<T> got = emulate_max_backward<T>(gy, r.indices, g.n * g.c, g.h * g.w);
    const T* w = want.data<T>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_bits(got[i], w[i])) << "element " << i;
  }
}

template <class T>
void check_avg(DType dt) {
  using A = acc_t<T>;
  std::mt19937 rng(13);
  for (const Geometry& g : geometries(300, false, 3)) {
    for (bool cip : {true, false}) {
      SCOPED_TRACE(g.str() + (cip ? " count_include_pad" : ""));
      const dev::PoolShape s = shape_of(g);
      const AvgPool2dOptions o{
          .stride = g.stride, .padding = g.padding, .ceil_mode = g.ceil_mode, .count_include_pad = cip};
      Tensor x = from_vector<double>(random_values(g.n * g.c * g.h * g.w, rng), {g.n, g.c, g.h, g.w}).to(dt);
      Tensor y = kernels::avg_pool2d(x, g.kernel, o);
      Tensor gy = from_vector<double>(random_values(y.numel(), rng), y.sizes()).to(dt);
      Tensor gx = kernels::avg_pool2d_backward(gy, x.sizes(), g.kernel, o);
      const T *xv = x.data<T>(), *yv = y.data<T>(), *gyv = gy.data<T>(), *gxv = gx.data<T>();
      for (int64_t p = 0; p < g.n * g.c; ++p) {
        auto load_x = [&](int64_t r, int64_t c) { return dev::to_acc(xv[(p * g.h + r) * g.w + c]); };
        auto load_gy = [&](int64_t r, int64_t c) { return dev::to_acc(gyv[(p * s.oh + r) * s.ow + c]); };
        for (int64_t oh = 0; oh < s.oh; ++oh)
          for (int64_t ow = 0; ow < s.ow; ++ow) {
            const dev::AvgWindow win = dev::avg_window(s, cip, oh, ow);
            const A sum = dev::window_sum<A>(win.h0, win.h1, win.w0, win.w1, load_x);
            const T v = dev::from_acc<T>(win.divisor > 0 ? sum / static_cast<A>(win.divisor) : A(0));
            ASSERT_TRUE(same_bits(v, yv[(p * s.oh + oh) * s.ow + ow])) << "forward (" << oh << ", " << ow << ")";
          }
        for (int64_t ih = 0; ih < g.h; ++ih)
          for (int64_t iw = 0; iw < g.w; ++iw) {
            const T v = dev::from_acc<T>(dev::avg_backward_at<A>(s, cip, ih, iw, load_gy));
            ASSERT_TRUE(same_bits(v, gxv[(p * g.h + ih) * g.w + iw])) << "backward (" << ih << ", " << iw << ")";
          }
      }
    }
  }
}

template <class T>
void check_adaptive(DType dt) {
  using A = acc_t<T>;
  std::mt19937 rng(14);
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (int trial = 0; trial < 300; ++trial) {
    dev::PoolShape s;
    s.h = pick(1, 11), s.w = pick(1, 11), s.oh = pick(1, 11), s.ow = pick(1, 11);
    const int64_t planes = pick(1, 3);
    SCOPED_TRACE("(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ") -> (" + std::to_string(s.oh) + ", " +
                 std::to_string(s.ow) + ")");
    Tensor x = from_vector<double>(random_values(planes * s.h * s.w, rng), {1, planes, s.h, s.w}).to(dt);
    Tensor y = kernels::adaptive_avg_pool2d(x, {s.oh, s.ow});
    Tensor gy = from_vector<double>(random_values(y.numel(), rng), y.sizes()).to(dt);
    Tensor gx = kernels::adaptive_avg_pool2d_backward(gy, x.sizes());
    const T *xv = x.data<T>(), *yv = y.data<T>(), *gyv = gy.data<T>(), *gxv = gx.data<T>();
    for (int64_t p = 0; p < planes; ++p) {
      auto load_x = [&](int64_t r, int64_t c) { return dev::to_acc(xv[(p * s.h + r) * s.w + c]); };
      auto load_gy = [&](int64_t r, int64_t c) { return dev::to_acc(gyv[(p * s.oh + r) * s.ow + c]); };
      for (int64_t oh = 0; oh < s.oh; ++oh)
        for (int64_t ow = 0; ow < s.ow; ++ow)
          ASSERT_TRUE(
              same_bits(dev::from_acc<T>(dev::adaptive_avg_at<A>(s, oh, ow, load_x)), yv[(p * s.oh + oh) * s.ow + ow]));
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t iw = 0; iw < s.w; ++iw)
          ASSERT_TRUE(same_bits(dev::from_acc<T>(dev::adaptive_avg_backward_at<A>(s, ih, iw, load_gy)),
                                gxv[(p * s.h + ih) * s.w + iw]))
              << "backward (" << ih << ", " << iw << ")";
    }
  }
}

}  // namespace

TEST(DevicePool, MaxWindowMatchesTheCpuBitForBitWithTiesNaNAndInfinities) {
  check_max_forward<float>(DType::F32);
  check_max_forward<BFloat16>(DType::BF16);
}

TEST(DevicePool, MaxBackwardWarpSchemeAddsInTheCpuOrder) {
  check_max_backward<float>(DType::F32);
  check_max_backward<Half>(DType::F16);
}

TEST(DevicePool, AvgWindowsAndGatheredGradientsMatchTheCpu) {
  check_avg<float>(DType::F32);
  check_avg<BFloat16>(DType::BF16);
}

TEST(DevicePool, AdaptiveWindowsAndGatheredGradientsMatchTheCpu) {
  check_adaptive<float>(DType::F32);
  check_adaptive<Half>(DType::F16);
}

TEST(DevicePool, WindowsContainingFindsExactlyTheCoveringOutputs) {
  for (int64_t k = 1; k <= 5; ++k)
    for (int64_t s = 1; s <= 4; ++s)
      for (int64_t p = 0; p <= k / 2; ++p)
        for (int64_t n_out = 1; n_out <= 8; ++n_out)
          for (int64_t i = 0; i < 20; ++i) {
            const dev::OutRange r = dev::windows_containing(i, k, s, p, n_out);
            for (int64_t o = 0; o < n_out; ++o) {
              const bool covers = o * s - p <= i && i < o * s - p + k;
              EXPECT_EQ(covers, o >= r.lo && o <= r.hi) << "i " << i << " o " << o << " k " << k << " s " << s;
            }
          }
}

TEST(DevicePool, FirstInsideAndStridedOffsets) {
  EXPECT_EQ(dev::first_inside(3, 2), 3);
  EXPECT_EQ(dev::first_inside(-3, 2), 1);
  EXPECT_EQ(dev::first_inside(-4, 2), 0);
  EXPECT_EQ(dev::first_inside(-1, 3), 2);
  // A channels-last view: (N, C, H, W) sizes over (N, H, W, C) memory.
  Tensor t = zeros({2, 4, 5, 3}).permute({0, 3, 1, 2});
  const dev::NchwStrides s{t.size(1), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_EQ(s.at(n * 3 + c, 2, 4), n * t.stride(0) + c * t.stride(1) + 2 * t.stride(2) + 4 * t.stride(3));
}

TEST(DevicePool, BiasGradPlanReadsEachElementOnceAndMatchesTheCpu) {
  constexpr int kThreads = 256;  // the kernel's block size
  std::mt19937 rng(15);
  for (Shape ys : {Shape{2, 3, 5, 7}, Shape{1, 4, 1, 1}, Shape{5, 2, 16, 17}, Shape{0, 3, 4, 4}}) {
    const int64_t n = ys[0], channels = ys[1], hw = ys[2] * ys[3];
    Tensor gy = from_vector<double>(random_values(shape_numel(ys), rng), ys).to(DType::F32);
    const float* g = gy.data<float>();
    std::vector<int> reads(static_cast<size_t>(gy.numel()), 0);
    // The CPU's bias gradient, from the conv backward with a 1x1 kernel (output = input shape).
    Tensor x = zeros({n, 1, ys[2], ys[3]}), w = zeros({channels, 1, 1, 1});
    Tensor want = kernels::conv2d_backward(gy, x, w, {}, false, false, true).bias;
    for (int64_t c = 0; c < channels; ++c) {
      std::vector<float> partial(kThreads, 0.0f);
      for (int t = 0; t < kThreads; ++t)
        for (int64_t e = t; e < n * hw; e += kThreads) {
          const int64_t off = dev::channel_element(e, c, channels, hw);
          ASSERT_EQ(off / hw % channels, c) << "element of another channel";
          ++reads[static_cast<size_t>(off)];
          partial[static_cast<size_t>(t)] += g[off];
        }
      const float got = dev::emulate_block_reduce<dev::SumOp<float>>(partial);
      const float cpu = want.data<float>()[c];
      EXPECT_NEAR(got, cpu, 1e-5 * (1 + std::fabs(cpu))) << "channel " << c << " of " << shape_str(ys);
    }
    for (size_t i = 0; i < reads.size(); ++i) ASSERT_EQ(reads[i], 1) << "element " << i << " of " << shape_str(ys);
  }
}

// --- recording mode: what the conv family's GPU path issues ------------------------------------------

namespace {
std::map<std::string, int> names(const cuda::recording::Session& rec, cuda::recording::Kind k) {
  std::map<std::string, int> m;
  for (const auto& e : rec.entries(k)) ++m[e.name];
  return m;
}
}  // namespace

TEST(ConvRecording, ForwardLoadsTheBiasThenAccumulatesTheConvolution) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    Tensor x = kernels::to_device(zeros({2, 4, 9, 9}, {.dtype = dt}), cuda_device(0));
    Tensor w = kernels::to_device(zeros({6, 2, 3, 3}, {.dtype = dt}), cuda_device(0));
    Tensor b = kernels::to_device(zeros({6}, {.dtype = dt}), cuda_device(0));
    rec.clear();
    Tensor y = kernels::conv2d(x, w, b, {.stride = 2, .padding = 1, .groups = 2});
    EXPECT_EQ(y.sizes(), (Shape{2, 6, 5, 5}));
    EXPECT_EQ(y.dtype(), dt) << "the GPU keeps the input's dtype";
    auto lib = names(rec, cuda::recording::Kind::Library);
    EXPECT_EQ(lib["cudnnConvolutionForward"], 1) << dtype_name(dt);
    EXPECT_EQ(names(rec, cuda::recording::Kind::Launch)["copy"], 1) << "the bias broadcast into y";
    const auto all = rec.entries();
    size_t copy_at = all.size(), conv_at = all.size();
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].name == "copy" && copy_at == all.size()) copy_at = i;
      if (all[i].name == "cudnnConvolutionForward") conv_at = i;
    }
    EXPECT_LT(copy_at, conv_at) << "the bias is loaded before the convolution adds onto it";
    rec.clear();
    kernels::Conv2dGrads r =
        kernels::conv2d_backward(kernels::to_device(zeros({2, 6, 5, 5}, {.dtype = dt}), cuda_device(0)), x, w,
                                 {.stride = 2, .padding = 1, .groups = 2}, true, true, true);
    lib = names(rec, cuda::recording::Kind::Library);
    EXPECT_EQ(lib["cudnnConvolutionBackwardData"], 1);
    EXPECT_EQ(lib["cudnnConvolutionBackwardFilter"], 1);
    auto launches = names(rec, cuda::recording::Kind::Launch);
    EXPECT_EQ(launches["conv2d_bias_grad"], 1);
    EXPECT_EQ(r.input.sizes(), x.sizes());
    EXPECT_EQ(r.weight.sizes(), w.sizes());
    EXPECT_EQ(r.bias.sizes(), (Shape{6}));
  }
}

TEST(ConvRecording, CudnnRejectsNothingOurGeometryAccepts) {
  // Descriptors are host objects: building them (and cuDNN's own output-size check) runs while
  // recording, over a grid of strides, paddings, dilations and groups.
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  for (int64_t k : {1, 3, 5})
    for (int64_t s : {1, 2, 3})
      for (int64_t d : {1, 2})
        for (int64_t groups : {1, 2}) {
          const int64_t p = k / 2;
          Tensor x = kernels::to_device(zeros({1, 4, 11, 8}), cuda_device(0));
          Tensor w = kernels::to_device(zeros({4, 4 / groups, k, k}), cuda_device(0));
          const Conv2dOptions o{.stride = s, .padding = {p, 0}, .dilation = d, .groups = groups};
          if (d * (k - 1) + 1 > 8) continue;
          EXPECT_NO_THROW(kernels::conv2d(x, w, Tensor(), o)) << "k " << k << " s " << s << " d " << d;
        }
}

TEST(ConvRecording, PoolingLaunchesItsKernels) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  Tensor x = kernels::to_device(zeros({2, 3, 8, 8}, {.dtype = DType::BF16}), cuda_device(0));
  rec.clear();
  auto r = kernels::max_pool2d(x, 2);
  kernels::max_pool2d_backward(r.values, r.indices, x.sizes());
  auto launches = names(rec, cuda::recording::Kind::Launch);
  EXPECT_EQ(launches["max_pool2d"], 1);
  EXPECT_EQ(launches["max_pool2d_backward"], 1);
  EXPECT_EQ(launches["max_pool2d_backward_round"], 1) << "bf16 accumulates in an f32 scratch";
  EXPECT_EQ(rec.count(cuda::recording::Kind::Memset), 1u) << "the scratch starts at zero";
  for (const auto& e : rec.entries(cuda::recording::Kind::Launch))
    if (e.name == "max_pool2d_backward") {
      EXPECT_EQ(e.block[0], 256u) << "8 warps, one plane each";
    }
}
