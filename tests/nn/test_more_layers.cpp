// GroupNorm, RMSNorm, ConvTranspose2d, Dropout2d, Unflatten, AdaptiveAvgPool2d, GELU/SiLU,
// Identity/Flatten and MultiheadAttention: each against a naive double-precision reference
// written out with loops, and a float64 finite-difference gradient check.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>

#include "common/gradcheck.h"
#include "common/values.h"

using namespace brisk;
using brisk::testing::expect_gradcheck;
using brisk::testing::expect_near;
using brisk::testing::leaf;
using brisk::testing::values;

namespace {

Tensor rand64(const Shape& s) {
  return randn(s, {.dtype = DType::F64});
}

size_t at(std::initializer_list<int64_t> idx, const Shape& s) {
  int64_t off = 0;
  size_t d = 0;
  for (int64_t i : idx) off = off * s[d++] + i;
  return static_cast<size_t>(off);
}

}  // namespace

TEST(GroupNorm, MatchesANaiveReferenceAndGradcheck) {
  manual_seed(1);
  nn::GroupNorm gn(2, 4);
  gn.to(DType::F64);
  {
    NoGradGuard ng;
    copy_(gn.weight, rand64({4}));
    copy_(gn.bias, rand64({4}));
  }
  const Shape s{2, 4, 3, 2};
  Tensor x = rand64(s);
  const auto xs = values(x), w = values(gn.weight), b = values(gn.bias);
  std::vector<double> want(xs.size());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t g = 0; g < 2; ++g) {
      double sum = 0, sq = 0;
      const int64_t cnt = int64_t{2} * 3 * 2;
      for (int64_t c = 2 * g; c < 2 * g + 2; ++c)
        for (int64_t i = 0; i < 6; ++i) sum += xs[at({n, c, i / 2, i % 2}, s)];
      const double mu = sum / cnt;
      for (int64_t c = 2 * g; c < 2 * g + 2; ++c)
        for (int64_t i = 0; i < 6; ++i) sq += std::pow(xs[at({n, c, i / 2, i % 2}, s)] - mu, 2);
      const double inv = 1 / std::sqrt(sq / cnt + 1e-5);
      for (int64_t c = 2 * g; c < 2 * g + 2; ++c)
        for (int64_t i = 0; i < 6; ++i) {
          const size_t k = at({n, c, i / 2, i % 2}, s);
          want[k] = (xs[k] - mu) * inv * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
        }
    }
  expect_near(values(gn(x)), want, 1e-12, "group_norm");
  expect_gradcheck([&](const std::vector<Tensor>& v) { return gn(v[0]); },
                   {leaf(rand64({2, 4, 2, 2})), gn.weight, gn.bias}, "GroupNorm");
  EXPECT_THROW(nn::GroupNorm(3, 4), Error);
  EXPECT_THROW(gn(rand64({2, 3, 2})), Error);
}

