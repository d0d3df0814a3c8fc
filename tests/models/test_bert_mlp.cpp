// BERT's feed-forward block with a tanh GELU (gelu_new, gelu_pytorch_tanh) runs as one gelu_mlp op:
// the same outputs and gradients, bit for bit on the CPU, as the linear -> gelu -> linear it
// replaces (which a hook on the intermediate dense layer brings back).
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <vector>

using namespace brisk;

TEST(BertMlp, TanhGeluLayerGivesTheUnfusedOutputsAndGradients) {
  for (models::BertActivation act : {models::BertActivation::GeluPytorchTanh, models::BertActivation::Gelu}) {
    models::BertConfig c = models::BertConfig::preset("tiny");
    c.hidden_act = act;
    manual_seed(9);
    models::BertLayer layer(c);
    layer.eval();  // no dropout
    const Tensor x0 = randn({2, 5, c.hidden_size}), g = randn({2, 5, c.hidden_size});
    std::vector<std::vector<Tensor>> results(2);
    for (int hooked = 0; hooked < 2; ++hooked) {
      if (hooked) layer.intermediate_dense.register_forward_hook([](nn::Module&, const Tensor&, const Tensor&) {});
      layer.zero_grad();
      Tensor x = x0.clone().requires_grad_();
      Tensor out = layer(x);
      out.backward(g);
      results[hooked].push_back(out.detach());
      results[hooked].push_back(x.grad());
      for (const Tensor& p : layer.parameters()) results[hooked].push_back(p.grad().clone());
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t i = 0; i < results[0].size(); ++i)
      EXPECT_EQ(results[0][i].to_vector<float>(), results[1][i].to_vector<float>()) << "tensor " << i;
  }
}
