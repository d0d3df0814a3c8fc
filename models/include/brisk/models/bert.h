// BERT as transformers' BertModel computes it: word + position + token-type embeddings and a
// LayerNorm, then num_hidden_layers post-LayerNorm encoder layers (bidirectional self-attention
// with padding keys masked, a GELU MLP), and the pooler tanh(dense(first token)); the heads
// BertForSequenceClassification (dropout, linear on the pooled output) and BertForMaskedLM
// (dense, GELU, LayerNorm, then the word embedding as decoder plus a bias). Module and tensor names
// are transformers' own (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.
// weight, ...), so state_dict() is what its save_pretrained writes. Init as transformers' BERT:
// linear weights and embeddings N(0, initializer_range), biases 0, the padding row 0, LayerNorms 1, 0.
//
//   auto [model, report] = models::BertForSequenceClassification::from_pretrained(dir, {.num_labels = 4});
//   std::cout << report << "\n";
//   Tensor logits = (*model)(input_ids, attention_mask, token_type_ids);  // (B, T) each -> (B, 4)
//   Tensor loss = model->loss(logits, labels);                            // cross entropy
//   model->save_pretrained("out");
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "brisk/models/pretrained.h"
#include "brisk/nn/containers.h"
#include "brisk/nn/layers.h"
#include "brisk/util/json.h"

namespace brisk::models {

// config.json's hidden_act values brisk computes: "gelu" (exact erf), "gelu_new" and
// "gelu_pytorch_tanh" (the tanh form), "relu".
enum class BertActivation { Gelu, GeluNew, GeluPytorchTanh, Relu };

// The loss BertForSequenceClassification::loss computes (config.json's problem_type; Auto picks as
// transformers does: regression when num_labels == 1, else single-label for integer labels and
// multi-label for floating ones).
enum class BertProblemType { Auto, Regression, SingleLabel, MultiLabel };

// transformers' BertConfig, its defaults (bert-base) and key names.
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  BertActivation hidden_act = BertActivation::Gelu;
  double hidden_dropout_prob = 0.1;           // embeddings and every residual branch
  double attention_probs_dropout_prob = 0.1;  // the attention weights
  std::optional<double> classifier_dropout = std::nullopt;  // the classifier's input; unset: hidden_dropout_prob
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  std::optional<int64_t> pad_token_id = 0;  // the word embedding row that gets no gradient
  // id2label: the classifier's labels in id order; num_labels is their count.
  std::vector<std::string> labels = {"LABEL_0", "LABEL_1"};
  BertProblemType problem_type = BertProblemType::Auto;
  // Keys of a Hugging Face config.json that brisk does not use, written back by save_pretrained.
  json::Value other_keys = {};

  int64_t num_labels() const { return static_cast<int64_t>(labels.size()); }
  // labels = {"LABEL_0", ..., "LABEL_<n-1>"}, as transformers names them.
  void set_num_labels(int64_t n);
  // Throws brisk::Error naming the first field out of range.
  void validate() const;
  // "tiny" (hidden 32, 2 layers, 4 heads, intermediate 37, vocabulary 99, 64 positions: tests),
  // "mini" (256, 4, 4, 1024: google/bert_uncased_L-4_H-256_A-4's shape), "base" (bert-base: the
  // defaults above). The vocabulary size is the caller's to set for its tokenizer.
  static BertConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();
  // The config of a Hugging Face BERT folder (config.json), every value type- and range-checked
  // (errors name the key, the value and the file); model_type must be "bert".
  static BertConfig from_pretrained(const std::string& dir);
};

// What BertModel / BertForSequenceClassification / BertForMaskedLM::from_pretrained may change.
struct BertPretrainedOptions {
  // A classifier for this many labels (LABEL_0 ...). When it differs from the folder's config the
  // head is new: initialised as transformers does, the folder's one ignored, both reported.
  std::optional<int64_t> num_labels = std::nullopt;
  // The labels themselves (id2label in id order); sets num_labels.
  std::optional<std::vector<std::string>> labels = std::nullopt;
  std::optional<double> hidden_dropout_prob = std::nullopt;
  std::optional<double> attention_probs_dropout_prob = std::nullopt;
  std::optional<double> classifier_dropout = std::nullopt;
  // Tensors no BERT model has are an error unless this is set (then the report lists them).
  bool allow_unexpected = false;
};

// Word, position and token-type embeddings, summed, LayerNorm, dropout.
class BertEmbeddings : public nn::CallableModule<BertEmbeddings> {
 public:
  explicit BertEmbeddings(const BertConfig& config);
  Tensor forward(const Tensor& input_ids) override { return forward(input_ids, Tensor()); }
  // input_ids (B, T) and token_type_ids (B, T) (undefined: all 0) -> (B, T, hidden)
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids);
  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm layer_norm;  // "LayerNorm"
  nn::Dropout dropout;
};