TEST(RMSNorm, MatchesANaiveReferenceAndGradcheck) {
  manual_seed(2);
  nn::RMSNorm rms({3}, {.eps = 1e-6});
  rms.to(DType::F64);
  {
    NoGradGuard ng;
    copy_(rms.weight, rand64({3}));
  }
  Tensor x = rand64({2, 2, 3});
  const auto xs = values(x), w = values(rms.weight);
  std::vector<double> want(xs.size());
  for (size_t r = 0; r < 4; ++r) {
    double ms = 0;
    for (size_t i = 0; i < 3; ++i) ms += xs[r * 3 + i] * xs[r * 3 + i] / 3;
    for (size_t i = 0; i < 3; ++i) want[r * 3 + i] = xs[r * 3 + i] / std::sqrt(ms + 1e-6) * w[i];
  }
  expect_near(values(rms(x)), want, 1e-12, "rms_norm");
  expect_gradcheck([&](const std::vector<Tensor>& v) { return rms(v[0]); }, {leaf(rand64({2, 3})), rms.weight},
                   "RMSNorm");
  // eps unset: the dtype's machine epsilon, as torch.nn.RMSNorm(eps=None).
  nn::RMSNorm plain({2}, {.elementwise_affine = false});
  Tensor tiny = from_vector<float>({0.0f, 0.0f}, {1, 2});
  EXPECT_EQ(plain(tiny).to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
  Tensor one = from_vector<float>({1.0f, 1.0f}, {1, 2});
  EXPECT_FLOAT_EQ(plain(one).to_vector<float>()[0], static_cast<float>(1 / std::sqrt(1 + 1.1920929e-07)));
  EXPECT_THROW(plain(rand64({2, 3})), Error);
}

namespace {

// torch.nn.ConvTranspose2d written as a scatter: every input element adds x * w to the outputs
// its kernel window covers.
std::vector<double> naive_conv_transpose(const Tensor& x, const Tensor& w, const Tensor& b, Size2 stride, Size2 pad,
                                         Size2 dil, int64_t groups, const Shape& out) {
  const auto xs = values(x), ws = values(w), bs = b.defined() ? values(b) : std::vector<double>();
  std::vector<double> y(static_cast<size_t>(out[0] * out[1] * out[2] * out[3]), 0.0);
  const int64_t cin = x.size(1), opg = w.size(1), ipg = cin / groups;
  for (int64_t n = 0; n < x.size(0); ++n)
    for (int64_t ic = 0; ic < cin; ++ic)
      for (int64_t ih = 0; ih < x.size(2); ++ih)
        for (int64_t iw = 0; iw < x.size(3); ++iw)
          for (int64_t oc = 0; oc < opg; ++oc)
            for (int64_t kh = 0; kh < w.size(2); ++kh)
              for (int64_t kw = 0; kw < w.size(3); ++kw) {
                const int64_t oh = ih * stride.h - pad.h + kh * dil.h, ow = iw * stride.w - pad.w + kw * dil.w;
                if (oh < 0 || ow < 0 || oh >= out[2] || ow >= out[3]) continue;
                const int64_t c = (ic / ipg) * opg + oc;
                y[at({n, c, oh, ow}, out)] += xs[at({n, ic, ih, iw}, x.sizes())] * ws[at({ic, oc, kh, kw}, w.sizes())];
              }
  if (!bs.empty())
    for (size_t i = 0; i < y.size(); ++i)
      y[i] += bs[(i / static_cast<size_t>(out[2] * out[3])) % static_cast<size_t>(out[1])];
  return y;
}

}  // namespace

TEST(ConvTranspose2d, MatchesANaiveReferenceAndGradcheck) {
  manual_seed(3);
  struct Case {
    int64_t in, out, k;
    nn::ConvTranspose2dOptions o;
  };
  for (const Case& c :
       {Case{4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2}},
        Case{2, 3, 2, {.stride = {1, 2}, .padding = {0, 1}, .dilation = 2, .bias = false}}, Case{3, 2, 1, {}}}) {
    nn::ConvTranspose2d ct(c.in, c.out, c.k, c.o);
    ct.to(DType::F64);
    EXPECT_EQ(ct.weight.sizes(), (Shape{c.in, c.out / c.o.groups, c.k, c.k}));
    Tensor x = rand64({2, c.in, 3, 4});
    Tensor y = ct(x);
    const Size2 s = c.o.stride, p = c.o.padding, d = c.o.dilation, op = c.o.output_padding;
    const Shape want_shape{2, c.out, (3 - 1) * s.h - 2 * p.h + d.h * (c.k - 1) + op.h + 1,
                           (4 - 1) * s.w - 2 * p.w + d.w * (c.k - 1) + op.w + 1};
    ASSERT_EQ(y.sizes(), want_shape);
    expect_near(values(y), naive_conv_transpose(x, ct.weight, ct.bias, s, p, d, c.o.groups, want_shape), 1e-12,
                "conv_transpose2d");
    std::vector<Tensor> inputs{leaf(rand64({1, c.in, 2, 3})), ct.weight};
    if (ct.bias.defined()) inputs.push_back(ct.bias);
    expect_gradcheck([&](const std::vector<Tensor>& v) { return ct(v[0]); }, inputs, "ConvTranspose2d");
  }
  // The parameters are PyTorch's: weight (in, out / groups, kh, kw), bias (out).
  nn::ConvTranspose2d ct(4, 6, 3, {.groups = 2});
  auto sd = ct.state_dict();
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "weight");
  EXPECT_EQ(sd[1].second.sizes(), (Shape{6}));
  EXPECT_THROW(nn::ConvTranspose2d(3, 6, 3, {.groups = 2}), Error);
  nn::ConvTranspose2d bad_pad(2, 2, 3, {.stride = 2, .output_padding = 2});
  EXPECT_THROW(bad_pad(randn({1, 2, 3, 3})), Error);
}

