// brisk's GPT-2 and BERT read from Hugging Face folders against the PyTorch reference that follows
// transformers' modeling code (tests/models/reference/hf_reference.py made the folders and the
// goldens under tests/data/fixtures/hf): logits, hidden states and pooled outputs with padding and
// attention masks, the classifier's loss and every parameter's gradient, within 1e-5 relative in f32.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <algorithm>

#include "common/compare.h"

using namespace brisk;
using brisk::testing::relative_error;

namespace {

constexpr double kTolerance = 1e-5;  // max |brisk - reference| / max |reference|, per tensor

std::string hf_fixture(const std::string& name) {
  return std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/hf/" + name;
}

data::SafetensorsFile goldens(const std::string& name) {
  return data::load_safetensors(hf_fixture("goldens/" + name + ".safetensors"));
}

// x (B, T, ...) with the padding positions zeroed: where no key is a token (left padding in GPT-2)
// the outputs are unspecified, so the comparison looks at the tokens only.
Tensor tokens_only(const Tensor& x, const Tensor& mask) {
  Tensor m = mask.to(DType::F32);
  while (m.dim() < x.dim()) m = m.unsqueeze(-1);
  return x * m;
}

bool in_report(const std::vector<models::ReportedTensor>& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(), [&](const auto& r) { return r.name == name; });
}

}  // namespace

TEST(PretrainedReference, GPT2LogitsEqualTransformersWithPaddingMasks) {
  auto [model, report] = models::GPT2::from_pretrained(hf_fixture("gpt2"));
  model->eval();
  const auto g = goldens("gpt2");
  NoGradGuard no_grad;
  const Tensor &ids = g.at("input_ids"), &mask = g.at("attention_mask"), &want = g.at("logits");
  Tensor logits = (*model)(ids, mask);
  EXPECT_LE(relative_error(tokens_only(logits, mask), tokens_only(want, mask)), kTolerance);
  // The right-padded row at every position, padding included (each still sees a token).
  EXPECT_LE(relative_error(logits.select(0, 1), want.select(0, 1)), kTolerance);
  EXPECT_LE(relative_error((*model)(ids), g.at("logits_nomask")), kTolerance);
  // transformer.-prefixed names, the old attention buffers and the tied lm_head copy: 26 tensors
  // loaded, the buffers and the copy reported as ignored.
  EXPECT_EQ(report.loaded, 2 + 2 * 12 + 2);
  EXPECT_TRUE(in_report(report.ignored, "transformer.h.0.attn.bias"));
  EXPECT_TRUE(in_report(report.ignored, "transformer.h.1.attn.masked_bias"));
  EXPECT_TRUE(in_report(report.ignored, "lm_head.weight"));
  EXPECT_TRUE(report.initialized.empty());
  EXPECT_TRUE(report.unexpected.empty());
}

TEST(PretrainedReference, GPT2HalfPrecisionFolderWithoutPrefixLoadsIntoF32) {
  auto [model, report] = models::GPT2::from_pretrained(hf_fixture("gpt2_f16"));
  model->eval();
  EXPECT_EQ(model->wte.weight.dtype(), DType::F32);
  EXPECT_DOUBLE_EQ(model->ln_f.eps, 1e-6);
  const auto g = goldens("gpt2_f16");
  NoGradGuard no_grad;
  Tensor logits = (*model)(g.at("input_ids"), g.at("attention_mask"));
  EXPECT_LE(
      relative_error(tokens_only(logits, g.at("attention_mask")), tokens_only(g.at("logits"), g.at("attention_mask"))),
      kTolerance);
  EXPECT_TRUE(report.ignored.empty());
}

