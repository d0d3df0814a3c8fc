// Modules whose forward takes several inputs or returns several outputs (CallableModule), with
// hooks, to(), state dicts; and the attention masks of CausalSelfAttention / TransformerBlock.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>

#include "common/gradcheck.h"
#include "common/values.h"

using namespace brisk;
using brisk::testing::expect_near;
using brisk::testing::values;

namespace {

// Two inputs, two outputs; the single-tensor forward stays the usual override.
struct Classifier : nn::CallableModule<Classifier> {
  nn::Linear fc{4, 3};
  Classifier() { register_modules({{"fc", fc}}); }
  Tensor forward(const Tensor& x) override { return fc(x); }
  std::tuple<Tensor, Tensor> forward(const Tensor& x, const Tensor& target) {
    Tensor logits = fc(x);
    return {logits, mse_loss(logits, target)};
  }
  // A masked variant with a non-tensor argument and an optional tensor.
  Tensor forward(const Tensor& x, std::optional<Tensor> mask, double scale) {
    Tensor y = fc(x) * scale;
    return mask ? y * (*mask) : y;
  }
};

}  // namespace

TEST(CallableModule, SeveralInputsAndOutputsWithHooks) {
  manual_seed(1);
  Classifier net;
  Tensor x = randn({5, 4}), target = randn({5, 3});
  std::vector<size_t> pre_sizes, post_sizes;
  int single_pre = 0, single_post = 0, backward_calls = 0;
  Shape first_in;
  net.register_forward_pre_hook([&](nn::Module&, const nn::TensorList& in) { pre_sizes.push_back(in.size()); });
  net.register_forward_hook([&](nn::Module&, const nn::TensorList& in, const nn::TensorList& out) {
    EXPECT_EQ(in.size(), pre_sizes.back());
    post_sizes.push_back(out.size());
  });
  net.register_forward_pre_hook([&](nn::Module&, const Tensor& in) {
    ++single_pre;
    first_in = in.sizes();
  });
  net.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++single_post; });
  net.register_backward_hook([&](nn::Module&, const Tensor&) { ++backward_calls; });

  auto [logits, loss] = net(x, target);
  EXPECT_EQ(logits.sizes(), (Shape{5, 3}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_EQ(pre_sizes, (std::vector<size_t>{2}));
  EXPECT_EQ(post_sizes, (std::vector<size_t>{2}));
  EXPECT_EQ(first_in, x.sizes());
  EXPECT_EQ(values(logits), values(net.fc(x)));  // the same as calling the layer
  loss.backward();
  EXPECT_EQ(backward_calls, 1);  // only the loss took part in the backward
  EXPECT_TRUE(net.fc.weight.grad().defined());

  // One tensor: Module's virtual forward, the same hooks (lists of one).
  Tensor y = net(x);
  EXPECT_EQ(y.sizes(), (Shape{5, 3}));
  EXPECT_EQ(pre_sizes, (std::vector<size_t>{2, 1}));
  Tensor masked = net(x, std::optional<Tensor>(zeros({5, 3})), 2.0);
  EXPECT_EQ(values(masked), std::vector<double>(15, 0.0));
  Tensor unmasked = net(x, std::optional<Tensor>(), 2.0);
  EXPECT_EQ(pre_sizes, (std::vector<size_t>{2, 1, 2, 1}));  // a missing optional is no input
  EXPECT_EQ(single_pre, 4);
  EXPECT_EQ(single_post, 4);
}

TEST(CallableModule, ToAndStateDictsWorkAsForAnyModule) {
  manual_seed(2);
  Classifier a, b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(a.state_dict().size(), 2u);
  a.to(DType::F64);
  EXPECT_EQ(a.fc.weight.dtype(), DType::F64);
  auto [logits, loss] = a(randn({2, 4}, {.dtype = DType::F64}), zeros({2, 3}, {.dtype = DType::F64}));
  EXPECT_EQ(logits.dtype(), DType::F64);
  optim::SGD opt(a.parameters(), {.lr = 0.1});
  loss.backward();
  opt.step();
}

namespace {

// Attention written out with loops in double precision: causal, plus a bool attn_mask (T, T)
// (true = blocked) and a bool key padding mask (B, T) (true = padding), from the module's weights.
std::vector<double> naive_attention(nn::CausalSelfAttention& attn, const Tensor& x, const std::vector<char>& mask,
                                    const std::vector<char>& padding) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = attn.n_head, hd = C / H;
  const std::vector<double> xs = values(x), w = values(attn.c_attn.weight), bw = values(attn.c_attn.bias),
                            pw = values(attn.c_proj.weight), pb = values(attn.c_proj.bias);
  auto proj = [&](int64_t b, int64_t t, int64_t o) {  // (x W^T + b)[o]
    double s = bw[static_cast<size_t>(o)];
    for (int64_t c = 0; c < C; ++c)
      s += xs[static_cast<size_t>((b * T + t) * C + c)] * w[static_cast<size_t>(o * C + c)];
    return s;
  };
  std::vector<double> out(static_cast<size_t>(B * T * C));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> y(static_cast<size_t>(C), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> score(static_cast<size_t>(T), -INFINITY);
        double mx = -INFINITY;
        for (int64_t s = 0; s <= t; ++s) {
          if (!mask.empty() && mask[static_cast<size_t>(t * T + s)]) continue;
          if (!padding.empty() && padding[static_cast<size_t>(b * T + s)]) continue;
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += proj(b, t, h * hd + i) * proj(b, s, C + h * hd + i);
          score[static_cast<size_t>(s)] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, score[static_cast<size_t>(s)]);
        }
        double z = 0;
        for (int64_t s = 0; s < T; ++s)
          z += std::isinf(score[static_cast<size_t>(s)]) ? 0 : std::exp(score[static_cast<size_t>(s)] - mx);
        for (int64_t s = 0; s < T; ++s) {
          if (std::isinf(score[static_cast<size_t>(s)])) continue;
          const double p = std::exp(score[static_cast<size_t>(s)] - mx) / z;
          for (int64_t i = 0; i < hd; ++i) y[static_cast<size_t>(h * hd + i)] += p * proj(b, s, 2 * C + h * hd + i);
        }
      }
      for (int64_t o = 0; o < C; ++o) {
        double s = pb[static_cast<size_t>(o)];
        for (int64_t c = 0; c < C; ++c) s += y[static_cast<size_t>(c)] * pw[static_cast<size_t>(o * C + c)];
        out[static_cast<size_t>((b * T + t) * C + o)] = s;
      }
    }
  return out;
}

}  // namespace