TEST(Dropout2d, DropsWholeChannelsAndGradcheck) {
  manual_seed(4);
  nn::Dropout2d drop(0.5);
  Tensor x = ones({8, 16, 3, 3}, {.dtype = DType::F64});
  const auto y = values(drop(x));
  int64_t kept = 0;
  for (size_t plane = 0; plane < size_t{8} * 16; ++plane) {
    const double first = y[plane * 9];
    EXPECT_TRUE(first == 0.0 || first == 2.0) << first;
    for (size_t i = 1; i < 9; ++i) EXPECT_EQ(y[plane * 9 + i], first) << "plane " << plane;
    kept += first != 0;
  }
  EXPECT_GT(kept, 30);
  EXPECT_LT(kept, 98);
  drop.eval();
  EXPECT_EQ(values(drop(x)), values(x));
  drop.train();
  // A fixed seed per call gives the same planes every call: the check sees one function.
  expect_gradcheck(
      [&](const std::vector<Tensor>& v) {
        manual_seed(9);
        return drop(v[0]);
      },
      {leaf(rand64({2, 3, 2, 2}))}, "Dropout2d");
  EXPECT_THROW(drop(rand64({2, 3})), Error);
}

TEST(Unflatten, InvertsFlattenAndGradcheck) {
  Tensor x = rand64({2, 12, 3});
  nn::Unflatten u(1, {3, -1});
  Tensor y = u(x);
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 4, 3}));
  EXPECT_EQ(values(y), values(x));  // C order: the same elements in the same order
  EXPECT_EQ(values(nn::Flatten(1, 2)(y)), values(x));
  EXPECT_EQ(nn::Unflatten(-1, {1, 3})(x).sizes(), (Shape{2, 12, 1, 3}));
  expect_gradcheck([&](const std::vector<Tensor>& v) { return u(v[0]) * 2.0; }, {leaf(rand64({1, 6, 2}))}, "Unflatten");
  EXPECT_THROW(nn::Unflatten(1, {5, 2})(x), Error);
  EXPECT_THROW(nn::Unflatten(3, {1})(x), Error);
}