TEST(PretrainedReference, BertHiddenStatesAndPooledOutputEqualTransformers) {
  auto [model, report] = models::BertModel::from_pretrained(hf_fixture("bert"));
  model->eval();
  const auto g = goldens("bert");
  NoGradGuard no_grad;
  auto [hidden, pooled] = (*model)(g.at("input_ids"), g.at("attention_mask"), g.at("token_type_ids"));
  EXPECT_LE(relative_error(hidden, g.at("last_hidden_state")), kTolerance);
  EXPECT_LE(relative_error(pooled, g.at("pooler_output")), kTolerance);
  auto [hidden_all, pooled_all] = (*model)(g.at("input_ids"), Tensor());
  EXPECT_LE(relative_error(hidden_all, g.at("last_hidden_state_nomask")), kTolerance);
  EXPECT_LE(relative_error(pooled_all, g.at("pooler_output_nomask")), kTolerance);
  // The mask matters: without it the padded rows' states differ.
  EXPECT_GT(relative_error(hidden_all, g.at("last_hidden_state")), 1e-3);
  EXPECT_TRUE(in_report(report.ignored, "embeddings.position_ids"));
}

TEST(PretrainedReference, BertClassifierLossAndEveryGradientEqualTransformers) {
  auto [model, report] = models::BertForSequenceClassification::from_pretrained(hf_fixture("bert_cls_sharded"));
  model->eval();  // the reference ran without dropout
  EXPECT_EQ(report.files.size(), 3u);
  EXPECT_EQ(model->bert.config.labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  const auto g = goldens("bert_cls_sharded");
  Tensor logits = (*model)(g.at("input_ids"), g.at("attention_mask"), g.at("token_type_ids"));
  Tensor loss = model->loss(logits, g.at("labels"));
  EXPECT_LE(relative_error(logits.detach(), g.at("logits")), kTolerance);
  EXPECT_LE(relative_error(loss.detach(), g.at("loss")), kTolerance);
  loss.backward();
  size_t compared = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    const Tensor* want = g.find("grad." + name);
    ASSERT_NE(want, nullptr) << name;
    if (name.find("key.bias") != std::string::npos) {
      // Exactly zero in exact arithmetic (a constant added to every key's score cancels in the
      // softmax): both sides hold rounding noise, compared with the other gradients' scale.
      EXPECT_LT(max(abs(p.grad())).item<double>(), 1e-7) << name;
      EXPECT_LT(max(abs(*want)).item<double>(), 1e-7) << name;
    } else {
      EXPECT_LE(relative_error(p.grad(), *want), kTolerance) << name;
    }
    ++compared;
  }
  EXPECT_EQ(compared, g.size() - 6);  // every gradient of the reference (the rest are inputs and outputs)
  // The padding token's embedding row gets no gradient, as nn.Embedding(padding_idx=0).
  EXPECT_EQ(sum(abs(model->bert.embeddings.word_embeddings.weight.grad().select(0, 0))).item<double>(), 0.0);
}

TEST(PretrainedReference, BertMaskedLMFromOldBf16PretrainingFolderEqualsTransformers) {
  auto [model, report] = models::BertForMaskedLM::from_pretrained(hf_fixture("bert_pretraining_old"));
  model->eval();
  const auto g = goldens("bert_pretraining_old");
  NoGradGuard no_grad;
  Tensor logits = (*model)(g.at("input_ids"), g.at("attention_mask"), g.at("token_type_ids"));
  EXPECT_LE(relative_error(logits, g.at("logits")), kTolerance);
  EXPECT_LE(relative_error(models::BertForMaskedLM::loss(logits, g.at("labels")), g.at("loss")), kTolerance);
  // gamma/beta read as weight/bias; the tied decoder copy, the next-sentence head and the pooler ignored.
  EXPECT_TRUE(in_report(report.ignored, "cls.predictions.decoder.weight"));
  EXPECT_TRUE(in_report(report.ignored, "cls.seq_relationship.weight"));
  EXPECT_TRUE(in_report(report.ignored, "bert.pooler.dense.weight"));
  EXPECT_TRUE(report.initialized.empty());
}