TEST(AttentionMask, NoMaskIsTheDefaultPathBitForBit) {
  manual_seed(3);
  nn::CausalSelfAttention attn(8, 2);
  Tensor x = randn({2, 5, 8});
  const auto want = values(attn(x));
  EXPECT_EQ(values(attn(x, Tensor())), want);
  EXPECT_EQ(values(attn(x, zeros({5, 5}, {.dtype = DType::Bool}))), want);
  EXPECT_EQ(values(attn(x, Tensor(), zeros({2, 5}, {.dtype = DType::Bool}))), want);
  EXPECT_EQ(values(attn(x, zeros({5, 5}))), want);  // an additive mask of zeros
}

TEST(AttentionMask, MasksMatchANaiveReference) {
  manual_seed(4);
  nn::CausalSelfAttention attn(8, 2);
  attn.to(DType::F64);
  const int64_t B = 2, T = 5;
  Tensor x = randn({B, T, 8}, {.dtype = DType::F64});
  // Query t may not look at key t-1 (except t = 1 whose only other key is 0: key 0 stays visible).
  std::vector<char> mask(static_cast<size_t>(T * T), 0);
  for (int64_t t = 2; t < T; ++t) mask[static_cast<size_t>(t * T + t - 1)] = 1;
  // Batch 0 has its last two positions padded, batch 1 none (right padding).
  std::vector<char> padding = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  std::vector<uint8_t> m8(mask.begin(), mask.end()), p8(padding.begin(), padding.end());
  Tensor bool_mask = kernels::cast(from_vector<uint8_t>(m8, {T, T}), DType::Bool);
  Tensor bool_pad = kernels::cast(from_vector<uint8_t>(p8, {B, T}), DType::Bool);
  expect_near(values(attn(x, bool_mask)), naive_attention(attn, x, mask, {}), 1e-12, "attn_mask");
  expect_near(values(attn(x, Tensor(), bool_pad)), naive_attention(attn, x, {}, padding), 1e-12, "key_padding_mask");
  expect_near(values(attn(x, bool_mask, bool_pad)), naive_attention(attn, x, mask, padding), 1e-12, "both");
  // Additive float masks: -inf where blocked give the same; (B, T, T) masks per batch element.
  Tensor float_mask = masked_fill(zeros({T, T}, {.dtype = DType::F64}), bool_mask, -INFINITY);
  expect_near(values(attn(x, float_mask)), naive_attention(attn, x, mask, {}), 1e-12, "float attn_mask");
  Tensor per_batch = bool_mask.unsqueeze(0).expand({B, T, T}).contiguous();
  expect_near(values(attn(x, per_batch)), naive_attention(attn, x, mask, {}), 1e-12, "(B, T, T) attn_mask");
  // The block passes the masks to its attention: positions < 3 of batch 0 equal a run on them alone.
  nn::TransformerBlock block(8, 2);
  block.to(DType::F64);
  Tensor y = block(x, Tensor(), bool_pad);
  expect_near(values(y.select(0, 0).narrow(0, 0, 3)), values(block(x.narrow(0, 0, 1).narrow(1, 0, 3))), 1e-12,
              "block with padding");
}

TEST(AttentionMask, GradientsPassAFiniteDifferenceCheck) {
  manual_seed(5);
  nn::CausalSelfAttention attn(4, 2);
  attn.to(DType::F64);
  Tensor pad = kernels::cast(from_vector<uint8_t>({0, 0, 1, 0, 0, 0}, {2, 3}), DType::Bool);
  Tensor mask = randn({3, 3}, {.dtype = DType::F64});
  brisk::testing::expect_gradcheck([&](const std::vector<Tensor>& v) { return attn(v[0], mask, pad); },
                                   {brisk::testing::leaf(randn({2, 3, 4}, {.dtype = DType::F64}))}, "masked attention");
}

TEST(AttentionMask, BadMasksAreErrorsNamingTheShapes) {
  nn::CausalSelfAttention attn(8, 2);
  Tensor x = randn({2, 5, 8});
  try {
    attn(x, zeros({4, 5}, {.dtype = DType::Bool}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_mask must be (T, T)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(attn(x, Tensor(), zeros({2, 4}, {.dtype = DType::Bool})), Error);
  EXPECT_THROW(attn(x, zeros({5, 5}, {.dtype = DType::I64})), Error);
}