TEST(AdaptiveAvgPool2d, MatchesANaiveReferenceAndGradcheck) {
  nn::AdaptiveAvgPool2d pool({3, 4});
  const Shape s{1, 2, 5, 7};
  Tensor x = rand64(s);
  const auto xs = values(x);
  std::vector<double> want;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t h0 = i * 5 / 3, h1 = ((i + 1) * 5 + 2) / 3, w0 = j * 7 / 4, w1 = ((j + 1) * 7 + 3) / 4;
        double sum = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += xs[at({0, c, h, w}, s)];
        want.push_back(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  expect_near(values(pool(x)), want, 1e-12, "adaptive_avg_pool2d");
  expect_gradcheck([&](const std::vector<Tensor>& v) { return pool(v[0]); }, {leaf(rand64({1, 1, 5, 6}))},
                   "AdaptiveAvgPool2d");
}

TEST(ActivationModules, GeluSiluIdentityFlattenMatchFormulasAndGradcheck) {
  Tensor x = rand64({2, 3, 2});
  const auto xs = values(x);
  std::vector<double> gelu_want, tanh_want, silu_want;
  for (double v : xs) {
    gelu_want.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    tanh_want.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    silu_want.push_back(v / (1 + std::exp(-v)));
  }
  nn::GELU gelu;
  nn::GELU gelu_tanh(GeluApproximation::Tanh);
  nn::SiLU silu;
  nn::Identity id;
  nn::Flatten flat;
  expect_near(values(gelu(x)), gelu_want, 1e-12, "GELU");
  expect_near(values(gelu_tanh(x)), tanh_want, 1e-12, "GELU tanh");
  expect_near(values(silu(x)), silu_want, 1e-12, "SiLU");
  EXPECT_EQ(values(id(x)), xs);
  EXPECT_EQ(flat(x).sizes(), (Shape{2, 6}));
  EXPECT_EQ(values(flat(x)), xs);
  for (nn::Module* m : std::vector<nn::Module*>{&gelu, &gelu_tanh, &silu, &id, &flat})
    expect_gradcheck([&](const std::vector<Tensor>& v) { return (*m)(v[0]) * 1.5; }, {leaf(rand64({2, 2, 2}))},
                     m->name());
}

namespace {

// torch.nn.MultiheadAttention with loops, batch first (N, L, E): bool masks (true = blocked).
std::pair<std::vector<double>, std::vector<double>> naive_mha(nn::MultiheadAttention& m, const Tensor& q,
                                                              const Tensor& k, const Tensor& v,
                                                              const std::vector<char>& attn_mask,
                                                              const std::vector<char>& padding) {
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1), E = m.embed_dim, H = m.num_heads, hd = E / H;
  const auto qs = values(q), ks = values(k), vs = values(v), w = values(m.in_proj_weight), b = values(m.in_proj_bias),
             ow = values(m.out_proj.weight), ob = values(m.out_proj.bias);
  auto proj = [&](const std::vector<double>& in, int64_t len, int64_t n, int64_t t, int64_t part, int64_t o) {
    double s = b[static_cast<size_t>(part * E + o)];
    for (int64_t c = 0; c < E; ++c)
      s += in[static_cast<size_t>((n * len + t) * E + c)] * w[static_cast<size_t>((part * E + o) * E + c)];
    return s;
  };
  std::vector<double> out(static_cast<size_t>(N * L * E)), weights(static_cast<size_t>(N * L * S), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < L; ++t) {
      std::vector<double> y(static_cast<size_t>(E), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> sc(static_cast<size_t>(S));
        std::vector<char> ok(static_cast<size_t>(S));
        double mx = -INFINITY, z = 0;
        for (int64_t s = 0; s < S; ++s) {
          ok[static_cast<size_t>(s)] = !(!attn_mask.empty() && attn_mask[static_cast<size_t>(t * S + s)]) &&
                                       !(!padding.empty() && padding[static_cast<size_t>(n * S + s)]);
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += proj(qs, L, n, t, 0, h * hd + i) * proj(ks, S, n, s, 1, h * hd + i);
          sc[static_cast<size_t>(s)] = d / std::sqrt(static_cast<double>(hd));
          if (ok[static_cast<size_t>(s)]) mx = std::max(mx, sc[static_cast<size_t>(s)]);
        }
        for (int64_t s = 0; s < S; ++s)
          if (ok[static_cast<size_t>(s)]) z += std::exp(sc[static_cast<size_t>(s)] - mx);
        for (int64_t s = 0; s < S; ++s) {
          const double p = ok[static_cast<size_t>(s)] ? std::exp(sc[static_cast<size_t>(s)] - mx) / z : 0.0;
          weights[static_cast<size_t>((n * L + t) * S + s)] += p / static_cast<double>(H);
          for (int64_t i = 0; i < hd; ++i) y[static_cast<size_t>(h * hd + i)] += p * proj(vs, S, n, s, 2, h * hd + i);
        }
      }
      for (int64_t o = 0; o < E; ++o) {
        double s = ob[static_cast<size_t>(o)];
        for (int64_t c = 0; c < E; ++c) s += y[static_cast<size_t>(c)] * ow[static_cast<size_t>(o * E + c)];
        out[static_cast<size_t>((n * L + t) * E + o)] = s;
      }
    }
  return {out, weights};
}

Tensor bools(const std::vector<char>& v, const Shape& s) {
  return kernels::cast(from_vector<uint8_t>(std::vector<uint8_t>(v.begin(), v.end()), s), DType::Bool);
}

}  // namespace