// One encoder layer: LayerNorm(x + dropout(dense(attention(x)))), then
// LayerNorm(h + dropout(dense(act(dense(h))))). Named as transformers' BertLayer:
// attention.self.{query,key,value}, attention.output.{dense,LayerNorm}, intermediate.dense,
// output.{dense,LayerNorm}.
class BertLayer : public nn::CallableModule<BertLayer> {
 public:
  explicit BertLayer(const BertConfig& config);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  // x (B, T, hidden); mask (B, 1, 1, T) f32 added to the scores (0 or a large negative), or undefined.
  Tensor forward(const Tensor& x, const Tensor& mask);
  nn::Linear query, key, value, attention_dense, intermediate_dense, output_dense;
  nn::LayerNorm attention_norm, output_norm;

 private:
  nn::Module attention_, self_, attention_output_, intermediate_, output_;  // transformers' name levels
  nn::Dropout attention_dropout_, attention_output_dropout_, output_dropout_;
  int64_t num_heads_;
  BertActivation act_;
};

// The encoder with its embeddings and (optionally) the pooler.
class BertModel : public nn::CallableModule<BertModel> {
 public:
  explicit BertModel(BertConfig config, bool add_pooling_layer = true);
  // The last hidden state (B, T, hidden) of input_ids alone.
  Tensor forward(const Tensor& input_ids) override;
  // input_ids (B, T) integer, T <= max_position_embeddings; attention_mask (B, T) of 1 (token) and
  // 0 (padding), any dtype, undefined: no padding; token_type_ids (B, T) in [0, type_vocab_size),
  // undefined: all 0. Returns (last hidden state (B, T, hidden), pooled output (B, hidden) or
  // undefined without a pooler). A padding key's score gets the lowest f32 added before the softmax
  // (computed in f32), as transformers does.
  std::tuple<Tensor, Tensor> forward(const Tensor& input_ids, const Tensor& attention_mask,
                                     const Tensor& token_type_ids = Tensor());

  static Pretrained<BertModel> from_pretrained(const std::string& dir, const BertPretrainedOptions& options = {});
  // config.json and model.safetensors (or shards) as transformers' BertModel.save_pretrained:
  // names without a prefix, the model's dtype, the same bytes for the same model.
  void save_pretrained(const std::string& dir, const SaveOptions& options = {}) const;

  BertConfig config;
  BertEmbeddings embeddings;
  nn::ModuleList layers;                     // "encoder.layer"
  std::shared_ptr<nn::Linear> pooler_dense;  // "pooler.dense"; null without a pooler

 private:
  nn::Module encoder_, pooler_;
};

class BertForSequenceClassification : public nn::CallableModule<BertForSequenceClassification> {
 public:
  explicit BertForSequenceClassification(BertConfig config);
  Tensor forward(const Tensor& input_ids) override { return forward(input_ids, Tensor()); }
  // Logits (B, num_labels) from classifier(dropout(pooled output)).
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask, const Tensor& token_type_ids = Tensor());
  // transformers' loss for config.problem_type: single-label cross entropy (labels (B) integer),
  // regression MSE (num_labels 1, labels (B) floating), multi-label BCE with logits (labels
  // (B, num_labels) floating).
  Tensor loss(const Tensor& logits, const Tensor& labels) const;

  // Reads a BERT folder of any of BertModel, BertForPreTraining, BertForMaskedLM,
  // BertForSequenceClassification (docs/pretrained.md): the classifier (and a pooler the folder
  // lacks) is initialised and reported when the folder has none or options.num_labels differs.
  static Pretrained<BertForSequenceClassification> from_pretrained(const std::string& dir,
                                                                   const BertPretrainedOptions& options = {});
  // As transformers: "bert."-prefixed base names and classifier.{weight,bias}.
  void save_pretrained(const std::string& dir, const SaveOptions& options = {}) const;

  BertModel bert;
  nn::Dropout dropout;
  nn::Linear classifier;
};

class BertForMaskedLM : public nn::CallableModule<BertForMaskedLM> {
 public:
  explicit BertForMaskedLM(BertConfig config);
  Tensor forward(const Tensor& input_ids) override { return forward(input_ids, Tensor()); }
  // Logits (B, T, vocab_size): LayerNorm(act(dense(h))) times the word embedding, plus the bias.
  Tensor forward(const Tensor& input_ids, const Tensor& attention_mask, const Tensor& token_type_ids = Tensor());
  // Mean cross entropy over the positions whose label is not -100 (labels (B, T)).
  static Tensor loss(const Tensor& logits, const Tensor& labels);

  // Reads a BERT folder (the head initialised and reported when it has none); the decoder is the
  // word embedding, so a cls.predictions.decoder.weight in the folder must equal it (and a
  // cls.predictions.decoder.bias the bias).
  static Pretrained<BertForMaskedLM> from_pretrained(const std::string& dir, const BertPretrainedOptions& options = {});
  // As transformers: "bert."-prefixed base names (no pooler), cls.predictions.{bias,transform.*};
  // the tied decoder left out.
  void save_pretrained(const std::string& dir, const SaveOptions& options = {}) const;

  BertModel bert;
  nn::Linear transform_dense;    // "cls.predictions.transform.dense"
  nn::LayerNorm transform_norm;  // "cls.predictions.transform.LayerNorm"
  Tensor bias;                   // "cls.predictions.bias" (vocab_size)

 private:
  nn::Module cls_, predictions_, transform_;
};

}  // namespace brisk::models
