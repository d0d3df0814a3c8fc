// GPT-2 and BERT read from Hugging Face folders, run on the GPU, against the goldens of the PyTorch
// reference that follows transformers' modeling code (tests/data/fixtures/hf, made by
// tests/models/reference/hf_reference.py; the CPU checks are tests/models/test_pretrained_reference.cpp).
// In f32 (TF32 off, brisk's default) within 1e-4 of the largest value; under bf16 autocast within
// twice the deviation of the same model's bf16 run on the CPU (both round every product's inputs
// to 8 bits of mantissa, at the same places), and never past 5e-2.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <algorithm>

#include "common/compare.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using brisk::testing::relative_error;

namespace {

constexpr double kF32Tolerance = 1e-4;
constexpr double kBf16Ceiling = 5e-2;

std::string fixture(const std::string& name) {
  return std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/hf/" + name;
}

data::SafetensorsFile goldens(const std::string& name) {
  return data::load_safetensors(fixture("goldens/" + name + ".safetensors"));
}

// x (B, T, V) with the positions where the mask is 0 zeroed (their outputs are unspecified).
Tensor tokens_only(const Tensor& x, const Tensor& mask) {
  Tensor m = mask.to(DType::F32).to(x.device());
  while (m.dim() < x.dim()) m = m.unsqueeze(-1);
  return x.to(DType::F32) * m;
}

// GPT-2's logits for the golden inputs on `device`, under bf16 autocast when `bf16`.
Tensor gpt2_logits(models::GPT2& model, const data::SafetensorsFile& g, Device device, bool bf16) {
  NoGradGuard no_grad;
  amp::Autocast ac(DType::BF16, bf16);
  Tensor logits = model(g.at("input_ids").to(device), g.at("attention_mask").to(device));
  return tokens_only(logits, g.at("attention_mask")).to(kCPU);
}

}  // namespace

TEST(PretrainedOnTheGpu, GPT2LogitsEqualTransformersInF32AndBf16) {
  SKIP_WITHOUT_GPU();
  const Device gpu = cuda_device(0);
  auto [model, report] = models::GPT2::from_pretrained(fixture("gpt2"));
  model->eval();
  const auto g = goldens("gpt2");
  const Tensor want = tokens_only(g.at("logits"), g.at("attention_mask"));
  const double cpu_bf16 = relative_error(gpt2_logits(*model, g, kCPU, true), want);
  model->to(gpu);
  EXPECT_LE(relative_error(gpt2_logits(*model, g, gpu, false), want), kF32Tolerance);
  const double gpu_bf16 = relative_error(gpt2_logits(*model, g, gpu, true), want);
  EXPECT_LE(gpu_bf16, std::max(2 * cpu_bf16, 1e-3)) << "CPU bf16 deviation " << cpu_bf16;
  EXPECT_LE(gpu_bf16, kBf16Ceiling);
}

TEST(PretrainedOnTheGpu, BertClassifierLossAndGradientsEqualTransformersInF32) {
  SKIP_WITHOUT_GPU();
  const Device gpu = cuda_device(0);
  auto [model, report] = models::BertForSequenceClassification::from_pretrained(fixture("bert_cls_sharded"));
  model->eval();
  model->to(gpu);
  const auto g = goldens("bert_cls_sharded");
  Tensor logits = (*model)(g.at("input_ids").to(gpu), g.at("attention_mask").to(gpu), g.at("token_type_ids").to(gpu));
  Tensor loss = model->loss(logits, g.at("labels").to(gpu));
  EXPECT_LE(relative_error(logits.detach().to(kCPU), g.at("logits")), kF32Tolerance);
  EXPECT_LE(relative_error(loss.detach().to(kCPU), g.at("loss")), kF32Tolerance);
  loss.backward();
  size_t compared = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.find("key.bias") != std::string::npos) continue;  // zero in exact arithmetic: noise on both sides
    const Tensor* want = g.find("grad." + name);
    ASSERT_NE(want, nullptr) << name;
    EXPECT_LE(relative_error(p.grad().to(kCPU), *want), kF32Tolerance) << name;
    ++compared;
  }
  EXPECT_GT(compared, 10u);
}

TEST(PretrainedOnTheGpu, BertHiddenStatesUnderBf16AutocastStayWithinTwiceTheCpusBf16Deviation) {
  SKIP_WITHOUT_GPU();
  const Device gpu = cuda_device(0);
  auto [loaded, report] = models::BertModel::from_pretrained(fixture("bert"));
  auto& model = loaded;  // a lambda may not capture a structured binding in clang 14
  model->eval();
  const auto g = goldens("bert");
  auto hidden_on = [&](Device device) {
    NoGradGuard no_grad;
    amp::Autocast ac(DType::BF16);
    auto [hidden, pooled] =
        (*model)(g.at("input_ids").to(device), g.at("attention_mask").to(device), g.at("token_type_ids").to(device));
    return hidden.to(DType::F32).to(kCPU);
  };
  const double cpu_bf16 = relative_error(hidden_on(kCPU), g.at("last_hidden_state"));
  model->to(gpu);
  const double gpu_bf16 = relative_error(hidden_on(gpu), g.at("last_hidden_state"));
  EXPECT_LE(gpu_bf16, std::max(2 * cpu_bf16, 1e-3)) << "CPU bf16 deviation " << cpu_bf16;
  EXPECT_LE(gpu_bf16, kBf16Ceiling);
}