TEST(MultiheadAttention, MatchesANaiveReferenceInBothLayouts) {
  manual_seed(5);
  nn::MultiheadAttention first(8, 2, {.batch_first = true});
  first.to(DType::F64);
  {
    NoGradGuard ng;
    copy_(first.in_proj_bias, rand64({24}) * 0.1);
    copy_(first.out_proj.bias, rand64({8}) * 0.1);
  }
  const int64_t N = 2, L = 3, S = 4;
  Tensor q = rand64({N, L, 8}), k = rand64({N, S, 8}), v = rand64({N, S, 8});
  std::vector<char> mask = {0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0};  // (L, S)
  std::vector<char> pad = {0, 0, 0, 1, 0, 0, 0, 0};               // (N, S)
  auto [want, want_w] = naive_mha(first, q, k, v, {}, {});
  auto [y, w] = first(q, k, v);
  expect_near(values(y), want, 1e-12, "mha");
  expect_near(values(w), want_w, 1e-12, "mha weights");
  auto [want_m, want_mw] = naive_mha(first, q, k, v, mask, pad);
  auto [ym, wm] = first(q, k, v, bools(pad, {N, S}), true, bools(mask, {L, S}));
  expect_near(values(ym), want_m, 1e-12, "mha masked");
  expect_near(values(wm), want_mw, 1e-12, "mha masked weights");
  // Additive float masks are the same; per-head weights average to the returned ones.
  Tensor fmask = masked_fill(zeros({L, S}, {.dtype = DType::F64}), bools(mask, {L, S}), -INFINITY);
  auto [yf, per_head] = first(q, k, v, bools(pad, {N, S}), true, fmask, false);
  expect_near(values(yf), want_m, 1e-12, "mha float mask");
  EXPECT_EQ(per_head.sizes(), (Shape{N, 2, L, S}));
  expect_near(values(per_head.mean({1})), want_mw, 1e-12, "mha per-head weights");
  EXPECT_FALSE(std::get<1>(first(q, k, v, Tensor(), false)).defined());

  // PyTorch's default layout (L, N, E), from the same parameters.
  nn::MultiheadAttention seq(8, 2);
  seq.to(DType::F64);
  seq.load_state_dict(first.state_dict());
  auto [ys, ws] =
      seq(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), bools(pad, {N, S}), true, bools(mask, {L, S}));
  EXPECT_EQ(ys.sizes(), (Shape{L, N, 8}));
  expect_near(values(ys.transpose(0, 1)), want_m, 1e-12, "mha (L, N, E)");
  std::vector<std::string> names;
  for (auto& [name, t] : seq.state_dict()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  // m(x): self-attention, the output alone.
  expect_near(values(first(q)), naive_mha(first, q, q, q, {}, {}).first, 1e-12, "self-attention");
}

TEST(MultiheadAttention, GradcheckAndBadShapes) {
  manual_seed(6);
  nn::MultiheadAttention mha(4, 2, {.batch_first = true});
  mha.to(DType::F64);
  Tensor pad = bools({0, 0, 1, 0, 0, 0}, {2, 3});
  expect_gradcheck([&](const std::vector<Tensor>& v) { return std::get<0>(mha(v[0], v[1], v[2], pad)); },
                   {leaf(rand64({2, 2, 4})), leaf(rand64({2, 3, 4})), leaf(rand64({2, 3, 4})), mha.in_proj_weight},
                   "MultiheadAttention");
  EXPECT_THROW(mha(rand64({2, 2, 5}), rand64({2, 3, 4}), rand64({2, 3, 4})), Error);
  EXPECT_THROW(mha(rand64({2, 2, 4}), rand64({2, 3, 4}), rand64({2, 3, 4}), bools({0, 0}, {1, 2})), Error);
  EXPECT_THROW(nn::MultiheadAttention(6, 4), Error);
}
